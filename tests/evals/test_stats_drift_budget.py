"""Drift under real noise, the shift calibrators and one error budget per pair
(``evals.stats.cusum``, ``evals.stats.eprocess``, ``evals.stats.error_budget``)."""

import math

import numpy as np
import pytest
from scipy.integrate import quad

from evals.stats import cusum, eprocess, error_budget


def ar1_load(rng, n, phi=0.5, sd=0.15):
    x, out = 0.0, []
    for _ in range(n):
        x = phi * x + rng.normal() * math.sqrt(1 - phi * phi)
        out.append(sd * x)
    return np.array(out)


def probes(rng, n, *, fast=100.0, base=200.0, both=1.0, noise=0.05):
    """Both tiers under one shared AR(1) load (cancels in the ratio) plus per-run noise."""
    load = ar1_load(rng, n)
    return [{"ttft_p50:fast": fast * both * math.exp(load[i] + noise * rng.normal()),
             "ttft_p50:base": base * both * math.exp(load[i] + noise * rng.normal()),
             "ttft_ratio:fast_vs_base": None,
             "similarity:fast_vs_base": 0.9 + 0.01 * rng.normal()} for i in range(n)]  # fmt: skip


def with_ratio(runs):
    for r in runs:
        f, b = r["ttft_p50:fast"], r["ttft_p50:base"]
        r["ttft_ratio:fast_vs_base"] = f / b if f and b else None
    return runs


def test_the_long_run_variance_of_an_ar1_series_is_its_sum_of_autocovariances():
    """σ²_LR of a unit-variance AR(1) with φ = 0.5 is (1 + φ)/(1 − φ) = 3; of white noise 1."""
    rng = np.random.default_rng(0)
    white = rng.standard_normal(20_000)
    assert cusum.long_run_variance(white) == pytest.approx(1.0, abs=0.05)
    x = ar1_load(rng, 20_000, sd=1.0)
    assert cusum.long_run_variance(x / x.std(), batch=40) == pytest.approx(3.0, rel=0.15)
    assert cusum.long_run_variance(x / x.std()) < 2.6  # batches of 4 runs see part of it only


def test_the_tier_series_is_the_ratio_and_a_shared_incident_is_named_not_alarmed():
    rng = np.random.default_rng(1)
    b = error_budget.freeze(with_ratio(probes(rng, 48)), [t % 24 for t in range(48)], 3600)
    assert [s.name for s in b.series] == ["ttft_ratio:fast_vs_base", "similarity:fast_vs_base"]
    assert [s.name for s in b.context] == ["ttft_p50:fast", "ttft_p50:base"]
    state, incident = cusum.start(b), []
    for t, r in enumerate(with_ratio(probes(rng, 24, both=3.0))):  # both tiers ×3 for 24 h
        state, alarm = cusum.update(state, b, r, hour=t % 24)
        incident.append(alarm.incident)
        assert not alarm.alarm  # the ratio did not move: no tier change
    assert any(incident)
    for t, r in enumerate(with_ratio(probes(rng, 40, fast=200.0))):  # the fast tier doubles
        state, alarm = cusum.update(state, b, r, hour=t % 24)
    assert state.alarmed and state.alarm_series == "ttft_ratio:fast_vs_base"
    assert cusum.Baseline.from_json(b.to_json()) == b
    assert cusum.CusumState.from_json(state.to_json()) == state


def test_a_baseline_freezes_with_a_few_missing_values_and_not_across_a_level_shift():
    rng = np.random.default_rng(2)
    hours = [t % 24 for t in range(48)]
    runs = with_ratio(probes(rng, 48))
    for r in runs[5 : 5 + error_budget.MAX_MISSING]:  # an outage: every request failed
        r.update(dict.fromkeys(r, None))
    b = error_budget.freeze(runs, hours, 3600)
    assert b is not None and b.series[0].n == 48 - error_budget.MAX_MISSING
    runs[20].update(dict.fromkeys(runs[20], None))  # one more missing: that series is left out
    assert error_budget.freeze(runs, hours, 3600) is None
    shifted = with_ratio(probes(rng, 24) + probes(rng, 24, fast=160.0))
    assert error_budget.freeze(shifted, hours, 3600) is None
    assert "level shift" in error_budget.refusal(shifted)


def test_the_shift_calibrators_are_e_values_and_decrease_in_p():
    for d in eprocess.GRID:
        mean, _ = quad(lambda p, d=d: eprocess.shift_e(p, d), 0, 1, points=[0.01, 0.99],
                       limit=200)  # fmt: skip
        assert mean == pytest.approx(1.0, abs=1e-6)
        grid = [eprocess.shift_e(p, d) for p in (0.001, 0.01, 0.05, 0.5, 0.99, 1.0)]
        assert grid[0] == grid[1] and grid[-1] == grid[-2] > 0  # clipped at both ends
        assert all(a >= b for a, b in zip(grid[:-1], grid[1:], strict=True))


def test_the_mixture_detector_catches_30_percent_rejection_within_a_day():
    """z shifted by 1.12: P(p < 0.05) = 30 %. At the verdict's hourly threshold the alarm comes
    within 24 audits in most of 40 seeded months (the old calibrator: median 23 h, p90 43 h)."""
    c = error_budget.audit_threshold(3600)
    rng = np.random.default_rng(3)
    within = 0
    for _ in range(40):
        state = eprocess.EProcessState()
        ps = np.clip(1 - __import__("scipy").stats.norm.cdf(rng.standard_normal(24) + 1.12),
                     1 / 10001, 1)  # fmt: skip
        for p in ps:
            state, d = eprocess.update(state, eprocess.AuditEvidence(float(p)), threshold=c)
        within += state.alarmed
    assert within >= 20


def test_the_pair_s_budget_is_split_between_its_monitors():
    assert sum(error_budget.SHARES.values()) == pytest.approx(error_budget.BUDGET_PER_QUARTER)
    assert error_budget.tripwire_share_per_tier() == error_budget.share("tripwires") / 2
    assert sum(error_budget.VERDICT_TESTS.values()) == pytest.approx(1.0)
    assert error_budget.audit_threshold(3600) == pytest.approx(2160 / (0.15 * 2 / 3))
    assert error_budget.probe_arl(3600) == pytest.approx(2160 / 0.1)
    assert "drift's share: 0.1 of the pair's 0.5" in error_budget.share_words("drift")
    with pytest.raises(ValueError, match="unknown monitor"):
        error_budget.share("latency")
