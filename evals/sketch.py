"""A mergeable latency sketch: counts in logarithmically spaced buckets (DDSketch).

Source: Masson, Rim & Lee, "DDSketch: A Fast and Fully-Mergeable Quantile Sketch with
Relative-Error Guarantees", VLDB 2019, §2. With γ = (1 + α) / (1 − α), a value x > 0 goes to
bucket i = ⌈log_γ x⌉, i.e. (γ^(i−1), γ^i], and the bucket is read back as 2γ^i / (γ + 1); every
value in the bucket is then within relative error α of what is read back. Two sketches merge by
adding counts bucket by bucket, exactly, so a week's or a month's percentile is the merge of its
runs' sketches, never a scan of samples.

α = 1 %: a percentile read from the sketch is within 1 % of the same order statistic of the raw
values. For the interpolated percentile numpy computes (``method="linear"``, what
``evals.latency.percentiles`` uses) the sketch interpolates between the two neighbouring order
statistics the same way, so it is within 1 % of numpy's value too.

Stored as a dict ``{bucket index (str): count}`` (JSON-ready): a run of 12 samples has at most 12
keys; a latency spread of 100× spans ~230 buckets.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evals.latency import min_n_for

ALPHA = 0.01
GAMMA = (1 + ALPHA) / (1 - ALPHA)
_LOG_GAMMA = math.log(GAMMA)
ZERO = "z"  # values ≤ 0 (a clock oddity); read back as 0.0


def bucket(value: float) -> str:
    if value <= 0:
        return ZERO
    return str(math.ceil(math.log(value) / _LOG_GAMMA))


def value_of(key: str) -> float:
    if key == ZERO:
        return 0.0
    return 2 * GAMMA ** int(key) / (GAMMA + 1)


def sketch(values: Iterable[float | None]) -> dict[str, int]:
    """Bucket counts of the finite values (None and NaN skipped, as in ``latency.percentiles``)."""
    out: dict[str, int] = {}
    for v in values:
        if v is None or not math.isfinite(v):
            continue
        key = bucket(v)
        out[key] = out.get(key, 0) + 1
    return out


def merge(sketches: Iterable[Mapping[str, int] | None]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in sketches:
        for key, count in (s or {}).items():
            out[key] = out.get(key, 0) + count
    return out


def count(s: Mapping[str, int]) -> int:
    return sum(s.values())


def _order_statistic(ordered: Sequence[tuple[float, int]], rank: int) -> float:
    """The value read back for the rank-th smallest value (0-based)."""
    seen = 0
    for value, n in ordered:
        seen += n
        if rank < seen:
            return value
    return ordered[-1][0]


def quantiles(
    s: Mapping[str, int], qs: Sequence[float], min_n: int, per_quantile: bool = False
) -> dict[str, Any]:
    """The same shape as ``evals.latency.percentiles``: {"n", "too_small", "p50", …}, each
    percentile interpolated between order statistics at h = (n − 1)·q/100 as numpy's
    "linear" method does; None below ``min_n``, and with ``per_quantile`` below its own
    minimum n too (``evals.latency.min_n_for``: P95 59, P99 299)."""
    n = count(s)
    out: dict[str, Any] = {"n": n, "too_small": n < min_n}
    ordered = sorted((value_of(k), c) for k, c in s.items() if c)
    for q in qs:
        if n < min_n or n == 0 or (per_quantile and n < min_n_for(q)):
            out[f"p{q:g}"] = None
            continue
        h = (n - 1) * q / 100
        lo, frac = int(math.floor(h)), h - math.floor(h)
        low = _order_statistic(ordered, lo)
        high = _order_statistic(ordered, min(lo + 1, n - 1)) if frac else low
        out[f"p{q:g}"] = low + frac * (high - low)
    return out


def trailing(
    sketches: Sequence[Mapping[str, int] | None], need: int, max_runs: int
) -> list[tuple[dict[str, int], int]]:
    """For each position i, the merge of sketches i, i−1, … back until it holds ``need``
    values or ``max_runs`` sketches: (merged counts, sketches merged). Why: a P95 needs 59
    values (``min_n_for(95)``) and a probe of 20 requests per tier never has them alone; a
    trailing window of whole runs reaches them without reading one sample, and its size is
    said beside the point it gives."""
    out = []
    for i in range(len(sketches)):
        merged: dict[str, int] = {}
        used = 0
        for s in reversed(sketches[max(0, i - max_runs + 1) : i + 1]):
            merged = merge([merged, s])
            used += 1
            if count(merged) >= need:
                break
        out.append((merged, used))
    return out
