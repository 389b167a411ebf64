"""Drift that never goes blind and evidence failures cannot game, through the database path
(``monitor.derived.evidence``: stored summaries → ``after_run`` → stored state → page and
alerts)."""

from __future__ import annotations

import numpy as np
import pytest

from evals.stats.cusum import MIN_BASELINE_RUNS
from monitor.derived import evidence
from monitor.derived.run_summary import Similarity
from monitor.models import AlertRule, Baseline, Pair, PairMonitorState, Run
from monitor.runs.pipeline import evaluate_alerts
from tests import factories

pytestmark = pytest.mark.django_db


def probe(pair: Pair, hours_ago: float, rng, *, fast=200.0, base=300.0, both=1.0,
          sim=0.9, failed=False) -> Run:  # fmt: skip
    """A probe: both tiers under one shared load, or one in which every request failed."""
    if failed:
        dead = factories.tier(n=20, n_ok=0, availability=0.0, ttft=(None, None))
        summary = factories.summary(fast=dead, base=dead)
    else:
        load = float(np.exp(0.1 * rng.standard_normal()))
        f = fast * both * load * float(np.exp(0.05 * rng.standard_normal()))
        b = base * both * load * float(np.exp(0.05 * rng.standard_normal()))
        summary = factories.summary(
            fast=factories.tier(ttft=(f, f * 1.5)), base=factories.tier(ttft=(b, b * 1.5)),
            similarity=Similarity(20, sim + 0.01 * float(rng.standard_normal())),
        )  # fmt: skip
    run = factories.run(pair, kind="probe", minutes_ago=60 * hours_ago, summary=summary)
    evidence.after_run(run_id=run.id)
    return Run.objects.get(id=run.id)


def audit(pair: Pair, hours_ago: float, p: float, *, label="no_detectable_difference",
          failed=(0, 0), stability: float | None = None) -> Run:  # fmt: skip
    from evals.stats.labels import rate_test

    rates = [rate_test("failed requests", (failed[0], 250), (failed[1], 250)),
             rate_test("empty answers", (0, 250 - failed[0]), (0, 250 - failed[1]))]  # fmt: skip
    verdict = {"label": label, "p_value": p, "sentence": f"{label} (p = {p:.2g})",
               "rates": [{"what": r.what, "fast": list(r.fast), "base": list(r.base),
                          "p_value": r.p_value} for r in rates],
               "mmd": {"fast_vs_base": {"n_per_tier": [250, 250]}}}  # fmt: skip
    if stability is not None:  # base now against base in an audit a day earlier
        verdict["base_stability"] = {"p_value": stability}
    run = factories.run(pair, kind="audit", minutes_ago=60 * hours_ago,
                        summary=factories.summary(verdict=verdict))  # fmt: skip
    evidence.after_run(run_id=run.id)
    return Run.objects.get(id=run.id)


def test_an_outage_inside_the_baseline_does_not_leave_it_collecting_forever():
    """Five probes in which every request failed among the first 48: more than a baseline may
    miss, so it is not frozen from those 48 (the old code retried the same 48 runs and stayed
    "48 of 48" forever); it freezes from the newest 48 once they miss few enough."""
    pair, rng = factories.pair(), np.random.default_rng(1)
    runs = [probe(pair, 200 - t, rng, failed=10 <= t < 15) for t in range(MIN_BASELINE_RUNS)]
    last = runs[-1].summary["drift"]
    assert last["state"] == "calibrating" and "not frozen" in last["reason"]
    assert not Baseline.objects.filter(pair=pair).exists()
    t = MIN_BASELINE_RUNS
    while not Baseline.objects.filter(pair=pair).exists():
        probe(pair, 200 - t, rng)
        t += 1
    [baseline] = Baseline.objects.filter(pair=pair, active=True)
    assert t == 15 + MIN_BASELINE_RUNS - 4  # the window holds 4 of the failed probes
    assert baseline.run_ids[0] != runs[0].id and len(baseline.run_ids) == MIN_BASELINE_RUNS
    assert baseline.statistics["series"][0]["name"] == "ttft_ratio:fast_vs_base"
    assert probe(pair, 200 - t, rng).summary["drift"]["state"] == "ok"


