"""Capability from rollups: a run's per-case outcomes are rolled up when it is summarised and
the "Is it worse?" report reads them without samples; each probe is folded once into the
per-category loss detectors, whose alarm (not a p-value) keeps a category on base; the daily
budget counts audits and estimates replies from the cases' observed output tokens."""

from __future__ import annotations

import importlib
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evals.stats.capability_loss import LossState
from monitor.derived import evidence, loss_detectors
from monitor.derived.rollups import record_run
from monitor.judging import capability
from monitor.models import Case, Endpoint, PairMonitorState, Run, RunKind, Sample
from monitor.runs import budget
from monitor.runs.pipeline import judge
from tests import factories

pytestmark = pytest.mark.django_db
CATEGORY = "tool_calls/simple"


def _world(n_cases: int = 6):
    suite = factories.suite(
        "bench", {f"t{i}": [{"role": "user", "content": f"q{i}"}] for i in range(n_cases)}
    )
    suite.cases.update(category=CATEGORY, max_tokens=1000)
    return factories.pair("cap", suite_row=suite)


def _probe(pair, *, fast_passes: bool, kind: str = RunKind.PROBE, out: int = 40) -> Run:
    """A done run where base passes every case and fast passes or fails them all (fast fails
    with schema_mismatch after calling the tool)."""
    run = factories.run(pair, kind=kind)
    for i, case in enumerate(pair.suite.cases.order_by("key")):
        for tier, ok in (("fast", fast_passes), ("base", True)):
            detail = {
                "kind": "tool_call",
                "category": CATEGORY,
                "called": True,
                "n_calls": 1,
                "n_schema_valid": int(ok),
                "error_class": None if ok else "schema_mismatch",
            }
            factories.sample(
                run,
                case,
                tier,
                seq=2 * i + (tier == "base"),
                tests_passed=ok,
                tests_detail=detail,
                prompt_tokens=100,
                completion_tokens=out,
            )
    record_run(run=run)
    return run


def test_the_report_reads_the_rollups_and_no_sample():
    pair = _world()
    runs = [_probe(pair, fast_passes=False) for _ in range(2)]
    before = capability.window_report(pair)
    Sample.objects.filter(run__in=runs).delete()  # the report must not need them
    report = capability.window_report(pair)
    assert report.results == before.results and report.losing == before.losing
    (result,) = report.results
    assert (result.n_cases, result.n_fast, result.diff_points) == (6, 12, -100.0)
    assert report.rates[CATEGORY]["fast"].passed == 0
    assert report.rates[CATEGORY]["base"].passed == 12
    assert report.errors["fast"] == {"schema_mismatch": 12}
    assert report.schema_valid["fast"].n == 12 and report.schema_valid["fast"].passed == 0
    assert report.tools.decision_f1 == 1.0  # both tiers called the tool every time
    assert {c.run_id for c in report.losing} == {runs[-1].id}
    assert {c.error_class for c in report.losing} == {"schema_mismatch"}


def test_each_probe_is_folded_once_and_the_alarm_keeps_the_category_on_base():
    pair = _world()
    limit = loss_detectors.threshold(pair)  # hourly assumed: 2160 · 1 / capability's 0.05
    assert limit == pytest.approx(43200)
    run = _probe(pair, fast_passes=False)
    judge(run_id=run.id)
    judge(run_id=run.id)  # a second fold of the same run changes nothing
    state = loss_detectors.states(pair)[CATEGORY]
    assert (state.runs, state.cases, state.alarmed) == (1, 6, False)
    advice = capability.window_report(pair).advice[CATEGORY]
    assert advice.startswith(f"undecided on `{CATEGORY}`")  # -100 points, but not controlled
    for _ in range(3):
        judge(run_id=_probe(pair, fast_passes=False).id)
    state = loss_detectors.states(pair)[CATEGORY]
    assert state.alarmed and state.runs == 4
    assert (
        capability.window_report(pair)
        .advice[CATEGORY]
        .startswith(f"keep `{CATEGORY}` on base: loss detected across runs")
    )
    evidence.acknowledge(pair=pair, user="ops")
    assert loss_detectors.states(pair) == {}
    assert PairMonitorState.objects.get(pair=pair).capability == {}


