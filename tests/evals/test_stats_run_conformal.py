"""The run as the exchangeable unit of a tripwire (``evals.stats.run_conformal``): the rank bet
is an e-value whatever the runs' distribution, hour-level numerics shared by a run's queries
are not a change, and a switched model is."""

from __future__ import annotations

import numpy as np
import pytest

from evals.stats import border, run_conformal
from evals.stats import tripwire as logprob

PROMPTS = ("x", "Hi", "1+1=")
TOKENS = ("a", "b", "c", "d", "e")


def run_window(rng: np.random.Generator, offset_sd: float, shift: float = 0.0) -> dict:
    """One run: 6 identical queries per prompt (bit-exact within the run), the run's own
    numerics offset on every logprob, and a model change's ``shift``."""
    out = {}
    for k, prompt in enumerate(PROMPTS):
        base = -np.arange(1, len(TOKENS) + 1, dtype=float) - k
        row = base + rng.normal(0, offset_sd, len(TOKENS)) + shift * np.sin(np.arange(5) + k)
        out[prompt] = [dict(zip(TOKENS, map(float, row), strict=True))] * 6
    return out


@pytest.mark.parametrize("n", [8, 25])
def test_the_rank_bet_has_mean_one_over_the_uniform_ranks(n):
    mean = sum(run_conformal.rank_e(k / n, n) for k in range(1, n + 1)) / n
    assert mean == pytest.approx(1.0)


def test_the_reference_is_a_day_of_runs_within_a_week_and_a_day():
    assert [run_conformal.reference_runs(s) for s in (15, 900, 3600, 4 * 3600, 86400)] == [
        24,
        24,
        24,
        7,
        7,
    ]


def test_hour_level_numerics_are_not_a_change_where_the_request_level_test_calls_them_one():
    rng = np.random.default_rng(4)
    reference = [run_window(rng, 0.012) for _ in range(24)]
    current = run_window(rng, 0.012)
    pooled = {p: [r for w in reference for r in w[p]] for p in PROMPTS}
    old = logprob.window_test(pooled, current, tolerance=0.0, permutations=999)
    assert old.p_value < 0.01  # every query of the run moved alike: "significant"
    test = logprob.run_test(reference, current, permutations=999)
    assert test is not None and test.e_value < 2, test


def test_a_quantization_sized_shift_ranks_first_and_passes_the_tolerance():
    rng = np.random.default_rng(5)
    reference = [run_window(rng, 0.012) for _ in range(24)]
    test = logprob.run_test(reference, run_window(rng, 0.012, shift=0.08), permutations=999)
    assert test is not None
    assert (round(test.rank_p * test.n_runs), test.n_runs) == (1, 25)
    assert test.statistic > test.tolerance and test.tolerance_p <= 0.001
    assert test.e_value > 10


def test_a_run_without_answers_brings_no_evidence():
    reference = [{"aa": {"x": 5, "y": 5}} for _ in range(7)]
    assert border.run_test(reference, {}) is None
    assert border.run_test(reference, {"aa": {}}) is None
    assert logprob.run_test([run_window(np.random.default_rng(0), 0.0)] * 7, {}) is None
