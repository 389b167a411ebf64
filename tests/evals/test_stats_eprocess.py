"""evals.stats.eprocess: e-values from p (a calibrator per monitor), the e-detector's error
budget, the calibration guard, state round trips."""

import math

import numpy as np
import pytest
from scipy.integrate import quad

from evals.stats.eprocess import (
    CALIBRATION_WINDOW,
    GRID,
    TRIPWIRE,
    VERDICT,
    AuditEvidence,
    EProcessState,
    acknowledge,
    calibrated_p,
    e_bh,
    null_miscalibrated,
    p_to_e,
    shift_e,
    threshold_for,
    update,
)


def test_the_calibrator_is_an_e_value_for_a_uniform_p():
    # ∫₀¹ e(p) dp with p = exp(−u), to tame the 1/(p ln² p) singularity at 0; beyond u = 700
    # the integrand is 1/u² to double precision, whose tail integral is 1/700
    body = quad(lambda u: p_to_e(math.exp(-u)) * math.exp(-u), 0, 700, limit=500)[0]
    mean = body + 1 / 700
    assert mean == pytest.approx(1.0, abs=1e-4)
    assert p_to_e(1.0) == 0.5 and p_to_e(0.001) == pytest.approx(20.8, abs=0.1)
    with pytest.raises(ValueError):
        p_to_e(0.0)


def test_threshold_is_audits_per_period_over_the_budget():
    assert threshold_for(2160, 0.5) == 4320
    assert threshold_for(2160, 1.0) == 2160


def run(ps, threshold):
    state, alarms = EProcessState(), []
    for i, p in enumerate(ps):
        state, d = update(state, AuditEvidence(float(p)), threshold=threshold)
        if d.new_alarm:
            alarms.append(i)
            state = acknowledge(state)
    return alarms


def test_false_alarms_under_the_null_stay_within_n_over_c():
    rng = np.random.default_rng(0)
    n, c = 40_000, 200.0
    alarms = run(rng.integers(1, 1002, n) / 1001, c)
    # the renewal bound: expected alarms ≤ n / c = 200; the e-CUSUM is well below it
    assert len(alarms) <= n / c


def test_a_run_of_small_p_values_alarms_when_the_mixture_reaches_c():
    """Each δ's detector multiplies by e_δ(0.01) (p floored at 0.01) once the 0.5s are gone:
    the alarm comes at the first k with mean_δ e_δ(0.01)^k ≥ c, never sooner."""
    c = threshold_for(2160, 0.5)
    ps = [0.5] * 500 + [1 / 1001] * 10
    alarms = run(ps, c)
    k = next(k for k in range(1, 11) if np.mean([shift_e(0.01, d) ** k for d in GRID]) >= c)
    assert alarms and alarms[0] - 500 + 1 == k


def test_an_audit_without_evidence_changes_nothing_and_the_state_round_trips():
    state, _ = update(EProcessState(), AuditEvidence(0.01, e_value=3.0, run_id=7), threshold=50)
    same, d = update(state, AuditEvidence(None), threshold=50)
    assert same == state and d.e_value is None
    assert state.evalue == pytest.approx((np.mean([shift_e(0.01, d) for d in GRID]) + 3.0) / 2)
    assert EProcessState.from_json(state.to_json()) == state


def test_it_stays_alarmed_until_acknowledged():
    state, d = update(EProcessState(), AuditEvidence(None, e_value=100.0), threshold=50)
    assert d.alarm and d.new_alarm
    state, d = update(state, AuditEvidence(0.9), threshold=50)
    assert d.alarm and not d.new_alarm
    assert acknowledge(state).detector == 1.0 and not acknowledge(state).alarmed


def test_e_bh_rejects_the_k_largest_above_m_over_alpha_k():
    assert e_bh([100.0, 50.0, 1.0, 0.5], alpha=0.1) == [True, True, False, False]
    assert e_bh([30.0, 1.0], alpha=0.05) == [False, False]  # 30 < 2 / 0.05
    assert e_bh([]) == []


def test_each_calibrator_is_an_e_value_for_a_uniform_p():
    """E e_δ(U) = 1 at the audits' floor and at the tripwires' (the constant is their own)."""
    for cal in (VERDICT, TRIPWIRE):
        for d in cal.grid:
            f = cal.p_floor
            mean = sum(
                quad(shift_e, a, b, args=(d, f), limit=200)[0]
                for a, b in ((1e-300, f), (f, 1 - f), (1 - f, 1.0))
            )
            assert mean == pytest.approx(1.0, abs=1e-6)


def test_a_switched_tier_at_the_permutation_floor_fires_its_tripwire_at_the_third_run():
    """Runs of p = 1/10,000 (the tripwire test's floor) against the tripwires' threshold: the
    tripwires' calibrator fires at the third, the audits' (floored at 0.01) at the fourth."""
    c = threshold_for(2160, 0.1)

    def fires_at(cal):
        state = EProcessState()
        for k in range(1, 10):
            state, d = update(state, AuditEvidence(1e-4, calibrator=cal), threshold=c)
            if d.new_alarm:
                return k
        return None

    assert (fires_at(TRIPWIRE), fires_at(VERDICT)) == (3, 4)


def miscalibrated(rng, n):
    """p-values of a test anti-conservative on the vendor: 10 % of them on U(0, 0.01)."""
    return np.where(rng.random(n) < 0.1, rng.random(n) * 0.01, rng.random(n))


def test_the_audit_s_own_p_is_folded_while_the_base_tier_s_p_values_look_uniform():
    rng = np.random.default_rng(1)
    uniform = list(rng.random(CALIBRATION_WINDOW))
    assert not null_miscalibrated(uniform)
    assert calibrated_p(0.003, uniform) == 0.003
    assert calibrated_p(0.003, []) == 0.003  # no base-vs-base p yet: the test stands alone
    # too few to check (a pair's first days of them): the conformal p, never below 1/(n + 1)
    assert calibrated_p(0.003, uniform[:10]) == pytest.approx(1 / 11)


def test_a_test_miscalibrated_alike_on_both_comparisons_is_held_to_its_level():
    """Fast vs base and base vs earlier base from the same anti-conservative test: the raw p
    rejects at 0.01 about 11 % of the time, the calibrated p about 1 %."""
    rng = np.random.default_rng(2)
    assert null_miscalibrated(list(miscalibrated(rng, CALIBRATION_WINDOW)))
    draws = 4000
    raw = miscalibrated(rng, draws)
    folded = [calibrated_p(p, list(miscalibrated(rng, CALIBRATION_WINDOW))) for p in raw]
    assert np.mean(raw <= 0.01) > 0.08
    assert np.mean(np.asarray(folded) <= 0.01) <= 0.01 + 3 * math.sqrt(0.01 * 0.99 / draws)