def test_an_honest_pair_is_never_advised_to_keep_on_base():
    pair = _world()
    for _ in range(3):
        judge(run_id=_probe(pair, fast_passes=True).id)
    assert loss_detectors.states(pair)[CATEGORY] == LossState(
        detectors=LossState().detectors, runs=3, cases=18
    )
    assert not capability.window_report(pair).advice[CATEGORY].startswith("keep")


def _price(pair, *, limit: float) -> None:
    Endpoint.objects.filter(pk__in=[pair.fast_id, pair.base_id]).update(
        price_input_per_mtok=1000.0, price_output_per_mtok=1000.0
    )
    pair.daily_budget_usd = limit
    pair.save()
    pair.refresh_from_db()


def test_audits_count_against_the_daily_budget():
    pair = _world()
    _price(pair, limit=10.0)
    audit = _probe(pair, fast_passes=True, kind=RunKind.AUDIT)
    cost = budget.run_cost(audit)["total"]  # 12 answers × 140 tokens at $1000/M
    assert cost == pytest.approx(12 * 140 * 1000 / 1e6)
    assert budget.spent_today(pair) == pytest.approx(cost)


def test_a_case_is_estimated_at_the_p90_of_its_observed_replies_else_max_tokens():
    pair = _world()
    _price(pair, limit=10.0)
    for out in (10, 20, 30, 40, 50, 60, 70, 80, 90, 100):
        _probe(pair, fast_passes=True, out=out)
    seen = budget.seen_tokens(pair)
    case = pair.suite.cases.get(key="t0")
    assert seen.output[("t0", "fast")] == 91  # P90 of 10…100, rounded up
    # per tier: 100 prompt + 91 output tokens at $1000/M; a never-answered case: max_tokens
    assert budget.case_estimate(case, pair, 1, seen) == pytest.approx(2 * 191 * 1e-3)
    fresh = Case.objects.create(
        suite=pair.suite,
        key="new",
        category=CATEGORY,
        messages=[{"role": "user", "content": "q"}],
        max_tokens=1000,
    )
    assert budget.case_estimate(fresh, pair, 1, seen) > 2 * 1000 * 1e-3


def _took(pair, keys, *, repeat=1, status="done", kind=RunKind.PROBE) -> Run:
    """A run that sent these cases ``repeat`` times to both tiers, rolled up when finished."""
    run = factories.run(pair, status=status, kind=kind, repeat=repeat)
    cases = pair.suite.cases.filter(key__in=keys)
    for seq, (case, tier, rep) in enumerate(
        (c, t, r) for c in cases for t in ("fast", "base") for r in range(repeat)
    ):
        factories.sample(run, case, tier, repetition=rep, seq=seq)
    if status == "done":
        record_run(run=run)
    return run


def test_rotation_counts_answers_from_the_rollups_and_a_running_run_from_its_samples():
    suite = factories.suite(
        "rot", {k: [{"role": "user", "content": k}] for k in ("a0", "a1", "a2", "b0", "b1", "b2")}
    )
    for letter in "ab":
        suite.cases.filter(key__startswith=letter).update(category=letter)
    pair = factories.pair("rot", suite_row=suite)
    done = [_took(pair, ["a0", "b0"], repeat=2), _took(pair, ["a0", "a1"])]
    _took(pair, ["b1"], status="running")  # no rollup yet
    _took(pair, ["a2", "b2"], kind=RunKind.AUDIT)  # another kind: not counted
    run = factories.run(pair, status="running")
    cases = list(suite.cases.all())
    # fast answers: a0 3, a1 1, a2 0; b0 2, b1 1, b2 0 → least first, round-robin a, b
    expected = ["a2", "b2", "a1", "b1", "a0", "b0"]
    assert [c.key for c in budget.rotation_order(run, cases)] == expected
    Sample.objects.filter(run__in=done).delete()  # finished runs are read from their rollups
    assert [c.key for c in budget.rotation_order(run, cases)] == expected


