"""monitor.judging.verdict: audit runs against the simulated demo vendor over real HTTP.

The demo vendor's distilled tier is another (simulated) model; its fast tier serves the base
weights on another stack. Small audits (25 prompts × 5 samples per tier, the minimum the
verdict accepts) keep the file fast at the fixture's time scale. Pairs are saved with
``repeat = 2`` here; ``tests/test_monitoring_path.py`` runs the same path with ``repeat = 1``.
"""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from evals.logprobs import logprob_gap, token_at
from evals.stats.ladder import load_reference_ladder
from evals.suites import NONCE
from monitor.alerting.alerts import Reading, read_metric
from monitor.derived.rollups import record_run
from monitor.derived.run_summary import RunSummary
from monitor.judging.verdict import compute_verdict, temperature0_diagnostics
from monitor.models import AlertRule, Endpoint, Pair, PairMonitorState, Run, RunRollup, Sample
from monitor.runs.pipeline import evaluate_alerts, execute_run
from monitor.runs.steps import create_run
from monitor.selectors import endpoint_events
from monitor.setup.suites import sync_builtin_suite
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def endpoints(demo_vendor_url) -> dict[str, Endpoint]:
    return {
        name: Endpoint.objects.create(
            name=name, base_url=demo_vendor_url, model=name, simulated=True, max_concurrency=8
        )
        for name in ("demo-base", "demo-fast", "demo-distilled")
    }


def make_pair(endpoints: dict[str, Endpoint], fast: str, suite: str = "smoke") -> Pair:
    sync_builtin_suite(name="audit")
    return Pair.objects.create(
        name=f"{fast}-vs-base",
        fast=endpoints[fast],
        base=endpoints["demo-base"],
        suite=sync_builtin_suite(name=suite),
        repeat=2,
    )


def audit(pair: Pair, *, cases: int = 25, repeat: int = 5, seed: int = 3) -> Run:
    run = create_run(pair=pair, kind="audit", repeat=repeat, seed=seed)
    run = execute_run(run_id=run.id, cases_limit=cases)
    assert run.status == "done", run.error
    return run


def test_it_audits_on_the_audit_suite_with_one_batch_per_tier(endpoints):
    pair = make_pair(endpoints, "demo-fast")
    run = audit(pair, cases=3, repeat=2)
    assert run.suite.name == "audit" and run.temperature == 1.0
    batches = set(Sample.objects.filter(run=run).values_list("tier", "batch"))
    assert batches == {("fast", 0), ("base", 0)}  # no in-plan A-vs-A batch


def test_a_distilled_model_s_outputs_differ_but_one_audit_raises_no_alarm(endpoints):
    run = audit(make_pair(endpoints, "demo-distilled"))
    v = run.summary["verdict"]
    assert v["label"] == "outputs_differ", v["sentence"]
    assert run.verdict == v["sentence"] and run.verdict.startswith("outputs differ (")
    assert v["p_adjusted"] < 0.05 and v["p_words"]["mmd_fast_vs_base"] in v["sentence"]
    fvb = v["mmd"]["fast_vs_base"]
    assert fvb["n_prompts"] == 25 and fvb["n_per_tier"] == [125, 125] == v["n_per_tier"]
    assert v["effect"]["low"] <= fvb["statistic"] <= v["effect"]["high"]
    assert sum(fvb["null_hist"]["counts"]) == fvb["B"]
    assert len(fvb["null_hist"]["edges"]) == len(fvb["null_hist"]["counts"]) + 1
    assert {r["what"] for r in v["rates"]} == {"failed requests", "empty answers"}
    # one audit's p is evidence, not an alarm: the e-detector needs the audits together
    monitor = v["monitor"]
    assert monitor["alarm"] is False and 1 < monitor["e_value"] < monitor["threshold"]
    assert monitor["budget"].startswith("expected false alarms: ≤ 0.05 per month at hourly")
    AlertRule.objects.create(
        name="verdict",
        metric="verdict_different",
        tier="pair",
        op="gt",
        threshold=0.5,
        last_k=1,
        min_n=50,
    )
    assert evaluate_alerts(run_id=run.id) == []


