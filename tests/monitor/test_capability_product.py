"""Capability through the product's path: suites imported from files (versioned, all or
nothing), benchmark suites by name in the config, probes against the simulated vendor scored
per sample, the "Is it worse?" page, prices, cost per run and the daily budget."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

from evals.benchmarks import bfcl, importer
from evals.vendors.simulated import serve_in_thread
from monitor.judging import capability
from monitor.models import Case, Endpoint, Pair, Run, Sample, Suite
from monitor.runs import budget
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.setup.config import apply_config_text
from monitor.setup.suite_import import save_versioned
from tests import factories

pytestmark = pytest.mark.django_db

GOOD = """\
cases:
  - key: mine/lower
    prompt: Say hi in lowercase.
    category: instructions/verifiable
    constraints:
      - {kind: all_lowercase}
  - key: mine/add
    messages:
      - {role: user, content: "Write add(a, b)."}
    category: code/own
    unit_tests: |
      assert add(1, 2) == 3
"""
BAD_TAIL = """\
  - key: mine/words
    prompt: x
    constraints:
      - {kind: max_words}
  - key: mine/hard
    prompt: x
    difficulty: extreme
    unit_tests: "assert True"
"""


def test_import_suite_stores_a_file_and_versions_it_only_when_its_content_changes(tmp_path):
    path = tmp_path / "team_suite.yaml"
    path.write_text(GOOD)
    call_command("import_suite", str(path))
    v1 = Suite.objects.get(name="team-suite")
    assert v1.version == 1
    assert set(v1.cases.values_list("key", flat=True)) == {"mine/lower", "mine/add"}
    assert v1.cases.get(key="mine/add").unit_tests.strip() == "assert add(1, 2) == 3"

    call_command("import_suite", str(path))  # same content: nothing new
    assert Suite.objects.filter(name="team-suite").count() == 1

    pair = factories.pair(suite_row=v1)
    old_run = Run.objects.create(pair=pair, suite=v1)
    path.write_text(GOOD.replace("Say hi in lowercase.", "Say hello in lowercase."))
    call_command("import_suite", str(path))
    v2 = Suite.objects.get(name="team-suite", version=2)
    assert v2.cases.get(key="mine/lower").messages[0]["content"] == "Say hello in lowercase."
    old_run.refresh_from_db()
    assert old_run.suite == v1  # an existing run keeps the version it used
    assert v1.cases.get(key="mine/lower").messages[0]["content"] == "Say hi in lowercase."


def test_import_suite_names_file_line_and_field_and_writes_nothing(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(GOOD + BAD_TAIL)
    before = (Suite.objects.count(), Case.objects.count())
    with pytest.raises(CommandError) as err:
        call_command("import_suite", str(path))
    message = str(err.value)
    assert f"{path}:16: constraints[0].n: required by max_words" in message
    assert f"{path}:19: difficulty: easy or hard" in message
    assert (Suite.objects.count(), Case.objects.count()) == before


def test_import_suite_reads_humaneval_jsonl(tmp_path):
    row = {
        "task_id": "HumanEval/0",
        "prompt": "def inc(x):\n",
        "entry_point": "inc",
        "canonical_solution": "    return x + 1\n",
        "test": "def check(candidate):\n    assert candidate(1) == 2\n",
    }
    path = tmp_path / "he.jsonl"
    path.write_text(json.dumps(row) + "\n")
    call_command("import_suite", str(path), "--name", "he-mini")
    case = Suite.objects.get(name="he-mini").cases.get()
    assert case.key == "humaneval/0" and case.category == "code/humaneval"


def test_the_config_selects_a_benchmark_suite_with_prices_and_a_budget(benchmark_wheels):
    apply_config_text(
        """\
endpoints:
  - {name: f, base_url: "http://127.0.0.1:9/v1", local: true, model: m-fast,
     price_input_per_mtok: 0.5, price_output_per_mtok: 2, price_cached_input_per_mtok: 0.05}
  - {name: b, base_url: "http://127.0.0.1:9/v1", local: true, model: m-base,
     price_input_per_mtok: 3, price_output_per_mtok: 15}
