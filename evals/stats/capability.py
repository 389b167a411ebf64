"""Capability on the same cases: paired pass/fail of unit tests, and pass@k.

A fast tier that is a distilled model loses on hard cases; comparing pass rates case by case
(paired) instead of as two independent proportions removes the between-case variance.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar test (McNemar 1947; exact form: Mosteller 1952).

    Under H0 each discordant case (one tier passes, the other fails) is equally likely to
    go either way, so b ~ Binomial(b + c, 1/2); the p-value is scipy's two-sided exact
    binomial test. With no discordant case there is no evidence either way: p = 1.
    """
    if b < 0 or c < 0:
        raise ValueError("counts must be non-negative")
    if b + c == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(b, b + c, 0.5, alternative="two-sided").pvalue)


@dataclass(frozen=True)
class PairedTable:
    """The 2×2 table of cases run on both tiers, and what it says."""

    n: int
    both_pass: int
    fast_only: int  # fast passed, base failed
    base_only: int  # base passed, fast failed
    both_fail: int
    p_value: float  # exact McNemar on fast_only vs base_only
    fast_pass_rate: float | None
    base_pass_rate: float | None
    diff_points: float | None  # 100 · (fast − base) pass rate: negative = fast is worse
    unpaired: list[str] = field(default_factory=list)  # cases seen on one tier only


def paired_table(fast_pass: Mapping[Any, bool], base_pass: Mapping[Any, bool]) -> PairedTable:
    """Pair cases by key; cases present on one side only are listed, not counted."""
    common = sorted(set(fast_pass) & set(base_pass), key=str)
    unpaired = sorted(str(k) for k in set(fast_pass) ^ set(base_pass))
    f = np.array([bool(fast_pass[k]) for k in common], dtype=bool)
    b = np.array([bool(base_pass[k]) for k in common], dtype=bool)
    n = len(common)
    fast_only, base_only = int(np.sum(f & ~b)), int(np.sum(~f & b))
    fast_rate = float(f.mean()) if n else None
    base_rate = float(b.mean()) if n else None
    return PairedTable(
        n=n,
        both_pass=int(np.sum(f & b)),
        fast_only=fast_only,
        base_only=base_only,
        both_fail=int(np.sum(~f & ~b)),
        p_value=mcnemar_exact(fast_only, base_only),
        fast_pass_rate=fast_rate,
        base_pass_rate=base_rate,
        diff_points=100.0 * (fast_rate - base_rate)
        if fast_rate is not None and base_rate is not None
        else None,
        unpaired=unpaired,
    )


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c pass (Chen et al. 2021, "Evaluating Large
    Language Models Trained on Code", eq. 1): 1 − C(n−c, k)/C(n, k), computed in the
    numerically stable product form 1 − ∏_{i=n−c+1}^{n} (1 − k/i) of the paper's code."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))
