"""How many times faster the fast tier is, per scenario, with a paired bootstrap interval.

The estimate is always oriented as "times faster" (> 1 means the fast tier is faster):
- durations (TTFT, E2E, TPOT; lower is better): stat(base) / stat(fast);
- rates (decode tok/s; higher is better): stat(fast) / stat(base).
Decode speed is 1000/TPOT, so the ratio of median tok/s fast/base equals the ratio of median
TPOT base/fast (exactly for odd n; the median commutes with a monotone map).

Statistic: the ratio of medians — what a typical request experiences, robust to the heavy
right tail of latencies. "median of per-pair ratios" is available for probes that are truly
paired in time (same case, sent back to back) and share a disturbance.
Interval: ``scipy.stats.bootstrap`` resampling *pairs* (``paired=True``), BCa (Efron 1987),
which corrects the percentile interval for bias and skew; when BCa is degenerate (e.g. every
resample has the same median, so the acceleration is undefined) we fall back to the percentile
interval and say so in ``note``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

import numpy as np

from evals.latency import MIN_N

Statistic = Literal["ratio_of_medians", "median_of_ratios"]
Kind = Literal["duration", "rate"]


@dataclass(frozen=True)
class RatioCI:
    """``estimate`` = how many times faster the fast tier is; low/high its interval."""

    estimate: float | None
    low: float | None
    high: float | None
    n: int
    method: str  # "BCa", "percentile", or "none" when n is too small
    confidence: float = 0.95
    note: str = ""


def _ratio_of_medians(num: np.ndarray, den: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(np.median(num, axis=axis) / np.median(den, axis=axis))


def _median_of_ratios(num: np.ndarray, den: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(np.median(num / den, axis=axis))


STATISTICS = {"ratio_of_medians": _ratio_of_medians, "median_of_ratios": _median_of_ratios}


def paired_ratio_ci(
    base: Sequence[float | None],
    fast: Sequence[float | None],
    *,
    kind: Kind = "duration",
    statistic: Statistic = "ratio_of_medians",
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    method: str = "BCa",
    min_n: int = MIN_N,
) -> RatioCI:
    """Times-faster estimate and interval from paired probes ``base[i]``, ``fast[i]``.

    Pairs where either value is missing, non-finite or ≤ 0 are dropped (a failed probe has
    no latency; errors are counted in availability instead). Below ``min_n`` pairs only the
    estimate is given.
    """
    if len(base) != len(fast):
        raise ValueError("base and fast must be paired (same length)")
    b = np.array([np.nan if v is None else v for v in base], dtype=float)
    f = np.array([np.nan if v is None else v for v in fast], dtype=float)
    keep = np.isfinite(b) & np.isfinite(f) & (b > 0) & (f > 0)
    b, f = b[keep], f[keep]
    num, den = (b, f) if kind == "duration" else (f, b)
    func = STATISTICS[statistic]
    n = int(b.size)
    if n == 0:
        return RatioCI(None, None, None, 0, "none", confidence, "no complete pair")
    estimate = float(func(num, den))
    if n < min_n:
        note = f"n too small: {n} pairs, need {min_n}"
        return RatioCI(estimate, None, None, n, "none", confidence, note)

    def run(how: str) -> tuple[float, float]:
        from scipy.stats import bootstrap

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # degenerate BCa warns; we detect it by NaN
            res = bootstrap(
                (num, den),
                func,
                paired=True,
                vectorized=True,
                confidence_level=confidence,
                n_resamples=n_resamples,
                method=how,
                rng=np.random.default_rng(seed),
            )
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    low, high = run(method)
    note, used = "", method
    if not (math.isfinite(low) and math.isfinite(high)):
        low, high = run("percentile")
        note, used = f"{method} degenerate; percentile interval", "percentile"
    if not (math.isfinite(low) and math.isfinite(high)):
        low = high = estimate  # every resample gave the same value
        note = "all resamples equal"
    return RatioCI(estimate, low, high, n, used, confidence, note)


class ClaimStatus(StrEnum):
    HOLDS = "holds"
    DOES_NOT_HOLD = "does not hold"
    CANNOT_TELL = "cannot tell"


def claim_status(ci: RatioCI, claimed: float) -> ClaimStatus:
    """The claim holds when it is inside the interval or below it; it does not hold when the
    whole interval lies below the claimed factor; without an interval we cannot tell."""
    if ci.estimate is None or ci.low is None or ci.high is None:
        return ClaimStatus.CANNOT_TELL
    return ClaimStatus.DOES_NOT_HOLD if ci.high < claimed else ClaimStatus.HOLDS


def claim_check(ci: RatioCI, claimed: float) -> str:
    """One line comparing a vendor's "N× faster" with the measured interval (``claim_status``
    in words)."""
    head = f"claimed {claimed:g}x"
    status = claim_status(ci, claimed)
    if status is ClaimStatus.CANNOT_TELL:
        return f"{head}: cannot tell ({ci.note or 'no interval'})"
    return f"{head}: {status} ({ci.estimate:.1f}x [{ci.low:.1f}, {ci.high:.1f}])"
