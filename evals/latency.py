"""Latency statistics of one tier: percentiles with n, availability, goodput.

Definitions are DESIGN.md's "Measurement definitions". Percentiles use linear interpolation
between order statistics (numpy's default ``method="linear"``, Hyndman & Fan 1996 type 7),
and none is given below ``MIN_N`` values: with four samples "P99" is just the maximum, and
showing it as a P99 would be a false precision.

Each percentile also has its own minimum n (:func:`min_n_for`): the n below which not even the
widest distribution-free interval, [min, max], covers the true q-quantile with 95%
probability. For n i.i.d. values, P(X₍₁₎ ≤ ξ_q ≤ X₍ₙ₎) = 1 − qⁿ − (1 − q)ⁿ (the order-statistic
interval; David & Nagaraja, "Order Statistics", 3rd ed., §7.1), so below that n no interval
for the quantile exists at all, and a point value would be a guess: P50 needs 6 values, P90
29, P95 59, P99 299. (Measured in the issue: P99 from n = 5 is on median 0.55× the truth.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

MIN_N = 5
DEFAULT_QS = (50, 90, 95, 99)
TOKEN_MISMATCH = 0.10  # flag a >10% server-vs-estimate difference in output tokens


def _get(record: Any, name: str) -> Any:
    """A field of a plain dict or of an object (TimingRecord, model row) alike."""
    return record.get(name) if isinstance(record, Mapping) else getattr(record, name, None)


def _finite(values: Iterable[float | None]) -> np.ndarray:
    arr = np.array([np.nan if v is None else v for v in values], dtype=float)
    return arr[np.isfinite(arr)]


def min_n_for(q: float, confidence: float = 0.95) -> int:
    """Smallest n for which [min, max] of n values covers the q-quantile (q in (0, 1), or a
    percent in (1, 100)) with probability ≥ ``confidence``: 1 − qⁿ − (1 − q)ⁿ ≥ confidence."""
    q = q / 100 if q > 1 else q
    if not 0 < q < 1:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    n = 1
    while 1 - q**n - (1 - q) ** n < confidence:
        n += 1
    return n


def percentiles(
    values: Iterable[float | None],
    qs: Sequence[float] = DEFAULT_QS,
    min_n: int = MIN_N,
    per_quantile: bool = False,
) -> dict[str, Any]:
    """{"n": n, "too_small": bool, "p50": …, "p90": …}; missing values are skipped and every
    percentile is None when fewer than ``min_n`` values remain. With ``per_quantile`` each
    one is also None below its own :func:`min_n_for` (P95 below 59 values, P99 below 299);
    off by default until the pages and reports that format every percentile handle a None
    P95 beside a P50."""
    arr = _finite(values)
    too_small = arr.size < min_n
    out: dict[str, Any] = {"n": int(arr.size), "too_small": too_small}
    vals = [None] * len(qs) if too_small else np.percentile(arr, qs, method="linear").tolist()
    out.update({
        f"p{q:g}": v if not per_quantile or arr.size >= min_n_for(q) else None
        for q, v in zip(qs, vals, strict=True)
    })  # fmt: skip
    return out


def availability(n_ok: int, n_total: int, n_rate_limited: int) -> dict[str, float | None]:
    """Successes / requests, with 429s counted apart (DESIGN.md): ``availability`` counts a
    429 as a failure; ``availability_excl_rate_limited`` leaves 429s out of the denominator
    (the vendor answered, it just refused our volume)."""
    if n_total <= 0:
        return {
            "availability": None,
            "rate_limited_share": None,
            "availability_excl_rate_limited": None,
        }
    served = n_total - n_rate_limited
    return {
        "availability": n_ok / n_total,
        "rate_limited_share": n_rate_limited / n_total,
        "availability_excl_rate_limited": n_ok / served if served > 0 else None,
    }


def goodput(records: Iterable[Any], slo: Mapping[str, float]) -> float | None:
    """Share of requests meeting every SLO, errors in the denominator (DESIGN.md).

    ``slo`` maps a timing field to its maximum, e.g. {"ttft_ms": 500, "e2e_ms": 8000}. A
    request counts when it succeeded and each named value is present and ≤ its limit; a
    missing value cannot be shown to meet the SLO and counts against it.
    """
    met = total = 0
    for rec in records:
        total += 1
        values = [_get(rec, name) for name in slo]
        met += bool(_get(rec, "ok")) and all(
            v is not None and v <= limit for v, limit in zip(values, slo.values(), strict=True)
        )
    return met / total if total else None


def summarise_tier(samples: Sequence[Any], min_n: int = MIN_N) -> dict[str, Any]:
    """One tier's summary from its samples (dicts or objects with ok, error_class, ttft_ms,
    e2e_ms, tpot_ms, completion_tokens, estimated_tokens).

    Timings come from successful samples only; decode speed is 1000/TPOT tok/s per sample
    (DESIGN.md: decode speed = 1/TPOT). ``token_count_flags`` counts samples whose server
    token count and tokenizer estimate differ by more than 10% of the server count.
    """
    ok = [s for s in samples if _get(s, "ok")]
    errors = Counter(str(_get(s, "error_class") or "unknown") for s in samples if not _get(s, "ok"))
    tpot = _finite(_get(s, "tpot_ms") for s in ok)
    tpot = tpot[tpot > 0]
    decode = percentiles(1000.0 / tpot, qs=(50,), min_n=min_n)
    flags = 0
    for s in ok:
        server, est = _get(s, "completion_tokens"), _get(s, "estimated_tokens")
        if server and est is not None and abs(server - est) > TOKEN_MISMATCH * server:
            flags += 1
    n, rate_limited = len(samples), errors.get("rate_limited", 0)
    return {
        "n": n,
        "n_ok": len(ok),
        "errors": dict(errors),
        "rate_limited": rate_limited,
        **availability(len(ok), n, rate_limited),
        "ttft_ms": percentiles((_get(s, "ttft_ms") for s in ok), min_n=min_n),
        "e2e_ms": percentiles((_get(s, "e2e_ms") for s in ok), min_n=min_n),
        "tpot_ms": percentiles((_get(s, "tpot_ms") for s in ok), min_n=min_n),
        "decode_tok_s_p50": decode["p50"],
        "token_count_flags": flags,
    }
