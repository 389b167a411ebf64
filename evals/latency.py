"""Latency statistics of one tier: percentiles with n, availability, goodput.

Definitions are in docs/measures.md. Percentiles use linear interpolation
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
    finite: np.ndarray = arr[np.isfinite(arr)]
    return finite


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
    the product's run summaries, speed page, load probes and reports turn it on."""
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
    """Successes / requests, with 429s counted apart: ``availability`` counts a
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
    """Share of requests meeting every SLO, errors in the denominator (docs/measures.md).

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


def output_tps(record: Any, *, definition: str = "generation") -> float | None:
    """Output tokens per second of one successful request, in one of the two definitions
    vendors and benchmarks use (output tokens: the server's count, else our estimate):

    - ``"generation"``: tokens / (E2E − TTFT), the speed while tokens stream, first token's
      wait left out. Artificial Analysis's "output speed" ("tokens per second received while
      the model is generating tokens, i.e. after the first chunk"); the reading of
      Anthropic's "output tokens per second" for its fast mode, which names no formula.
    - ``"e2e"``: tokens / E2E, the whole request. LLMPerf's per-request output throughput
      (``number_output_tokens / e2e_latency``).

    None for a failed request, fewer than two tokens, or a zero interval.
    """
    if not _get(record, "ok"):
        return None
    tokens = _get(record, "completion_tokens")
    if tokens is None:
        tokens = _get(record, "estimated_tokens")
    e2e, ttft = _get(record, "e2e_ms"), _get(record, "ttft_ms")
    if tokens is None or tokens < 2 or e2e is None:
        return None
    if definition == "e2e":
        span = e2e
    elif definition == "generation":
        span = None if ttft is None else e2e - ttft
    else:
        raise ValueError(f"unknown output-tokens-per-second definition {definition!r}")
    return tokens / (span / 1000.0) if span and span > 0 else None


def error_budget(n_ok: int, n_eligible: int, target: float) -> dict[str, float | None]:
    """An availability SLO's error budget over a period (Google SRE Workbook, ch. 2
    "Implementing SLOs" and ch. 5 "Alerting on SLOs").

    allowed failures = (1 − target) × eligible requests; budget spent = failures / allowed;
    burn rate = failure rate / (1 − target). A burn rate of 1 spends the budget exactly over
    the SLO window, 2 twice as fast. When the period is the SLO window, budget spent equals the
    burn rate; a week read against a 30-day budget spends burn rate × 7/30 of it.
    Eligible requests are those availability counts (429s left out, see ``availability``).
    """
    if not 0 < target < 1:
        raise ValueError(f"an availability target must be between 0 and 1, got {target}")
    failures = n_eligible - n_ok
    allowed = (1 - target) * n_eligible
    burn = (failures / n_eligible) / (1 - target) if n_eligible else None
    return {
        "target": target,
        "failures": failures,
        "allowed_failures": allowed,
        "burn_rate": burn,
        "budget_spent": failures / allowed if allowed else None,
        "budget_left": (1 - failures / allowed) if allowed else None,
    }


def downgrades(served: Iterable[str], expected: str) -> dict[str, Any]:
    """How often the vendor reported serving another tier than the one bought.

    ``served`` holds the tier each request reported (OpenAI's ``service_tier``, or the header
    or field named on the endpoint), "" when none was reported. Downgrade rate = requests
    reporting a tier ≠ ``expected`` / requests reporting a tier; unreported requests are
    counted apart, since a missing field proves nothing either way. None when nothing is
    expected or nothing was reported.
    """
    counts = Counter(served)
    unreported = counts.pop("", 0)
    reported = sum(counts.values())
    down = reported - counts.get(expected, 0)
    return {
        "expected": expected,
        "by_tier": dict(sorted(counts.items())),
        "n_reported": reported,
        "n_unreported": unreported,
        "n_downgraded": down if expected else 0,
        "downgrade_rate": down / reported if expected and reported else None,
    }


def summarise_tier(
    samples: Sequence[Any], min_n: int = MIN_N, per_quantile: bool = False
) -> dict[str, Any]:
    """One tier's summary from its samples (dicts or objects with ok, error_class, ttft_ms,
    e2e_ms, tpot_ms, completion_tokens, estimated_tokens).

    Timings come from successful samples only; decode speed is 1000/TPOT tok/s per sample
    (docs/measures.md: decode speed = 1/TPOT). ``token_count_flags`` counts samples whose server
    token count and tokenizer estimate differ by more than 10% of the server count.
    ``per_quantile`` withholds each percentile below its own minimum n (:func:`min_n_for`).
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
        "ttft_ms": percentiles(
            (_get(s, "ttft_ms") for s in ok), min_n=min_n, per_quantile=per_quantile
        ),
        "e2e_ms": percentiles(
            (_get(s, "e2e_ms") for s in ok), min_n=min_n, per_quantile=per_quantile
        ),
        "tpot_ms": percentiles(
            (_get(s, "tpot_ms") for s in ok), min_n=min_n, per_quantile=per_quantile
        ),
        "decode_tok_s_p50": decode["p50"],
        "token_count_flags": flags,
    }
