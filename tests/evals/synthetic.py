"""Synthetic tiers for the statistics tests and benchmarks: texts around shared per-prompt
references with per-character substitution (the substitution rate plays the temperature),
and hand-set MMD results."""

import numpy as np

from evals.stats.mmd import MMDResult

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


def result(p, stat, *, prompts=25, k=10, q95=0.0012, L=1000, B=999):
    """An MMD result whose permutation null has its 95th percentile at q95."""
    return MMDResult(stat, p, np.full(B, q95), prompts, (prompts * k, prompts * k), L, B, (k, k))
