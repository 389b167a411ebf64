"""The blocks of a run's summary that its samples give (the spec: ``monitor.derived.run_summary``):
per tier counts, errors, availability, timing percentiles with n (each withheld below its own
minimum n: ``evals.latency.min_n_for``), tokens, pass rate, model
ids; similarity fast-vs-base beside base-vs-base; speed-ups; the same per scenario.

The pass rate and the similarity read only the samples ``evals.served`` keeps for the tier, as
the rollups' capability figures do: a downgraded sample's answer is another model's, and mixed
into the fast tier's pass rate (or compared with the base tier's answer) it would make the two
tiers look alike or apart for a reason that is not the tier bought. Counts, errors and
availability still count every request.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import median
from typing import Any

from django.conf import settings

from evals.comparable import comparable_pairs
from evals.latency import downgrades, percentiles, summarise_tier
from evals.served import counts_for_tier
from evals.similarity import compare_pairs
from monitor.derived.failures import top_errors
from monitor.models import Endpoint


def _values(samples: Iterable[Any], field: str) -> list[float]:
    return [getattr(s, field) for s in samples if s.ok and getattr(s, field) is not None]


def timing_block(samples: Sequence[Any], min_n: int) -> dict[str, Any]:
    return {
        name: percentiles(_values(samples, name), min_n=min_n, per_quantile=True)
        for name in ("ttft_ms", "e2e_ms", "tpot_ms")
    }


def tier_block(samples: Sequence[Any], min_n: int, gated: Sequence[Any]) -> dict[str, Any]:
    """``evals.latency.summarise_tier`` in the summary contract's names, plus what only the
    product stores: token totals, unit-test pass rate (of the ``gated`` samples: those that
    count for the tier), model ids and fingerprints."""
    tier = summarise_tier(samples, min_n=min_n, per_quantile=True)
    tested = [s.tests_passed for s in gated if s.tests_passed is not None]
    tpot_p50 = tier["tpot_ms"].get("p50")
    return {
        "n": tier["n"],
        "n_ok": tier["n_ok"],
        "errors": tier["errors"],
        "rate_limited": tier["rate_limited"],
        "availability": tier["availability_excl_rate_limited"],  # 429s counted apart
        "ttft_ms": tier["ttft_ms"],
        "e2e_ms": tier["e2e_ms"],
        "tpot_ms": tier["tpot_ms"],
        "decode_tps_p50": (1000.0 / tpot_p50) if tpot_p50 else None,
        "tokens_server": sum(s.completion_tokens or 0 for s in samples if s.ok),
        "tokens_estimated": sum(s.estimated_tokens or 0 for s in samples if s.ok),
        "token_mismatch": tier["token_count_flags"],
        "pass_rate": (sum(tested) / len(tested)) if tested else None,
        "n_tested": len(tested),
        "model_ids": sorted({s.model_id for s in samples if s.model_id}),
        "fingerprints": sorted({s.system_fingerprint for s in samples if s.system_fingerprint}),
        "top_errors": top_errors(samples),
    }


def text_pairs(samples: Sequence[Any]) -> dict[str, list[tuple[str, str]]]:
    """The texts of comparable answers (``evals.comparable``: same case and repetition, no
    per-request nonce; in an agent episode the same turn and step), fast vs base and base vs
    base."""
    pairs = comparable_pairs(
        samples, group=lambda s: (s.case_id, s.turn, s.step), messages=lambda s: s.case.messages
    )
    return {name: [(a.text, b.text) for a, b in p] for name, p in pairs.items()}


def similarity_block(pairs: list[tuple[str, str]]) -> dict[str, Any] | None:
    if not pairs:
        return None
    full = compare_pairs(pairs)
    return {
        "n": full["n"],
        "mean_ratio": full["mean_ratio"],
        "median_ratio": full["median_ratio"],
        "exact_rate": full["exact_match_rate"],
        "prefix_rate": full["prefix_match_rate"],
        "first_div_p50": full["first_divergence_p50"],
    }


def _ratio(numerator: list[float], denominator: list[float]) -> float | None:
    if not numerator or not denominator or median(denominator) == 0:
        return None
    return median(numerator) / median(denominator)


def speedup_block(fast: Sequence[Any], base: Sequence[Any]) -> dict[str, float | None]:
    """How many times faster the fast tier is: base/fast for times, i.e. ratio of medians."""
    return {
        "ttft": _ratio(_values(base, "ttft_ms"), _values(fast, "ttft_ms")),
        "e2e": _ratio(_values(base, "e2e_ms"), _values(fast, "e2e_ms")),
        "decode": _ratio(_values(base, "tpot_ms"), _values(fast, "tpot_ms")),
    }


def served_tier_block(samples: Sequence[Any], expected: dict[int, str]) -> dict[str, Any]:
    """``evals.latency.downgrades`` of the tier's requests against the expected tier set on
    their endpoint (one endpoint per tier in a run; ``expected``: endpoint id → its tier)."""
    ids = {getattr(s, "endpoint_id", 0) for s in samples}
    want = next((expected[i] for i in ids if expected.get(i)), "")
    return downgrades((getattr(s, "served_tier", "") for s in samples if s.ok), want)


def expected_tiers(samples: Sequence[Any]) -> dict[int, str]:
    """Endpoint id → the tier it expects, for the samples' endpoints (one query)."""
    ids = {getattr(s, "endpoint_id", 0) for s in samples}
    return dict(Endpoint.objects.filter(pk__in=ids).values_list("pk", "expected_tier"))


def gate(
    samples: Sequence[Any], expected: dict[int, str], *, include_downgraded: bool = False
) -> list[Any]:
    """The samples that count for their tier (``evals.served.counts_for_tier``); ``expected``:
    endpoint id → the tier it expects."""
    return [
        s
        for s in samples
        if counts_for_tier(
            getattr(s, "served_tier", ""),
            expected.get(getattr(s, "endpoint_id", 0), ""),
            include_downgraded=include_downgraded,
        )
    ]


def summarise_samples(
    samples: Sequence[Any],
    *,
    min_n: int | None = None,
    expected: dict[int, str] | None = None,
    include_downgraded: bool = False,
) -> dict[str, Any]:
    """The summary blocks of a run's samples; ``expected`` (endpoint id → expected tier) and
    ``include_downgraded`` (the pair's choice) gate the pass rate and the similarity."""
    min_n = settings.TIERWATCH_MIN_N if min_n is None else min_n
    kept = gate(samples, expected or {}, include_downgraded=include_downgraded)
    served = expected if expected is not None else expected_tiers(samples)
    by_tier = {t: [s for s in samples if s.tier == t] for t in ("fast", "base")}
    by_scenario: dict[str, dict[str, Any]] = {}
    for scenario in sorted({s.scenario for s in samples}):
        group = {t: [s for s in by_tier[t] if s.scenario == scenario] for t in by_tier}
        by_scenario[scenario] = {
            **{t: timing_block(group[t], min_n) for t in group},
            "speedup": speedup_block(group["fast"], group["base"]),
        }
    pairs = text_pairs(kept)
    tiers = {t: tier_block(by_tier[t], min_n, [s for s in kept if s.tier == t]) for t in by_tier}
    for t in tiers:
        tiers[t]["served_tier"] = served_tier_block(by_tier[t], served)
    return {
        "min_n": min_n,
        "tiers": tiers,
        "similarity": {name: similarity_block(p) for name, p in pairs.items()},
        "speedup": speedup_block(by_tier["fast"], by_tier["base"]),
        "by_scenario": by_scenario,
    }
