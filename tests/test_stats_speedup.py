"""evals.stats.speedup: paired bootstrap intervals of "times faster" and claim checks."""

import numpy as np
import pytest

from evals.stats.speedup import ClaimStatus, RatioCI, claim_check, claim_status, paired_ratio_ci


def lognormal_pairs(seed, n=50, true_ratio=3.0):
    """Paired probes: the fast tier takes base/true_ratio times a lognormal disturbance, so
    the ratio of medians is exactly true_ratio in the population."""
    rng = np.random.default_rng(seed)
    base = rng.lognormal(6.0, 0.5, n)
    return base, base / true_ratio * rng.lognormal(0.0, 0.2, n)


def test_it_covers_the_true_ratio_with_bca():
    base, fast = lognormal_pairs(0)
    ci = paired_ratio_ci(base, fast)
    assert ci.method == "BCa" and ci.n == 50
    assert ci.low < 3.0 < ci.high and ci.low < ci.estimate < ci.high
    covered = [
        (c := paired_ratio_ci(*lognormal_pairs(s), n_resamples=999)).low < 3.0 < c.high
        for s in range(1, 41)
    ]
    assert np.mean(covered) >= 0.85  # nominal 0.95


def test_it_orients_rates_and_durations_as_times_faster():
    base, fast = lognormal_pairs(1, n=51)  # odd n: the median commutes with 1000/x exactly
    by_tpot = paired_ratio_ci(base, fast, kind="duration")
    by_tok_s = paired_ratio_ci(1000 / base, 1000 / fast, kind="rate")
    assert by_tpot.estimate == pytest.approx(by_tok_s.estimate)
    assert by_tpot.estimate > 1


def test_it_drops_incomplete_pairs_and_withholds_intervals_below_min_n():
    ci = paired_ratio_ci([100, None, 90, float("nan"), 80], [50, 40, None, 30, 40])
    assert ci.n == 2 and ci.estimate == pytest.approx(90 / 45)
    assert ci.low is None and ci.method == "none" and "n too small" in ci.note
    with pytest.raises(ValueError):
        paired_ratio_ci([1, 2], [1])


def test_it_falls_back_to_percentile_when_bca_is_degenerate():
    ci = paired_ratio_ci([10.0] * 20, [5.0] * 20)
    assert ci.method == "percentile" and "degenerate" in ci.note
    assert (ci.estimate, ci.low, ci.high) == (2.0, 2.0, 2.0)


def test_it_words_claim_checks():
    ci = RatioCI(5.8, 5.1, 6.4, 40, "BCa")
    assert claim_check(ci, 6) == "claimed 6x: holds (5.8x [5.1, 6.4])"
    ci = RatioCI(1.9, 1.7, 2.1, 40, "BCa")
    assert claim_check(ci, 6) == "claimed 6x: does not hold (1.9x [1.7, 2.1])"
    assert claim_check(paired_ratio_ci([3, 4], [1, 2]), 2.5) == (
        "claimed 2.5x: cannot tell (n too small: 2 pairs, need 5)"
    )


def test_the_claim_status_is_a_value_the_sentence_is_built_from():
    assert claim_status(RatioCI(5.8, 5.1, 6.4, 40, "BCa"), 6) is ClaimStatus.HOLDS
    assert claim_status(RatioCI(1.9, 1.7, 2.1, 40, "BCa"), 6) is ClaimStatus.DOES_NOT_HOLD
    assert claim_status(RatioCI(5.0, None, None, 2, "none"), 6) is ClaimStatus.CANNOT_TELL
    # the interval's top exactly at the claim still holds (only a whole interval below fails)
    assert claim_status(RatioCI(5.0, 4.0, 6.0, 40, "BCa"), 6) is ClaimStatus.HOLDS