pairs:
  - {name: p, fast: f, base: b, suite: bfcl_simple, daily_budget_usd: 2.5}
""",
        source="team.yaml",
    )
    pair = Pair.objects.get(name="p")
    assert pair.suite.name == "bfcl_simple" and pair.daily_budget_usd == 2.5
    case = pair.suite.cases.first()
    assert case.category == "tool_calls/simple" and case.tools and case.tool_answers
    assert Endpoint.objects.get(name="f").price_cached_input_per_mtok == 0.05


def _capability_suite(name: str) -> Suite:
    cases = (
        importer.builtin_cases("long_tail/cross_file")
        + importer.builtin_cases("long_tail/rare_apis")
        + importer.builtin_cases("structured")
        + bfcl.load_cases(["simple_python"], limit=16)
        + bfcl.load_cases(["irrelevance"], limit=10)
    )
    suite, _ = save_versioned(name=name, cases=cases)
    return suite


def _pair(name: str, url: str, fast_model: str, suite: Suite, **fields) -> Pair:
    fast = Endpoint.objects.create(
        name=f"{name}-fast", base_url=url, model=fast_model, simulated=True
    )
    base = Endpoint.objects.create(
        name=f"{name}-base", base_url=url, model="demo-base", simulated=True
    )
    # one repetition (no longer the model's default of 2): these tests count samples as cases
    fields = {"repeat": 1, **fields}
    return Pair.objects.create(name=name, fast=fast, base=base, suite=suite, **fields)


@pytest.mark.long
def test_a_distilled_fast_tier_shows_a_loss_and_an_honest_one_none(admin_client, benchmark_wheels):
    suite = _capability_suite("capability-mini")
    with serve_in_thread(time_scale=0.0) as url:
        distilled = _pair("distilled", url, "demo-distilled", suite)
        honest = _pair("honest", url, "demo-fast", suite)
        for pair in (distilled, honest):
            for _ in range(2):
                run = execute_run(run_id=create_run(pair=pair).id)
                assert run.status == "done", run.error

    # every sample of a benchmark case carries its outcome, with category and error class
    tool = Sample.objects.filter(
        run__pair=distilled, tier="fast", case__category="tool_calls/simple", tests_passed=False
    )
    assert tool.exists()
    classes = {s.tests_detail["error_class"] for s in tool}
    assert classes <= {
        "invalid_json",
        "schema_mismatch",
        "no_call",
        "wrong_arguments",
        "unknown_function",
        "wrong_function",
        "wrong_count",
    }
    assert all(s.tests_detail["category"] == "tool_calls/simple" for s in tool)

    lost = capability.window_report(distilled)
    kept = [
        r
        for r in lost.results
        if r.p_adjusted is not None and r.p_adjusted < r.alpha and r.diff_points < 0
    ]
    assert kept, [(r.category, r.diff_points, r.p_adjusted) for r in lost.results]
    assert lost.tools is not None and lost.tools.decision_f1 < 1.0

    fine = capability.window_report(honest)
    assert all(r.diff_points == 0 for r in fine.results)
    assert fine.losing == []

    html = admin_client.get("/pairs/distilled/worse/").content.decode()
    # two runs: the window shows the loss, but the loss detector (the controlled decision
    # across runs) has not reached its threshold yet, so nothing is routed to fast either
    assert f"undecided on `{kept[0].category}`" in html and "route `" not in html
    assert 'id="loss-budget"' in html and "none yet: detector" in html
    assert 'id="losing-table"' in html and "Tool calls" in html
    for chart_title in ("Pass rate per category and tier", "Paired difference per category"):
        assert chart_title in html
    case = lost.losing[0]
    diff = admin_client.get(f"/runs/{case.run_id}/case-diff/{case.key}")
    assert diff.status_code == 200 and case.key in diff.content.decode()

    html = admin_client.get("/pairs/honest/worse/").content.decode()
    assert "keep `" not in html
    # no loss, but 16 paired cases cannot yet detect a 10-point drop: undecided, says why
    assert "undecided on `tool_calls/simple` (+0 points" in html
    assert "more paired cases to detect a 10-point drop" in html
    assert "No case where the fast tier passes less often than base." in html


def _priced_pair(url: str, **fields) -> Pair:
    suite, _ = save_versioned(name="structured-mini", cases=importer.builtin_cases("structured"))
    pair = _pair("priced", url, "demo-fast", suite, **fields)
    Endpoint.objects.filter(pk=pair.fast_id).update(
        price_input_per_mtok=100.0, price_output_per_mtok=400.0
    )
    Endpoint.objects.filter(pk=pair.base_id).update(
        price_input_per_mtok=300.0, price_output_per_mtok=1200.0
    )
    pair.refresh_from_db()
    return pair


def test_the_daily_budget_limits_cases_says_so_and_is_never_exceeded(admin_client):
    with serve_in_thread(time_scale=0.0) as url:
        pair = _priced_pair(url, daily_budget_usd=1.0)
        first = execute_run(run_id=create_run(pair=pair).id)
        second = execute_run(run_id=create_run(pair=pair).id)
    for run in (first, second):
        assert run.status == "done", run.error
    block = first.summary_obj.budget
    n_cases = pair.suite.cases.count()
    assert block.limited and 0 < block.taken < n_cases
    assert block.note.startswith(f"limited by budget: {block.taken} of {n_cases} cases")
    assert first.samples.filter(tier="fast").count() == block.taken
    spent = sum(budget.run_cost(r)["total"] for r in (first, second))
    assert spent <= pair.daily_budget_usd
    # rotation: the second run moves on to cases the first did not take (an answered case may
    # still be taken when it is the only one that fits what is left of the day's budget)
    taken_first = set(first.samples.values_list("case__key", flat=True))
    taken_second = set(second.samples.values_list("case__key", flat=True))
    assert taken_second - taken_first

    html = admin_client.get(f"/runs/{first.id}/").content.decode()
    assert "limited by budget:" in html and 'id="run-cost"' in html
    html = admin_client.get("/pairs/priced/worse/").content.decode()
    assert "The budget limits power." in html
    assert "limited by budget:" in html


def test_cost_per_run_from_usage_and_prices(admin_client):
    pair = factories.pair("costly")
    Endpoint.objects.filter(pk=pair.fast_id).update(
        price_input_per_mtok=2.0, price_output_per_mtok=8.0, price_cached_input_per_mtok=0.5
    )
    Endpoint.objects.filter(pk=pair.base_id).update(
        price_input_per_mtok=4.0, price_output_per_mtok=16.0
    )
    pair.refresh_from_db()
    run = Run.objects.create(pair=pair, suite=pair.suite, status="done")
    case = pair.suite.cases.first()
    now = datetime.now(UTC)
    Sample.objects.create(
        run=run,
        case=case,
        endpoint=pair.fast,
        tier="fast",
        started_at=now,
        ok=True,
        prompt_tokens=1000,
        cached_tokens=200,
        completion_tokens=500,
    )
    Sample.objects.create(
        run=run,
        case=case,
        endpoint=pair.base,
        tier="base",
        started_at=now,
        ok=True,
        prompt_tokens=1000,
        completion_tokens=250,
        seq=1,
    )
    cost = budget.run_cost(run)
    # fast: 800 × $2 + 200 × $0.5 (cached) + 500 × $8, per million; base: 1000 × $4 + 250 × $16
    assert cost["fast"] == pytest.approx(0.0057)
    assert cost["base"] == pytest.approx(0.008)
    assert cost["total"] == pytest.approx(0.0137)
    assert "$0.0137" in admin_client.get(f"/runs/{run.id}/").content.decode()
    assert "$0.0137" in admin_client.get("/pairs/costly/").content.decode()


def test_an_unpriced_endpoint_is_said_not_to_limit():
    with serve_in_thread(time_scale=0.0) as url:
        suite, _ = save_versioned(name="s", cases=importer.builtin_cases("structured"))
        pair = _pair("unpriced", url, "demo-fast", suite, daily_budget_usd=0.01)
        run = execute_run(run_id=create_run(pair=pair).id)
    block = run.summary_obj.budget
    assert not block.limited and "has no prices" in block.note
    assert block.taken == suite.cases.count()
    assert budget.run_cost(run)["total"] is None
