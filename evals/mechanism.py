"""Mechanism hints: numbers that are *consistent with* a serving trick, never a certainty.

Pure functions over what a run observed (``Observed``: a stored sample has every field), used
by the product's speed report:

- prefix cache: TTFT of a repeated long prefix (long_cached) against a unique one (long_cold);
- speculative decoding: tokens per streamed chunk and the shape of the gaps between chunks;
- quantization / numerics: near-identical temperature-0 texts that part late, beside the
  base-vs-base noise floor, with the logprob margin where they part;
- smaller model: the newest audit verdict of the same two endpoints and unit-test pass rates.

Each hint is ``{"mechanism", "indication", "finding", "evidence", "link"}`` with
``indication`` one of "suggested", "no sign", "cannot tell".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any, Protocol

import numpy as np

from evals.logprobs import token_at, top_margin
from evals.similarity import compare_pairs

TIERS = ("fast", "base")


class Observed(Protocol):
    tier: str
    ok: bool
    text: str
    ttft_ms: float | None
    prompt_tokens: int | None
    cached_tokens: int | None
    chunk_tokens: list[int] | None
    chunk_gaps_ms: list[float] | None
    logprobs: list[dict[str, Any]] | None


@dataclass(frozen=True)
class AuditRef:
    """The newest audit verdict of a pair's two endpoints, as the smaller-model hint cites it."""

    run_id: int
    label: str
    sentence: str