def test_it_does_not_say_the_same_weights_differ_or_are_the_same(endpoints):
    run = audit(make_pair(endpoints, "demo-fast"))
    v = run.summary["verdict"]
    assert v["label"] != "capability_difference", v["sentence"]
    assert not v["sentence"].startswith("same model")  # never claimed as proven
    assert v["detectable_80"] is not None and v["min_detectable_effect"] is not None
    assert v["detectable_80"] > v["min_detectable_effect"]  # 80% power sits above 50%
    if v["label"] == "no_detectable_difference":
        assert "80% power only above MMD²" in v["sentence"]


def test_it_is_inconclusive_on_thin_data_and_says_why(endpoints):
    run = audit(make_pair(endpoints, "demo-distilled"), cases=5, repeat=3)
    v = run.summary["verdict"]
    assert v["label"] == "inconclusive"
    assert "n too small: 5 prompts, need 25" in v["sentence"]
    assert run.verdict.startswith("inconclusive (")


def test_it_uses_the_latest_probe_for_temperature0_and_unit_tests(endpoints):
    pair = make_pair(endpoints, "demo-distilled", suite="coding")
    probe = execute_run(run_id=create_run(pair=pair, seed=5).id, cases_limit=4)
    assert probe.status == "done", probe.error
    run = audit(pair, cases=5, repeat=2)
    v = compute_verdict(run_id=run.id)
    assert v["t0"]["run_id"] == probe.id and v["capability"]["run_id"] == probe.id
    assert v["t0"]["fast_vs_base"]["n"] == 8 and v["t0"]["base_vs_base"]["n"] == 4
    assert v["t0"]["divergences"][0]["first_divergence"] is not None
    cap = v["capability"]
    assert cap["table"]["n"] == 4 and 0.0 <= cap["table"]["p_value"] <= 1.0
    assert set(cap["pass_at_1"]) == {"fast", "base"} and "all" in cap["pass_at_1"]["base"]
    # another run's unit tests are context, never counted in this audit's label
    assert v["capability_from_run"] is False
    assert any("unit tests of an earlier run (not counted)" in c for c in v["context"])


def test_probes_collect_a_baseline_and_endpoint_events(endpoints):
    pair = make_pair(endpoints, "demo-fast")
    runs = [execute_run(run_id=create_run(pair=pair, seed=i).id, cases_limit=3) for i in range(6)]
    drift = [Run.objects.get(id=r.id).summary["drift"] for r in runs]
    assert [d["state"] for d in drift] == ["calibrating"] * 6
    assert drift[-1]["reason"] == "collecting the baseline: 6 of 48 probe runs"
    assert PairMonitorState.objects.get(pair=pair).last_probe_id == runs[-1].id
    events = endpoint_events(endpoints=[pair.fast, pair.base])
    models = {(e["endpoint"], e["value"]) for e in events if e["what"] == "model id"}
    assert models == {("demo-fast", "demo-fast"), ("demo-base", "demo-base")}
    prints = [e for e in events if e["what"] == "fingerprint"]
    assert prints and not any(e["change"] for e in prints)
    assert all(e["run_id"] == runs[0].id for e in events)


def test_a_new_fingerprint_is_an_event(endpoints):
    pair = make_pair(endpoints, "demo-fast")
    first = execute_run(run_id=create_run(pair=pair, seed=1).id, cases_limit=1)
    second = execute_run(run_id=create_run(pair=pair, seed=2).id, cases_limit=1)
    # As if the vendor's new stack had answered the second run: its samples say so, and the
    # run is summarised afresh (events are upserted then, from the samples, not read later).
    Sample.objects.filter(run=second, tier="fast").update(system_fingerprint="fp_new_stack")
    RunRollup.objects.filter(run=second).delete()
    record_run(run=second)
    events = [e for e in endpoint_events(endpoints=[pair.fast]) if e["what"] == "fingerprint"]
    assert [(e["value"], e["change"], e["run_id"]) for e in events] == [
        ("fp_demo_fast", False, first.id),
        ("fp_new_stack", True, second.id),
    ]


def test_it_reads_the_logprob_gap_at_the_first_divergence():
    base = [
        {"token": "The", "logprob": -0.1, "top_logprobs": []},
        {
            "token": " cat",
            "logprob": -0.7,
            "top_logprobs": [
                {"token": " cat", "logprob": -0.7},
                {"token": " dog", "logprob": -0.8},
            ],
        },
    ]
    fast = [
        {"token": "The", "logprob": -0.1, "top_logprobs": []},
        {"token": " dog", "logprob": -0.6, "top_logprobs": []},
    ]
    assert token_at(base, 3)["token"] == " cat" and token_at(base, 99)["token"] == " cat"
    gap = logprob_gap(base, fast, 4)
    assert gap["base_token"] == " cat" and gap["fast_token"] == " dog"
    assert gap["gap"] == pytest.approx(0.1) and gap["base_margin"] == pytest.approx(0.1)
    assert logprob_gap(None, fast, 4) is None