def test_a_run_that_overshoots_the_budget_says_so(admin_client):
    pair = _world()
    _price(pair, limit=0.5)
    run = _probe(pair, fast_passes=True)  # costs 1.68 against a 0.5 budget
    Run.objects.merge_summary(
        run.id, budget=budget.Budget(limit_usd=0.5, taken=6, available=6, keys=("t0",))
    )
    run.refresh_from_db()
    sentence = budget.settle(run)
    assert sentence.startswith("over budget: $1.6800 spent today of $0.50")
    run.refresh_from_db()
    assert run.summary_obj.budget.note == sentence
    html = admin_client.get(f"/pairs/{pair.name}/worse/").content.decode()
    assert 'id="budget-over"' in html and "over budget: $1.6800 spent today" in html


def _priced_probes(name: str, n_categories: int, n_runs: int) -> list[Run]:
    """Probes of a pair whose suite has 3 tool cases in each of ``n_categories`` categories;
    each answer costs 140 tokens at $1000/M = $0.14. Newest first."""
    suite = factories.suite(
        name,
        {
            f"c{c}-{i}": [{"role": "user", "content": "q"}]
            for c in range(n_categories)
            for i in range(3)
        },
    )
    for c in range(n_categories):
        suite.cases.filter(key__startswith=f"c{c}-").update(category=f"tool_calls/c{c}")
    pair = factories.pair(name, fast=f"{name}-fast", base=f"{name}-base", suite_row=suite)
    _price(pair, limit=100.0)
    return [_probe(pair, fast_passes=bool(r % 2)) for r in range(n_runs)][::-1]


def test_the_worse_page_takes_as_many_queries_for_12_runs_and_4_categories_as_for_2(admin_client):
    small, large = _priced_probes("small", 2, 2), _priced_probes("large", 4, 12)
    admin_client.get("/pairs/small/worse/")  # the session's first read of its user and roles

    def page(name):
        with CaptureQueriesContext(connection) as queries:
            html = admin_client.get(f"/pairs/{name}/worse/").content.decode()
        costs = re.findall(
            r'<a href="/runs/(\d+)/">#\d+</a></td><td>[^<]*</td>\s*<td>all</td>'
            r'\s*<td class="num">([^<]*)</td><td class="num">([^<]*)</td>'
            r'<td class="num">([^<]*)</td>',
            html,
        )
        return len(queries), costs, html

    queries_small, costs_small, html_small = page("small")
    queries_large, costs_large, html_large = page("large")
    # 3 cases × 2 (or 4) categories answered once per tier at $0.14; the 10 newest runs shown
    assert costs_small == [(str(r.id), "$0.8400", "$0.8400", "$1.68") for r in small]
    assert costs_large == [(str(r.id), "$1.68", "$1.68", "$3.36") for r in large[:10]]
    # fast passes every other run: all 3 cases of each category lose
    for html, k in ((html_small, 2), (html_large, 4)):
        assert html.count('<tr><th scope="row">tool_calls/c') == k
        assert f"<small>({3 * k} cases)</small>" in html
    assert queries_large == queries_small


def test_migration_0013_backfills_the_runs_rolled_up_before_it():
    from django.apps import apps

    backfill = importlib.import_module("monitor.migrations.0013_capability_rollups").backfill
    pair = _world()
    run = _probe(pair, fast_passes=False)
    written = {r.tier: (r.cases, r.prompt_tokens) for r in run.rollups.all()}
    run.rollups.update(cases={}, prompt_tokens=0, completion_tokens=0, cached_tokens=0)
    backfill(apps, None)
    assert {r.tier: (r.cases, r.prompt_tokens) for r in run.rollups.all()} == written
    assert written["fast"][0]["t0"]["f"] == "schema_mismatch"
