"""evals.stats.mmd: the per-prompt Hamming MMD test and its permutation p-value."""

import numpy as np
import pytest

from evals.stats.mmd import encode, hamming_gram, mmd_test

ALPHABET = np.array(list("abcdefghij "))


def substituted(rng, ref: np.ndarray, rate: float, n: int) -> list[str]:
    """n texts: ``ref`` with each character replaced, with probability ``rate``, by a random
    letter — a stand-in for sampling at temperature 1 (the rate plays the temperature)."""
    arr = np.tile(ref, (n, 1))
    hit = rng.random(arr.shape) < rate
    arr[hit] = rng.choice(ALPHABET, int(hit.sum()))
    return ["".join(row) for row in arr]


def tiers(seed, rates, prompts=10, k=5, length=100, counts=None):
    """One {prompt: texts} dict per rate, all around the same per-prompt reference texts;
    ``counts[t][p]`` overrides k for tier t and prompt p."""
    rng = np.random.default_rng(seed)
    refs = [rng.choice(ALPHABET, length) for _ in range(prompts)]
    counts = counts or [[k] * prompts for _ in rates]
    return [
        {p: substituted(rng, refs[p], rate, n[p]) for p in range(prompts)}
        for rate, n in zip(rates, counts, strict=True)
    ]


def two_tiers(seed, rate_a, rate_b, prompts=10, k=5, length=100, counts_b=None):
    counts = [[k] * prompts, counts_b or [k] * prompts]
    return tiers(seed, (rate_a, rate_b), prompts, k, length, counts)


def test_it_pads_and_truncates_to_l_characters():
    x = encode(["abc", "abcdefg", "héllo"], L=5)
    assert x.shape == (3, 5) and x.dtype == np.uint32
    assert x[0].tolist() == [98, 99, 100, 0, 0]  # code point + 1; 0 is padding
    assert x[1].tolist() == [98, 99, 100, 101, 102]
    assert x[2, 1] == ord("é") + 1
    assert hamming_gram(x[:1], x[1:2])[0, 0] == pytest.approx(3 / 5)


def test_it_computes_the_unbiased_statistic_by_hand():
    # k(aa,ab) = k(bb,ba) = 1/2; cross: k(aa,bb) = 0, k(aa,ba) = 1/2, k(ab,bb) = 1/2,
    # k(ab,ba) = 0.  MMD² = 2·½/(2·1) + 2·½/(2·1) − 2·(1/4) = 0.5
    res = mmd_test({"p": ["aa", "ab"]}, {"p": ["bb", "ba"]}, L=2, B=10)
    assert res.statistic == pytest.approx(0.5)


def test_it_averages_prompts_so_unequal_counts_keep_the_scale():
    one = mmd_test({"p": ["aa", "ab"]}, {"p": ["bb", "ba"]}, L=2, B=10)
    two = mmd_test(
        {"p": ["aa", "ab"], "q": ["xx", "xx", "xx"]},
        {"p": ["bb", "ba"], "q": ["xx", "xx"]},
        L=2,
        B=10,
    )
    assert two.statistic == pytest.approx(one.statistic / 2)  # q contributes 0
    assert two.n_per_tier == (5, 4) and two.min_per_prompt == (2, 2)


def test_it_gives_roughly_uniform_p_values_under_the_null():
    ps = [mmd_test(*two_tiers(s, 0.3, 0.3), B=99, seed=s).p_value for s in range(100)]
    assert np.mean(np.array(ps) < 0.05) <= 0.1
    assert 0.35 < np.mean(ps) < 0.65


def test_it_rejects_clearly_different_distributions():
    res = mmd_test(*two_tiers(1, 0.1, 0.5), B=999)
    assert res.p_value < 0.01
    assert res.statistic > res.critical_value(0.05)


def test_it_never_returns_a_p_value_below_one_over_b_plus_one():
    res = mmd_test(*two_tiers(2, 0.0, 0.9), B=199)
    assert res.p_value == pytest.approx(1 / 200)
    assert res.null_stats.shape == (199,)


def test_it_permutes_within_prompts_only():
    # Prompts differ completely from each other and the tiers see them in opposite
    # proportions; within a prompt the tiers are the same distribution: no rejection.
    ps = []
    for s in range(20):
        a, b = two_tiers(s, 0.2, 0.2, k=8, counts_b=[2, 8] * 5)
        a = {p: texts if p % 2 == 0 else texts[:2] for p, texts in a.items()}  # 8/2 vs 2/8
        ps.append(mmd_test(a, b, B=199, seed=s).p_value)
    assert np.mean(np.array(ps) < 0.05) <= 0.15
    assert np.mean(ps) > 0.3


def test_it_drops_prompts_with_fewer_than_two_samples_and_says_so():
    a, b = two_tiers(3, 0.3, 0.3, prompts=4)
    a[0] = a[0][:1]
    del b[1]
    res = mmd_test(a, b, B=50)
    assert res.n_prompts == 2
    assert res.dropped_prompts == [
        "0: 1 vs 5 samples (need 2 on each side)",
        "1: 5 vs 0 samples (need 2 on each side)",
    ]
    empty = mmd_test({"x": ["a"]}, {"x": ["b"]}, B=50)
    assert empty.statistic is None and empty.p_value is None and empty.n_prompts == 0


def test_it_is_reproducible_for_a_seed():
    data = two_tiers(4, 0.3, 0.35)
    assert mmd_test(*data, B=99, seed=7).p_value == mmd_test(*data, B=99, seed=7).p_value
    assert mmd_test(*data, B=99, seed=7).to_dict()["n_prompts"] == 10
