"""The capability loss detector: each run's bet has expectation 1 when the tiers are equal, the
mixture e-CUSUM rarely alarms on equal tiers and soon on a losing one, and it stays alarmed
until acknowledged."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import hypergeom

from evals.stats.capability_loss import (
    LAMBDAS,
    LossState,
    acknowledge,
    run_evalues,
    threshold_for,
    update,
)
from evals.stats.capability_paired import CaseCounts


@pytest.mark.parametrize(("n_fast", "n_base", "passes"), [(1, 1, 1), (2, 1, 2), (3, 4, 3)])
def test_a_cases_bet_has_expectation_one_under_equal_tiers(n_fast, n_base, passes):
    """Given the case's passes, the fast count is hypergeometric: E[1 + λ s] = 1 exactly."""
    law = hypergeom(n_fast + n_base, passes, n_fast)
    for j in range(len(LAMBDAS)):
        mean = sum(
            law.pmf(k) * run_evalues([(passes - k) / n_base - k / n_fast])[j]
            for k in range(max(0, passes - n_base), min(n_fast, passes) + 1)
        )
        assert mean == pytest.approx(1.0)


def _runs(rng, p_fast_drop: float, runs: int, per_run: int = 2):
    for _ in range(runs):
        cases = []
        for p in rng.uniform(0.3, 0.95, per_run):
            cases.append(
                CaseCounts("c", 1, int(rng.random() < p - p_fast_drop), 1, int(rng.random() < p))
            )
        yield cases


def test_equal_tiers_rarely_alarm_and_a_losing_tier_alarms_soon():
    threshold = threshold_for(2160, 10, 0.5)  # hourly probes, 10 categories: 43,200
    rng = np.random.default_rng(3)
    false = 0
    for _ in range(20):
        state = LossState()
        for cases in _runs(rng, 0.0, 720):  # a month of hourly probes
            state = update(state, cases, threshold=threshold)
        false += state.alarmed
    assert false == 0  # expected ≤ 20 · 720 / 43,200 = 0.33
    state, at = LossState(), None
    for r, cases in enumerate(_runs(rng, 0.4, 720), 1):
        state = update(state, cases, threshold=threshold, run_id=r)
        if state.alarmed:
            at = r
            break
    assert at is not None and at < 200 and state.alarm_run == at


def test_an_alarm_stays_until_acknowledged_and_a_run_without_pairs_changes_nothing():
    state = LossState()
    for _ in range(30):
        state = update(state, [CaseCounts("c", 1, 0, 1, 1)], threshold=100.0, run_id=7)
    assert state.alarmed and state.cases == 30
    state = update(state, [CaseCounts("c", 1, 1, 1, 0)] * 5, threshold=100.0, run_id=8)
    assert state.alarmed and state.alarm_run is not None
    assert update(state, [CaseCounts("c", 0, 0, 1, 1)], threshold=100.0) == state
    assert acknowledge(state) == LossState()
    assert LossState.from_dict(state.to_dict()) == state
