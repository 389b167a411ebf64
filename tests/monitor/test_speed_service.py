"""Speed report over real runs against the simulated vendor (time-scale 0.25): paired speed-ups
with intervals, the claim, skipped cases, mechanism hints, goodput, and the load probe.

One scenarios run is shared by the module (it takes a few seconds); tests only read it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest
from django.core.management import call_command

from evals.stats.speedup import RatioCI
from monitor.judging.speed import claim_line, default_runs, speed_report
from monitor.models import Case, Endpoint, Pair, Run, Sample, Suite
from monitor.runs.load import run_load_probe
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run, split_by_context
from monitor.setup.suites import sync_builtin_suite
from tests.factories import free_port
from tests.support import start_process

# one xdist worker for the module: its runs against the vendor are a module fixture (made once,
# not once per worker), and the hints read timings that crowding the vendor would blur
pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("speed_service")]


@pytest.fixture(scope="module")
def vendor_url() -> Iterator[str]:
    """The simulated vendor at time-scale 0.25, in its own process.

    Not the shared 0.05 fixture: there the simulated prefill of ~1k tokens differs by ~8 ms
    between a cached and a cold prompt, less than the vendor process's own CPU time per request
    varies on a busy 2-core machine; at 0.25 the difference is ~40 ms and the run still takes
    a few seconds.
    """
    port = free_port()
    proc = start_process(
        [
            sys.executable,
            "-m",
            "evals.vendors.simulated",
            "--port",
            str(port),
            "--time-scale",
            "0.25",
        ],
        f"http://127.0.0.1:{port}/health",
    )
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def scenario_run(django_db_setup, django_db_blocker, vendor_url):
    """Four scenarios runs, repeat 3 (24 or 36 pairs per scenario: an interval needs 20), with a
    base context window too small for xl_context; the newest run is returned."""
    with django_db_blocker.unblock():
        base = Endpoint.objects.create(
            name="spd-base",
            base_url=vendor_url,
            model="demo-base",
            simulated=True,
            context_window=8192,
        )
        fast = Endpoint.objects.create(
            name="spd-fast", base_url=vendor_url, model="demo-fast", simulated=True
        )
        pair = Pair.objects.create(
            name="spd",
            fast=fast,
            base=base,
            repeat=3,
            suite=sync_builtin_suite(name="scenarios"),
            claim_metric="ttft",
            claim_value=6.0,
            slo_ttft_ms=2000,
            slo_e2e_ms=20000,
        )
        for seed in (7, 8, 9, 10):
            run = execute_run(run_id=create_run(pair=pair, seed=seed).id)
        yield pair, run
        Sample.objects.filter(run__pair=pair).delete()
        Run.objects.filter(pair=pair).delete()
        pair.delete()
        base.delete()
        fast.delete()
        Suite.objects.filter(name="scenarios").delete()  # committed: other modules make their own


def test_the_fast_tiers_ttft_speedup_is_larger_with_a_cached_prefix(scenario_run):
    pair, run = scenario_run
    assert run.status == "done", run.error
    speedup = speed_report(pair=pair)["speedup"]
    cached, cold = speedup["long_cached"]["ttft"], speedup["long_cold"]["ttft"]
    assert cached["n"] == cold["n"] == 36
    assert cached["estimate"] > cold["estimate"]


def test_every_interval_contains_its_point_estimate(scenario_run):
    pair, _ = scenario_run
    report = speed_report(pair=pair)
    cells = [(k, ci) for metrics in report["speedup"].values() for k, ci in metrics.items()]
    with_ci = [(k, ci) for k, ci in cells if ci["low"] is not None]
    assert len(with_ci) >= 9  # four scenarios × three metrics, decode may lack TPOTs
    for key, ci in with_ci:
        assert ci["low"] <= ci["estimate"] <= ci["high"], ci
        if key == "ttft":  # the claim's own metric (a 6× TTFT factor): judged there only
            assert ci["claim"].startswith("claimed 6x: ")
            assert ci["status"] in ("confirmed", "contradicted", "not contradicted")
        else:
            assert ci["claim"] is None and ci["status"] is None
        assert ci["method"] == "bootstrap over pairs"  # 4 runs: too few clusters to resample
    json.dumps(report["speedup"])  # plain values: the claim status is its string value


def test_a_case_larger_than_the_context_window_is_skipped_with_a_reason(scenario_run):
    pair, run = scenario_run
    (skipped,) = run.summary["skipped"]
    assert skipped["case"] == "scn-xl-context-0" and skipped["scenario"] == "xl_context"
    assert "context window" in skipped["reason"] and "spd-base: 8,192" in skipped["reason"]
    assert not run.samples.filter(case__key="scn-xl-context-0").exists()
    assert run.samples.filter(ok=False).count() == 0
    report = speed_report(pair=pair)
    assert report["skipped"] == [{**skipped, "run": run.id}]
    assert "xl_context" not in report["scenarios"]


def test_the_claim_is_worded_per_scenario(scenario_run):
    pair, _ = scenario_run
    report = speed_report(pair=pair)
    line = report["claim"]["ttft"]
    assert line.startswith("claimed 6x: ")
    assert set(report["claim"]) == {"ttft"}  # no other metric is judged against a TTFT claim
    check = report["claim_check"]
    assert check["line"].startswith("claim 6× TTFT: ")
    for scenario in ("long_cached", "long_cold", "short_long_out", "mid"):
        assert scenario in line and scenario in check["line"]
    assert {row["scenario"] for row in check["scenarios"]} == {
        "long_cached",
        "long_cold",
        "short_long_out",
        "mid",
    }


def test_claim_line_confirms_contradicts_or_cannot_tell_per_scenario():
    cis = {
        "long_cached": RatioCI(6.8, 6.1, 7.4, 20, "cluster"),
        "long_cold": RatioCI(5.8, 5.1, 6.4, 20, "cluster"),
        "short_long_out": RatioCI(1.9, 1.7, 2.1, 20, "cluster"),
        "mid": RatioCI(2.0, None, None, 3, "none", note="n too small: 3 pairs, need 20"),
    }
    assert claim_line(cis, 6.0) == (
        "claimed 6x: confirmed for long_cached (6.8x [6.1, 7.4]); contradicted for "
        "short_long_out (1.9x [1.7, 2.1]); not contradicted for long_cold (5.8x [5.1, 6.4]); "
        "cannot tell for mid"
    )


def test_percentiles_breakdown_and_goodput_come_per_scenario_and_tier(scenario_run):
    pair, _ = scenario_run
    report = speed_report(pair=pair)
    ttft = report["percentiles"]["mid"]["fast"]["ttft_ms"]
    # 24 values: a P50 (needs 6), but no P90 (29), P95 (59) or P99 (299)
    assert ttft["n"] == 24 and ttft["p50"] is not None
    assert ttft["p90"] is ttft["p95"] is ttft["p99"] is None
    for scenario in report["scenarios"]:
        for tier in ("fast", "base"):
            parts = report["breakdown"][scenario][tier]
            assert parts["n"] > 0
            assert all(parts[k] >= 0 for k in ("connect", "headers", "prefill", "decode"))
    for tier in ("fast", "base"):
        block = report["goodput"]["tiers"][tier]
        assert block["n"] == 4 * 30 and 0.0 <= block["value"] <= 1.0


def test_the_hints_give_numbers_for_a_prefix_cache_and_speculative_bursts(scenario_run):
    pair, _ = scenario_run
    hints = {h["mechanism"]: h for h in speed_report(pair=pair)["hints"]}
    cache = hints["prefix cache"]
    assert cache["indication"] == "suggested" and "fast" in cache["finding"]
    assert any("cached tokens" in line for line in cache["evidence"])
    spec = hints["speculative decoding"]
    assert spec["indication"] == "suggested"
    assert any("% of chunks carry > 1 token" in line for line in spec["evidence"])
    assert "verdict" in hints["smaller model"]["finding"].lower()
    assert hints["quantization / numerics"]["evidence"]


def test_a_report_below_min_n_shows_no_percentile_and_no_interval(scenario_run):
    pair, run = scenario_run
    thin = create_run(pair=pair, repeat=1, seed=3)
    execute_run(run_id=thin.id, cases_limit=2)
    report = speed_report(pair=pair, runs=[Run.objects.get(id=thin.id)])
    for scenario in report["scenarios"]:
        stat = report["percentiles"][scenario]["fast"]["ttft_ms"]
        assert stat["too_small"] and stat["p50"] is None
        assert report["speedup"][scenario]["ttft"]["low"] is None


def test_split_by_context_keeps_cases_of_endpoints_without_a_window():
    suite = Suite.objects.create(name="ctx")
    case = Case.objects.create(
        suite=suite,
        key="big",
        scenario="mid",
        max_tokens=100,
        messages=[{"role": "user", "content": "word " * 3000}],
    )
    small = Endpoint(name="small", context_window=2048)
    unknown = Endpoint(name="unknown", context_window=None)
    assert split_by_context([case], [unknown]) == ([case], [])
    kept, skipped = split_by_context([case], [unknown, small])
    assert kept == [] and skipped[0]["case"] == "big" and "small: 2,048" in skipped[0]["reason"]


def test_the_load_probe_stores_each_level_apart_from_the_probe_runs(scenario_run, capsys):
    pair, run = scenario_run
    load = run_load_probe(pair=pair, concurrency_levels=(1, 4), requests_per_level=5)
    assert load.status == "done", load.error
    assert load.kind == "load" and load.trigger == "manual"
    assert set(load.summary["load"]) == {"1", "4"}
    for level in ("1", "4"):
        for tier in ("fast", "base"):
            block = load.summary["load"][level][tier]
            assert block["n"] == 5 and block["ttft_ms"]["n"] == block["n_ok"]
    assert load.samples.count() == 20
    assert load.id not in [r.id for r in default_runs(pair)]
    assert speed_report(pair=pair)["load"]["run"] == load.id
    call_command("load_probe", pair.name, "--levels", "2", "--requests", "5", "--json")
    out = json.loads(capsys.readouterr().out)
    assert out["load"]["2"]["fast"]["n"] == 5


def test_the_speculative_hint_sees_tokens_written_back_to_back():
    from types import SimpleNamespace

    from evals.mechanism import speculative_hint

    def sample(tier, gaps):
        return SimpleNamespace(
            ok=True, tier=tier, chunk_tokens=[1] * (len(gaps) + 1), chunk_gaps_ms=gaps
        )

    bursty = [0.2, 0.3, 14.0, 0.2, 0.4, 15.0, 0.3, 0.2, 13.0]  # drafts as one event per token
    steady = [13.0, 14.0, 13.5, 14.2, 13.1, 14.4, 13.3, 13.9, 14.1]
    samples = [sample("fast", bursty) for _ in range(6)]
    samples += [sample("base", steady) for _ in range(6)]
    hint = speculative_hint(samples, min_n=5)
    assert hint["indication"] == "suggested" and "back to back" in hint["finding"]
    same = [sample("fast", steady) for _ in range(6)] + [sample("base", steady) for _ in range(6)]
    assert speculative_hint(same, min_n=5)["indication"] == "no sign"


def test_output_tokens_per_second_speedups_come_in_both_definitions(scenario_run):
    pair, _ = scenario_run
    report = speed_report(pair=pair)
    for definition in ("generation", "e2e"):
        ci = report["otps"]["short_long_out"][definition]
        assert ci["n"] == report["n_pairs"]["short_long_out"] >= 5
        assert ci["low"] <= ci["estimate"] <= ci["high"]
    generation = report["otps"]["short_long_out"]["generation"]["estimate"]
    e2e = report["otps"]["short_long_out"]["e2e"]["estimate"]
    # the simulated fast tier decodes ~5x faster; the whole request includes queue + prefill
    assert generation > 2.0 and generation != e2e
