"""evals.stats.eprocess: e-values from p, the e-detector's error budget, state round trips."""

import math

import numpy as np
import pytest
from scipy.integrate import quad

from evals.stats.eprocess import (
    GRID,
    AuditEvidence,
    EProcessState,
    acknowledge,
    e_bh,
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
