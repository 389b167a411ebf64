"""benchmarks/month_replay.py at small n: its pair folds as the product does (cross-checked
against the database path on the same simulated hours), and the scenarios it names happen."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import month_replay as mr
from monitor.derived import evidence
from monitor.derived.run_summary import Similarity
from monitor.models import PairMonitorState
from tests import factories


def scenario(name: str) -> mr.Scenario:
    return next(s for s in mr.SCENARIOS if s.name == name)


def test_a_shared_incident_leaves_the_tier_ratio_alone():
    hours = mr.hours_of(scenario("incident ×3"), np.random.default_rng(0), None)
    both = [np.log(h["probe"]["ttft_p50:base"]) for h in hours]
    ratio = [np.log(h["probe"]["ttft_ratio:fast_vs_base"]) for h in hours]
    slow = int(np.argmax(np.convolve(both, np.ones(6), "valid")))  # the incident's 6 hours
    assert np.mean(both[slow : slow + 6]) - np.median(both) > 0.8  # ×3 is log 1.1
    assert abs(np.mean(ratio[slow : slow + 6]) - np.median(ratio)) < 0.15


def test_an_outage_inside_the_baseline_does_not_leave_the_pair_blind():
    out = mr.one_month(scenario("outage"), seed=4)
    assert not out["blind"] and out["drift"] == [] and out["verdict"] == []


def dead() -> object:
    return factories.tier(n=20, n_ok=0, availability=0.0, ttft=(None, None))


@pytest.mark.django_db
def test_the_replay_s_pair_ends_where_the_database_path_ends():
    """The same 72 simulated hours (48 baseline probes, then 24 hours with audits, 10 % of
    them cut by tier-specific failures, each with a base-vs-earlier-base p for the calibration
    guard) folded by the replay and by ``evidence.after_run`` through stored summaries: the
    same CUSUM sums, the same detectors and the same base-tier null."""
    hours = mr.hours_of(scenario("cut answers"), np.random.default_rng(0), None)[:72]
    cut = sum(h["audit"][0] == "inconclusive" for h in hours[mr.PRE :])
    assert cut == 2
    stability = list(np.random.default_rng(1).random(len(hours)) ** 3)  # some small ones
    pair = factories.pair()
    for t, h in enumerate(hours):
        v = h["probe"]
        fast, base = v["ttft_p50:fast"], v["ttft_p50:base"]
        summary = factories.summary(
            fast=factories.tier(ttft=(fast, fast)) if fast else dead(),
            base=factories.tier(ttft=(base, base)) if base else dead(),
            similarity=Similarity(20, v["similarity:fast_vs_base"]),
        )
        run = factories.run(pair, kind="probe", minutes_ago=60 * (80 - t), summary=summary)
        h["hour"] = run.finished_at.hour
        evidence.after_run(run_id=run.id)
        if t < mr.PRE:
            continue
        label, p, failed = h["audit"]
        rates = [{"what": "failed requests", "p_value": mr.fisher_p(failed)}]
        verdict = {"label": label, "p_value": p, "sentence": label, "rates": rates,
                   "base_stability": {"p_value": stability[t]}}  # fmt: skip
        run = factories.run(pair, kind="audit", minutes_ago=60 * (80 - t) - 30,
                            summary=factories.summary(verdict=verdict))  # fmt: skip
        evidence.after_run(run_id=run.id)
    replay = mr.Pair()
    for t, h in enumerate(hours):
        replay.probe(h["probe"], h["hour"], t)
        if t >= mr.PRE:
            replay.audit(*h["audit"], stability[t])
    row = PairMonitorState.objects.get(pair=pair)
    assert row.cusum["sums"] == pytest.approx(list(replay.state.sums))
    assert row.eprocess["detector"] == pytest.approx(replay.evidence.detector)
    assert row.eprocess["audits"] == replay.evidence.audits == 24 - cut  # inconclusive: not folded
    assert row.eprocess["null_ps"] == pytest.approx(replay.null_ps) and len(replay.null_ps) == 24
    failures = row.eprocess["rates"]["failed requests"]
    assert failures["detector"] == pytest.approx(replay.failures.detector)


def test_all_four_monitors_fold_in_a_month_and_a_q8_like_switch_fires_a_tripwire_within_3_h():
    months = [mr.one_month(scenario("ar1"), seed=s, switch="Q8_0-like") for s in range(2)]
    for m in months:
        assert set(mr.MONITORS) <= set(m)
        assert next(i for i in m["tripwires"] if i >= mr.SWITCH) - mr.SWITCH + 1 <= 3