def _med(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return median(vals) if vals else None


def _hint(
    mechanism: str,
    indication: str,
    finding: str,
    evidence: list[str],
    link: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``indication``: "suggested" (numbers consistent with it), "no sign", "cannot tell"."""
    return {
        "mechanism": mechanism,
        "indication": indication,
        "finding": finding,
        "evidence": evidence,
        "link": link,
    }


def mechanism_hints(
    *,
    samples: Sequence[Observed],
    by: Mapping[tuple[str, str], Sequence[Observed]],
    pairs: Mapping[str, Sequence[tuple[Observed, Observed]]],
    pass_rates: Mapping[str, tuple[float, int]],
    audit: AuditRef | None,
    min_n: int,
) -> list[dict[str, Any]]:
    """``by``: samples per (scenario, tier); ``pairs``: ``evals.comparable.comparable_pairs``
    of the samples; ``pass_rates``: tier → (unit-test pass rate, n tested)."""
    return [
        prefix_cache_hint(by, min_n),
        speculative_hint(samples, min_n),
        numerics_hint(pairs),
        smaller_model_hint(pass_rates, audit),
    ]


def prefix_cache_hint(
    by: Mapping[tuple[str, str], Sequence[Observed]], min_n: int
) -> dict[str, Any]:
    """TTFT of a repeated long prefix (long_cached) vs the same prompts behind a unique nonce
    (long_cold), per tier: a prefix cache skips prefill only for the first. Plus the cached
    prompt tokens the usage reports."""
    evidence, ratios = [], {}
    for tier in TIERS:
        cached = [s.ttft_ms for s in by.get(("long_cached", tier), []) if s.ok and s.ttft_ms]
        cold = [s.ttft_ms for s in by.get(("long_cold", tier), []) if s.ok and s.ttft_ms]
        if len(cached) < min_n or len(cold) < min_n:
            evidence.append(
                f"{tier}: n too small (long_cached n={len(cached)}, "
                f"long_cold n={len(cold)}; need {min_n})"
            )
            continue
        ratios[tier] = median(cold) / median(cached)
        evidence.append(
            f"{tier}: TTFT P50 long_cold {median(cold):,.0f} ms vs long_cached "
            f"{median(cached):,.0f} ms = {ratios[tier]:.1f}x "
            f"(n={len(cold)}/{len(cached)})"
        )
        reported = [s for s in by.get(("long_cached", tier), []) if s.cached_tokens is not None]
        if reported:
            tokens = median(s.cached_tokens for s in reported if s.cached_tokens is not None)
            prompt = _med(s.prompt_tokens for s in reported)
            of = f" of ~{prompt:,.0f} prompt tokens" if prompt else ""
            evidence.append(
                f"{tier}: usage reports a median {tokens:,.0f} cached tokens{of} in "
                f"long_cached (n={len(reported)})"
            )
        else:
            evidence.append(f"{tier}: no cached-token count in the usage")
    if not ratios:
        return _hint(
            "prefix cache",
            "cannot tell",
            "Not enough long_cached and long_cold samples: run the scenarios suite.",
            evidence,
        )
    cachers = [t for t, r in ratios.items() if r >= 1.5]
    if not cachers:
        finding = "A repeated prefix is not answered markedly faster than a unique one."
        return _hint("prefix cache", "no sign", finding, evidence)
    which = " and ".join(cachers)
    verb = "tiers start" if len(cachers) > 1 else "tier starts"
    finding = (
        f"The {which} {verb} answering a repeated "
        f"long prefix {' / '.join(f'{ratios[t]:.1f}x' for t in cachers)} sooner than a "
        "unique one: consistent with a prefix cache. A headline speed-up measured on "
        "cached prompts will not carry over to cold ones."
    )
    return _hint("prefix cache", "suggested", finding, evidence)


NEAR_ZERO_GAP_MS = 1.0


def chunk_shape(samples: Sequence[Observed]) -> dict[str, Any]:
    """Tokens per streamed chunk and the burstiness of the gaps between chunks.

    ``multi_share``: share of chunks carrying > 1 (estimated) token; ``gap_cv_p50``: median
    over samples of the coefficient of variation (std/mean) of a sample's gaps. Speculative
    decoding emits accepted drafts together: bursts of tokens, then a pause (higher CV).
    ``near_zero_share``: share of gaps under ``NEAR_ZERO_GAP_MS``: llama.cpp's server writes an
    accepted draft as one event per token, back to back, so the burst shows as near-zero gaps
    rather than as multi-token chunks (measured on the local vendor: 67% vs 0%).
    """
    tokens = [t for s in samples if s.ok for t in (s.chunk_tokens or [])]
    cvs = []
    for s in samples:
        gaps = np.array(s.chunk_gaps_ms or [], dtype=float) if s.ok else np.array([])
        if gaps.size >= 3 and gaps.mean() > 0:
            cvs.append(float(gaps.std() / gaps.mean()))
    gaps_all = [g for s in samples if s.ok for g in (s.chunk_gaps_ms or [])]
    near_zero = sum(1 for g in gaps_all if g < NEAR_ZERO_GAP_MS)
    return {
        "n_chunks": len(tokens),
        "near_zero_share": (near_zero / len(gaps_all)) if gaps_all else None,
        "multi_share": (sum(1 for t in tokens if t > 1) / len(tokens)) if tokens else None,
        "tokens_per_chunk": (sum(tokens) / len(tokens)) if tokens else None,
        "gap_cv_p50": median(cvs) if cvs else None,
        "n_gap_samples": len(cvs),
    }


def speculative_hint(samples: Sequence[Observed], min_n: int) -> dict[str, Any]:
    shapes = {t: chunk_shape([s for s in samples if s.tier == t]) for t in TIERS}
    evidence = []
    for tier, sh in shapes.items():
        if sh["multi_share"] is None:
            evidence.append(f"{tier}: no streamed chunks")
            continue
        cv = "—" if sh["gap_cv_p50"] is None else f"{sh['gap_cv_p50']:.2f}"
        evidence.append(
            f"{tier}: {100 * sh['multi_share']:.0f}% of chunks carry > 1 token, "
            f"{sh['tokens_per_chunk']:.2f} tokens per chunk (n={sh['n_chunks']} "
            f"chunks); gap CV P50 {cv} (n={sh['n_gap_samples']} samples); "
            f"{100 * (sh['near_zero_share'] or 0):.0f}% of gaps under "
            f"{NEAR_ZERO_GAP_MS:g} ms"
        )
    fast, base = shapes["fast"], shapes["base"]
    if fast["n_gap_samples"] < min_n or base["n_gap_samples"] < min_n:
        return _hint(
            "speculative decoding",
            "cannot tell",
            "Too few streamed samples with several chunks.",
            evidence,
        )
    more = fast["multi_share"] - base["multi_share"]
    burstier = (fast["gap_cv_p50"] or 0) - (base["gap_cv_p50"] or 0)
    if more >= 0.10 and fast["tokens_per_chunk"] >= 1.2 * base["tokens_per_chunk"]:
        finding = (
            f"The fast tier streams several tokens per chunk {100 * more:.0f} points more "
            "often than the base tier"
            + (f", with burstier gaps (CV +{burstier:.2f})" if burstier > 0.1 else "")
            + ": consistent with speculative decoding (accepted drafts arrive together). "
            "A server that batches tokens into events looks the same; token counts per "
            "chunk are our estimate."
        )
        return _hint("speculative decoding", "suggested", finding, evidence)
    back_to_back = (fast["near_zero_share"] or 0) - (base["near_zero_share"] or 0)
    if back_to_back >= 0.10:
        finding = (
            f"The fast tier writes tokens back to back (gaps under {NEAR_ZERO_GAP_MS:g} ms) "
            f"{100 * back_to_back:.0f} points more often than the base tier: consistent "
            "with speculative decoding that streams each accepted draft token as its own "
            "event. Output-side batching would look the same."
        )
        return _hint("speculative decoding", "suggested", finding, evidence)
    return _hint(
        "speculative decoding",
        "no sign",
        "Both tiers stream chunks of a similar size and gap shape.",
        evidence,
    )


def divergence_margin(sample: Observed, position: int) -> float | None:
    """The top-two logprob margin at the token holding character ``position`` of the text (a
    near tie, < ~0.5 nats, is where numerics flip a greedy choice); None past the text's end."""
    if position >= len(sample.text):
        return None
    return top_margin(token_at(sample.logprobs, position))


def numerics_hint(pairs: Mapping[str, Sequence[tuple[Observed, Observed]]]) -> dict[str, Any]:
    """Near-identical temperature-0 text that diverges late, beside the base-vs-base floor.

    ``pairs`` are comparable answers only (``evals.comparable``): a prompt with a nonce
    (long_cold) differs per request, so its texts may differ for that reason alone.
    """
    stats = {k: compare_pairs([(a.text, b.text) for a, b in v]) for k, v in pairs.items()}
    fb, bb = stats["fast_vs_base"], stats["base_vs_base"]
    if not fb["n"]:
        return _hint("quantization / numerics", "cannot tell", "No paired texts yet.", [])
    relative, margins = [], []
    for (fast, base), pos in zip(pairs["fast_vs_base"], fb["first_divergence"], strict=True):
        if pos is not None:
            relative.append(pos / max(1, min(len(fast.text), len(base.text))))
            margin = divergence_margin(base, pos)
            if margin is not None:
                margins.append(margin)
    evidence = [_sim_line("fast vs base", fb)]
    evidence.append(
        _sim_line("base vs base (noise floor)", bb)
        if bb["n"]
        else "base vs base: no repeated base probes (repeat ≥ 2 gives the noise floor)"
    )
    late = median(relative) if relative else None
    if late is not None:
        evidence.append(
            f"diverging pairs: first difference at {100 * late:.0f}% of the text "
            f"(median, n={len(relative)})"
        )
    evidence.append(
        f"logprob margin at the divergence: P50 {median(margins):.2f} nats (n={len(margins)})"
        if margins
        else "logprob margin at the divergence: no logprobs requested"
    )
    mean = fb["mean_ratio"]
    if late is None:
        return _hint(
            "quantization / numerics",
            "no sign",
            "Fast and base texts are identical at temperature 0.",
            evidence,
        )
    if mean >= 0.9 and late >= 0.25:
        finding = (
            f"Texts are near-identical ({100 * mean:.0f}% similar) and part late: "
            "consistent with different numerics (quantization, kernels, batch "
            "composition) on the same model, rather than a different model."
        )
        return _hint("quantization / numerics", "suggested", finding, evidence)
    return _hint(
        "quantization / numerics",
        "no sign",
        f"Texts differ early or widely ({100 * mean:.0f}% similar): more than "
        "numerics usually explain; see the verdict.",
        evidence,
    )


def _sim_line(label: str, stat: dict[str, Any]) -> str:
    div = stat.get("first_divergence_p50")
    return (
        f"{label}: mean similarity {100 * stat['mean_ratio']:.1f}%, "
        f"{100 * stat['exact_match_rate']:.0f}% identical, first divergence at char "
        f"{'—' if div is None else f'{div:,.0f}'} (median), n={stat['n']} pairs"
    )


def smaller_model_hint(
    pass_rates: Mapping[str, tuple[float, int]], audit: AuditRef | None
) -> dict[str, Any]:
    """Points to the newest audit verdict of the same two endpoints (under any pair: the
    verdict is about the endpoints, not the suite) and the probes' pass rates."""
    evidence = [
        f"{tier}: unit tests passed {100 * rate:.0f}% (n={n})"
        for tier, (rate, n) in pass_rates.items()
    ]
    if audit is None:
        evidence.append("no audit run with a verdict yet (an audit samples at temperature 1)")
        return _hint("smaller model", "cannot tell", "Run an audit for the verdict.", evidence)
    evidence.append(f"audit run #{audit.run_id}: {audit.sentence}")
    link = {"run": audit.run_id, "text": f"verdict of audit run #{audit.run_id}"}
    if audit.label in ("outputs_differ", "capability_difference"):
        return _hint(
            "smaller model",
            "suggested",
            "The audit finds the outputs differ: part of "
            "the speed-up may come from a smaller model.",
            evidence,
            link,
        )
    return _hint(
        "smaller model",
        "no sign" if audit.label else "cannot tell",
        "The audit does not find the outputs differ.",
        evidence,
        link,
    )