def test_measure_ladder_says_how_to_start_the_local_vendor(db):
    with pytest.raises(CommandError, match="local_vendor up --targets smollm2-f16"):
        call_command("measure_ladder")


def test_measure_ladder_writes_a_ladder_the_verdict_can_load(demo_vendor_url, tmp_path):
    # The simulated vendor stands in for llama.cpp here: same names, simulated models.
    for name, model in (
        ("smollm2-f16", "demo-base"),
        ("smollm2-q8", "demo-base"),
        ("smollm2-q4", "demo-fast"),
        ("gemma-270m", "demo-distilled"),
    ):
        Endpoint.objects.create(name=name, base_url=demo_vendor_url, model=model, simulated=True)
    out = tmp_path / "ladder.json"
    call_command(
        "measure_ladder",
        "--prompts",
        "4",
        "--samples",
        "3",
        "--B",
        "50",
        "--out",
        str(out),
        stdout=io.StringIO(),
    )
    ladder = load_reference_ladder(out)
    rungs = {r["key"]: r for r in ladder["rungs"]}
    assert set(rungs) == {"a_vs_a", "q8_0", "q4_0", "different_model"}
    assert ladder["L"] == 1000 and ladder["placeholder"] is False
    assert rungs["different_model"]["mmd2"] > max(rungs["a_vs_a"]["mmd2"], rungs["q8_0"]["mmd2"])
    assert rungs["a_vs_a"]["n_per_tier"] == [12, 12]


def test_verdict_and_drift_metrics_read_the_pair_s_decision_not_one_p_value():
    def verdict(label: str, monitor: dict | None) -> RunSummary:
        return RunSummary.from_json(
            {
                "verdict": {
                    "label": label,
                    "p_value": 0.0001,
                    "mmd": {"fast_vs_base": {"n_per_tier": [250, 240]}},
                    **({"monitor": monitor} if monitor is not None else {}),
                }
            }
        )

    alarmed, quiet = {"alarm": True}, {"alarm": False}
    assert read_metric(verdict("outputs_differ", alarmed), "verdict_different", "pair") == Reading(
        1.0, 240
    )
    assert read_metric(verdict("outputs_differ", quiet), "verdict_different", "pair").value == 0
    assert read_metric(verdict("outputs_differ", None), "verdict_different", "pair") is None
    assert read_metric(RunSummary(), "verdict_different", "pair") is None
    calibrating = {"state": "calibrating", "runs": 3}
    assert read_metric(RunSummary.from_json({"drift": calibrating}), "drift", "pair") is None
    drifting = {
        "state": "drift",
        "series": {"ttft_p50:fast": {"z": 4.0, "s": 30.0}},
        "drifting": ["ttft_p50:fast"],
        "runs": 2,
        "baseline_runs": 48,
        "h": 12.0,
    }
    assert read_metric(RunSummary.from_json({"drift": drifting}), "drift", "pair") == Reading(
        1.0, 50
    )  # an alarm two runs in passes min_n


def test_the_temperature_0_table_leaves_out_prompts_that_carried_a_nonce(db):
    """long_cold's prompt gets a fresh nonce per request: its fast and base answers answered
    different prompts, so the verdict page must not compare them."""
    suite = factories.suite(
        "scenarios",
        {
            "plain": [{"role": "user", "content": "Say hi."}],
            "cold": [{"role": "user", "content": f"Request {NONCE}.\nSay hi."}],
        },
    )
    pair = factories.pair(suite_row=suite)
    probe = factories.run(pair)
    for key in ("plain", "cold"):
        for tier in ("fast", "base"):
            factories.sample(probe, suite.cases.get(key=key), tier, text=f"{key} from {tier}")
    t0 = temperature0_diagnostics(pair=pair)
    assert t0["fast_vs_base_full"]["n"] == 1
    assert [row["case"] for row in t0["divergences"]] == ["plain"]