def test_a_shared_incident_is_named_and_a_tier_change_is_alarmed_on_the_ratio(admin_client):
    pair, rng = factories.pair(), np.random.default_rng(2)
    AlertRule.objects.create(name="drift", metric="drift", tier="pair", op="gt",
                             threshold=0.5, last_k=1)  # fmt: skip
    for t in range(MIN_BASELINE_RUNS + 10):
        probe(pair, 300 - t, rng)
    states = []
    for t in range(24):  # the vendor is slow on both tiers: ×3 for a day
        run = probe(pair, 200 - t, rng, both=3.0)
        states.append(run.summary["drift"]["state"])
        assert evaluate_alerts(run_id=run.id) == []
    assert "incident" in states and "drift" not in states
    html = admin_client.get(f"/pairs/{pair.name}/verdict/").content.decode()
    assert "both tiers slowed: vendor incident" in html
    alerts = []
    for t in range(48):  # the fast tier alone doubles its TTFT
        run = probe(pair, 150 - t, rng, fast=400.0)
        alerts += evaluate_alerts(run_id=run.id)
    assert run.summary["drift"]["state"] == "drift"
    assert run.summary["drift"]["cause"].startswith("a tier change: the fast tier slowed")
    assert alerts and "drift's share: 0.1 of the pair's 0.5" in alerts[0].message


def test_an_inconclusive_audit_is_not_folded_and_failures_have_their_own_detector():
    pair = factories.pair()
    for h in range(10, 0, -1):  # tier-specific failures: cut answers make the MMD reject
        run = audit(pair, h, 0.0001, label="inconclusive", failed=(80, 0))
    block = run.summary["verdict"]["monitor"]
    assert block["audits"] == 0 and block["detector"] == 1.0 and "not folded" in block["skipped"]
    failures = block["rates"]["failed requests"]
    assert failures["audits"] == 10 and failures["alarmed"]  # Fisher p ≈ 1e-27 each audit
    assert not block["rates"]["empty answers"]["alarmed"]
    assert failures["threshold"] == pytest.approx(evidence.eprocess_threshold(pair) / 0.25)


def test_acknowledging_drift_keeps_the_verdicts_evidence():
    pair, rng = factories.pair(), np.random.default_rng(3)
    for t in range(MIN_BASELINE_RUNS):
        probe(pair, 300 - t, rng)
    for t in range(5):
        audit(pair, 250 - t, 0.1)  # some evidence of a difference, not yet an alarm
    for t in range(40):
        probe(pair, 240 - t, rng, fast=400.0)
    row = PairMonitorState.objects.get(pair=pair)
    assert row.cusum["alarmed"] and not row.eprocess["alarmed"]
    before = row.eprocess
    evidence.acknowledge(pair=pair, user="alice")
    row.refresh_from_db()
    assert row.cusum == {} and not Baseline.objects.filter(pair=pair, active=True).exists()
    assert row.eprocess == before and row.eprocess["audits"] == 5  # the verdict's evidence stays


def test_an_audit_test_that_rejects_base_against_itself_is_folded_at_its_conformal_p():
    """The base tier against its earlier self rejects at p ≤ 0.005 in 30 of 40 audits (the
    test, not the fast tier, is anti-conservative on this vendor): a fast-vs-base p of 0.002
    is folded as its rank among them, and the base tier's p-values outlive an
    acknowledgement."""
    pair = factories.pair()
    for h in range(40):
        audit(pair, 100 - h, 0.5, stability=(0.001, 0.005, 0.005, 0.6)[h % 4])
    run = audit(pair, 50, 0.002)
    guard = run.summary["verdict"]["monitor"]["calibration"]
    assert guard["miscalibrated"] and guard["null_n"] == 40
    assert guard["p_folded"] == pytest.approx((1 + 10) / 41)  # 10 of 40 at 0.001 ≤ 0.002
    evidence.acknowledge(pair=pair, user="alice")
    row = PairMonitorState.objects.get(pair=pair)
    assert row.eprocess["audits"] == 0 and len(row.eprocess["null_ps"]) == 40
