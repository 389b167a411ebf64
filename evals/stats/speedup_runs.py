"""Speed-up intervals that hold their coverage: whole runs resampled, failures kept as slow.

Three changes from :func:`evals.stats.speedup.paired_ratio_ci`, each for a measured failure:

- **Cluster bootstrap over runs.** Probes of one run share that run's load (the vendor was
  busy or not), so pooled pairs from several runs are not independent and resampling pairs
  understates the spread (85% coverage for a nominal 95%). Whole runs are resampled with
  replacement and all their pairs kept together (Davison & Hinkley, "Bootstrap Methods and
  their Application", 1997, §3.8, the first stage of the two-stage scheme); the interval is
  the percentile interval of the ratio of medians. With pairs from fewer than ``MIN_RUNS``
  runs there are too few clusters to resample (2 runs covered 51-57% in the benchmark), so the
  pairs are the clusters (then the interval describes those runs' conditions).
- **No interval below ``MIN_PAIRS`` pairs** (20): at n = 5 the 95% interval covered 86%.
- **Failures counted as slow, not dropped.** A failed or timed-out probe is censored at the
  timeout: its latency is +inf (its rate 0), which a median handles by rank, so a fast tier
  whose slowest 15% time out is not read as faster than it is. When more than half of a
  tier's probes fail, its median is infinite and no ratio is given.

A claim "N× faster" is then **confirmed** when the interval's lower bound reaches it,
**contradicted** when the upper bound is below it, and otherwise **not contradicted** (the
run could not tell). Coverage is measured in ``benchmarks/speedup_coverage.py``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from evals.stats.speedup import Kind, RatioCI

MIN_PAIRS = 20
MIN_RUNS = 5  # fewer runs than this: resample pairs (2 runs as clusters covered only 51-57%)
Status = Literal["confirmed", "contradicted", "not contradicted", "cannot tell"]


def _censored(values: Sequence[float | None], kind: Kind) -> np.ndarray:
    """Durations: missing / non-finite / ≤ 0 → +inf (slowest). Rates: → 0."""
    arr = np.array([np.nan if v is None else v for v in values], dtype=float)
    bad = ~np.isfinite(arr) | (arr <= 0)
    arr[bad] = np.inf if kind == "duration" else 0.0
    return arr


def _ratio(base: np.ndarray, fast: np.ndarray, kind: Kind) -> float:
    b, f = float(np.median(base)), float(np.median(fast))
    if not (math.isfinite(b) and math.isfinite(f)) or b <= 0 or f <= 0:
        return math.nan  # half or more of a tier failed: its median is the censoring value
    num, den = (b, f) if kind == "duration" else (f, b)
    return num / den


def cluster_ratio_ci(
    base: Sequence[float | None],
    fast: Sequence[float | None],
    runs: Sequence[Hashable] | None = None,
    *,
    kind: Kind = "duration",
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    min_n: int = MIN_PAIRS,
) -> RatioCI:
    """Times-faster (ratio of medians) and its cluster-bootstrap interval from paired probes
    ``base[i]``, ``fast[i]`` of run ``runs[i]`` (module docstring)."""
    if len(base) != len(fast) or (runs is not None and len(runs) != len(base)):
        raise ValueError("base, fast and runs must be paired (same length)")
    b, f = _censored(base, kind), _censored(fast, kind)
    n = int(b.size)
    if n == 0:
        return RatioCI(None, None, None, 0, "none", confidence, "no pair")
    failed = int(np.sum(~np.isfinite(b) | (b == 0)) + np.sum(~np.isfinite(f) | (f == 0)))
    estimate = _ratio(b, f, kind)
    note = f"{failed} failed probes counted as slowest" if failed else ""
    if not math.isfinite(estimate):
        return RatioCI(None, None, None, n, "none", confidence, "half or more of a tier failed")
    if n < min_n:
        return RatioCI(estimate, None, None, n, "none", confidence,
                       f"n too small: {n} pairs, need {min_n}")  # fmt: skip
    labels = list(range(n)) if runs is None or len(set(runs)) < MIN_RUNS else list(runs)
    first: dict[Hashable, int] = {}  # a label's cluster number, in order of first appearance
    member = np.array([first.setdefault(x, len(first)) for x in labels])
    stats = _resampled_ratios(b, f, member, len(first), kind, n_resamples, seed)
    stats = stats[np.isfinite(stats)]
    tail = (1 - confidence) / 2
    low, high = np.quantile(stats, [tail, 1 - tail]) if stats.size else (math.nan, math.nan)
    method = "cluster bootstrap over runs" if len(first) < n else "bootstrap over pairs"
    return RatioCI(estimate, float(low), float(high), n, method, confidence, note)


CHUNK = 2_000_000  # resample x pair cells per step: bounds the memory of long windows


def _resampled_ratios(
    b: np.ndarray, f: np.ndarray, member: np.ndarray, clusters: int, kind: Kind,
    n_resamples: int, seed: int,
) -> np.ndarray:  # fmt: skip
    """The ratio of medians of ``n_resamples`` resamples of whole clusters (``member[i]`` is
    pair i's cluster), all at once: a resample is a count per cluster, so each tier's median
    is a weighted median of its values sorted once. Equal, draw for draw, to concatenating the
    drawn clusters and taking ``np.median`` (the draws come from ``seed`` in the same order),
    at a fraction of the cost of a Python loop over resamples."""
    rng = np.random.default_rng(seed)
    order_b, order_f = np.argsort(b, kind="stable"), np.argsort(f, kind="stable")
    out = np.empty(n_resamples)
    step = max(1, CHUNK // max(b.size, clusters))
    for start in range(0, n_resamples, step):
        rows = min(step, n_resamples - start)
        draws = rng.integers(0, clusters, (rows, clusters))
        offsets = (draws + clusters * np.arange(rows)[:, None]).ravel()
        counts = np.bincount(offsets, minlength=rows * clusters).reshape(rows, clusters)
        mb = _weighted_median(b[order_b], counts[:, member[order_b]])
        mf = _weighted_median(f[order_f], counts[:, member[order_f]])
        ok = np.isfinite(mb) & np.isfinite(mf) & (mb > 0) & (mf > 0)
        num, den = (mb, mf) if kind == "duration" else (mf, mb)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + rows] = np.where(ok, num / np.where(ok, den, 1.0), math.nan)
    return out


def _weighted_median(ascending: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per row of ``weights``: the median of ``ascending`` with value i repeated
    ``weights[row, i]`` times, as ``np.median`` takes it (the mean of the two middle values
    when the count is even)."""
    cum = np.cumsum(weights, axis=1)
    total = cum[:, -1]
    low = (cum <= ((total - 1) // 2)[:, None]).sum(axis=1)
    high = (cum <= (total // 2)[:, None]).sum(axis=1)
    middle: np.ndarray = (ascending[low] + ascending[high]) / 2
    return middle


@dataclass(frozen=True)
class ClaimAssessment:
    status: Status
    line: str


def assess_claim(ci: RatioCI, claimed: float) -> ClaimAssessment:
    """Confirmed (low ≥ claim), contradicted (high < claim), else not contradicted."""
    head = f"claimed {claimed:g}x"
    if ci.estimate is None or ci.low is None or ci.high is None:
        return ClaimAssessment("cannot tell", f"{head}: cannot tell ({ci.note or 'no interval'})")
    measured = f"{ci.estimate:.1f}x [{ci.low:.1f}, {ci.high:.1f}]"
    if ci.low >= claimed:
        status: Status = "confirmed"
    elif ci.high < claimed:
        status = "contradicted"
    else:
        status = "not contradicted"
    return ClaimAssessment(status, f"{head}: {status} ({measured})")
