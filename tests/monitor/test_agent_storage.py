"""How an agent episode is stored (``monitor.runs.episodes``): a taken-over run plays again
only the episodes its lost worker left open, dropping their partial samples; the episode's
outcome reaches the rollups once per episode, with the requests it took; the budget counts a
task at its expected requests, from the benchmark's own answer until it was played."""

from __future__ import annotations

import pytest

from evals.benchmarks import bfcl_multi_turn
from evals.plan import plan_run
from monitor.derived import loss_detectors
from monitor.derived.rollups import case_outcomes
from monitor.models import Case, Endpoint, RunRollup
from monitor.runs import budget, steps
from monitor.setup.suite_import import save_versioned
from tests import factories

pytestmark = pytest.mark.django_db

AGENT = {"source": "bfcl", "id": "multi_turn_base_0", "category": "multi_turn_base", "turns": 2}


def _agent_pair():
    suite = factories.suite("agent-mini")
    Case.objects.create(
        suite=suite,
        key="bfcl/multi_turn_base_0",
        category="agent/base",
        messages=[{"role": "user", "content": "cd into the folder"}],
        agent=AGENT,
    )
    return factories.pair(suite_row=suite, repeat=1)


def test_a_taken_over_run_plays_again_only_the_episodes_left_open():
    pair = _agent_pair()
    run = factories.run(pair, status="running")
    agent = pair.suite.cases.get(key="bfcl/multi_turn_base_0")
    single = pair.suite.cases.get(key="hello")
    # base closed its episode (the last sample carries it); fast was cut after two requests
    factories.sample(run, agent, "base", turn=0, step=0)
    factories.sample(run, agent, "base", turn=0, step=1, tests_detail={"kind": "agent"})
    open_steps = [factories.sample(run, agent, "fast", turn=0, step=i) for i in (0, 1)]
    factories.sample(run, single, "fast")
    plan = plan_run([agent.key, single.key], repeat=1, seed=1)

    left = steps.not_yet_stored(run, plan, {agent.key})

    assert {(p.case_key, p.tier) for p in left} == {(agent.key, "fast"), (single.key, "base")}
    assert not run.samples.filter(id__in=[s.id for s in open_steps]).exists()
    assert run.samples.filter(case=agent, tier="base").count() == 2


def test_an_episode_counts_once_in_the_rollup_with_the_requests_it_took():
    rows = [
        {
            "case__key": "bfcl/multi_turn_base_0",
            "case__category": "agent/base",
            "prompt_tokens": 100 * (step + 1),
            "completion_tokens": 20,
            "estimated_tokens": None,
            "tests_passed": None if step < 4 else False,
            "tests_detail": None
            if step < 4
            else {"kind": "agent", "error_class": "instance_state_mismatch", "requests": 5},
            "batch": 0,
            "repetition": 0,
        }
        for step in range(5)
    ]
    entry = case_outcomes(rows)["bfcl/multi_turn_base_0"]
    assert (entry["n"], entry["p"], entry["r"]) == (1, 0, 5)
    assert entry["f"] == "instance_state_mismatch" and entry["in"] == 500


def test_the_budget_counts_an_agent_task_at_its_expected_requests(benchmark_wheels):
    spec = bfcl_multi_turn.load_cases(["multi_turn_base"], limit=1)[0]
    suite, _ = save_versioned(name="agent-priced", cases=[spec])
    pair = factories.pair(suite_row=suite)
    Endpoint.objects.filter(id__in=(pair.fast_id, pair.base_id)).update(
        price_input_per_mtok=1.0, price_output_per_mtok=4.0
    )
    pair.refresh_from_db()
    case = suite.cases.get()
    truth = bfcl_multi_turn.task_for(spec).ground_truth
    expected = sum(len(calls) + 1 for calls in truth)  # a call a request, then the answer
    assert budget.agent_requests(case) == expected > len(truth)

    one = {(case.key, tier): 1 for tier in ("fast", "base")}
    per_request = budget.case_estimate(case, pair, 1, budget.Seen({}, {}, one))
    never_played = budget.case_estimate(case, pair, 1, budget.Seen({}, {}))
    assert never_played == pytest.approx(expected * per_request)
    # once played, the P90 of the requests its episodes took on each tier
    seen = budget.Seen({}, {}, {(case.key, "fast"): 3, (case.key, "base"): 3})
    assert budget.case_estimate(case, pair, 2, seen) == pytest.approx(2 * 3 * per_request)


def test_an_agent_category_s_loss_detected_across_runs_reads_keep_agent_work_on_base(
    admin_client,
):
    """Probes folded one by one into the per-category loss detector, as the pipeline does
    after each run: base passes every task, fast fails one in two of the later-turn tasks;
    once the detector alarms, the page's advice names multi-step agent work."""
    suite = factories.suite("agent-cat", cases={})
    keys = [f"bfcl/multi_turn_miss_func_{i}" for i in range(8)]
    for key in keys:
        Case.objects.create(
            suite=suite, key=key, category="agent/miss_func", messages=[], agent=AGENT
        )
    pair = factories.pair("agents", suite_row=suite, repeat=1)
    fired_at = None
    for i in range(1, 41):
        run = factories.run(pair, kind="probe")
        for tier, endpoint in (("fast", pair.fast_id), ("base", pair.base_id)):
            cases = {
                key: {
                    "c": "agent/miss_func",
                    "k": "agent",
                    "n": 1,
                    "p": int(tier == "base" or j % 2),
                }
                for j, key in enumerate(keys)
            }
            RunRollup.objects.create(
                run=run,
                pair=pair,
                endpoint_id=endpoint,
                tier=tier,
                kind="probe",
                trigger="scheduled",
                at=run.created_at,
                cases=cases,
            )
        loss_detectors.after_run(run_id=run.id)
        if loss_detectors.states(pair)["agent/miss_func"].alarmed:
            fired_at = i
            break
    assert fired_at is not None
    html = admin_client.get("/pairs/agents/worse/").content.decode()
    assert "Keep multi-step agent work on base: -50 points" in html
    assert "keep `agent/miss_func` on base: loss detected across runs" in html


def test_an_agent_task_too_long_for_a_context_window_is_skipped_saying_why(benchmark_wheels):
    spec = bfcl_multi_turn.load_cases(["multi_turn_long_context"], limit=1)[0]
    suite, _ = save_versioned(name="agent-long", cases=[spec])
    pair = factories.pair(suite_row=suite)
    case = suite.cases.get()
    first_turn_only = steps.context_needed(case.messages, case.max_tokens, case.scenario)
    Endpoint.objects.filter(id=pair.fast_id).update(context_window=first_turn_only + 1)
    pair.refresh_from_db()
    kept, skipped = steps.split_by_context([case], [pair.fast, pair.base])
    assert kept == [] and skipped[0]["case"] == case.key
    assert f"~{budget.agent_prompt(case):,} estimated" in skipped[0]["reason"]
