"""How much faster the fast tier really is, per scenario, why, and how sure we are.

A vendor's "6x" is usually measured where it looks best (long cached context, short output).
``speed_report`` answers per scenario of the speed matrix (``evals.suites.SCENARIOS``), from
*paired probes*: the fast and base samples of the same case and repetition in the same run
(batch 0), which were sent interleaved and so share the vendor's load at that moment.

- Speed-up = base/fast of TTFT, of decode speed (fast tok/s ÷ base tok/s = base TPOT ÷ fast
  TPOT, docs/measures.md) and of E2E, with a BCa bootstrap interval over pairs
  (``evals.stats.speedup.paired_ratio_ci``), each against the pair's claimed factor.
- Output tokens per second, fast ÷ base, in both definitions vendors use
  (``evals.latency.output_tps``): tokens / (E2E − TTFT) and tokens / E2E. A vendor that sells
  a fast tier on output speed (Anthropic's fast mode) is checked on its own measure.
- Where the time goes: medians of connect, headers − connect, TTFT − headers (queue + prefill)
  and E2E − TTFT (decode) per tier and scenario.
- Mechanism hints: numbers that are *consistent with* a serving trick, never a certainty.
- Goodput against the pair's SLOs (``evals.latency.goodput``), skipped cases, the newest load
  probe (``run_load_probe``: concurrency 1, 4, 16).

Nothing here is stored: the page calls ``speed_report`` over a bounded number of runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from statistics import median
from typing import Any

import numpy as np
from django.conf import settings
from django.utils import timezone

from evals.latency import goodput, output_tps, percentiles
from evals.plan import PlannedRequest, execute_plan
from evals.records import ChatRequest, TimingRecord
from evals.similarity import compare_pairs
from evals.stats.speedup import RatioCI, claim_check, paired_ratio_ci
from evals.suites import SCENARIOS, context_needed, fill_nonce, prompt_estimate
from monitor.models import Case, Endpoint, Pair, Run, Sample

log = logging.getLogger(__name__)

# (report key, sample field, label): every speed-up is base/fast of a duration.
METRICS = (("ttft", "ttft_ms", "TTFT"), ("decode", "tpot_ms", "decode speed"),
           ("e2e", "e2e_ms", "E2E"))
# (report key, label): output-tokens-per-second definitions, see evals.latency.output_tps
OTPS = (("generation", "output tok/s, tokens / (E2E − TTFT)"),
        ("e2e", "output tok/s, tokens / E2E"))
TIMINGS = ("ttft_ms", "e2e_ms", "tpot_ms")
TIERS = ("fast", "base")
BREAKDOWN = (("connect", "connect"), ("headers", "headers − connect"),
             ("prefill", "TTFT − headers (queue + prefill)"), ("decode", "E2E − TTFT (decode)"))
DEFAULT_RUNS = 10
LOAD_LEVELS = (1, 4, 16)
MAX_LOAD_CONCURRENCY = 64
MAX_LOAD_REQUESTS = 64  # per level per tier: a load probe stays short
SAMPLE_FIELDS = (
    "id", "run_id", "case_id", "case__key", "case__scenario", "tier", "batch", "repetition", "ok",
    "connect_ms", "headers_ms", "ttft_ms", "e2e_ms", "tpot_ms", "chunk_gaps_ms", "chunk_tokens",
    "text", "prompt_tokens", "cached_tokens", "logprobs", "completion_tokens", "estimated_tokens",
)


# --- context windows -------------------------------------------------------------------------

def split_by_context(
    cases: Iterable[Case], endpoints: Sequence[Endpoint]
) -> tuple[list[Case], list[dict[str, str]]]:
    """Cases that fit every endpoint's context window (``evals.suites.context_needed``), and
    the others with a reason. An endpoint without a window runs all."""
    kept, skipped = [], []
    for case in cases:
        need = context_needed(case.messages, case.max_tokens, case.scenario)
        prompt = prompt_estimate(case.messages)
        small = [ep for ep in endpoints if ep.context_window and need > ep.context_window]
        if not small:
            kept.append(case)
            continue
        windows = ", ".join(f"{ep.name}: {ep.context_window:,}" for ep in small)
        skipped.append({
            "case": case.key, "scenario": case.scenario,
            "reason": f"needs ~{need:,} tokens (prompt ~{prompt:,} estimated + max_tokens "
                      f"{case.max_tokens}) but the context window is smaller ({windows})",
        })
    return kept, skipped


# --- the report ------------------------------------------------------------------------------

def default_runs(pair: Pair, limit: int = DEFAULT_RUNS) -> list[Run]:
    """The pair's newest finished probe runs, load probes excepted (their concurrency differs)."""
    return list(Run.objects.filter(pair=pair, status="done", kind="probe")
                .exclude(trigger="load").order_by("-created_at", "-id")[:limit])


def scenario_order(names: Iterable[str]) -> list[str]:
    """The speed matrix's order (``SCENARIOS``), then any other scenario by name."""
    names = set(names)
    return [s for s in SCENARIOS if s in names] + sorted(names - set(SCENARIOS))


def fmt_ci(ci: RatioCI | dict[str, Any]) -> str:
    """"5.8x [5.1, 6.4]", the same wording as ``claim_check``; the estimate alone below min n."""
    d = ci if isinstance(ci, dict) else ci.__dict__
    if d.get("estimate") is None:
        return "no pairs"
    if d.get("low") is None:
        return f"{d['estimate']:.1f}x (n too small: n={d['n']})"
    return f"{d['estimate']:.1f}x [{d['low']:.1f}, {d['high']:.1f}]"


def claim_status(ci: RatioCI, claimed: float | None) -> str | None:
    """"holds" | "does not hold" | "cannot tell", read from ``claim_check`` (one rule)."""
    if not claimed:
        return None
    text = claim_check(ci, claimed)
    for status in ("does not hold", "cannot tell", "holds"):
        if text.startswith(f"claimed {claimed:g}x: {status}"):
            return status
    return "cannot tell"


def claim_line(cis: dict[str, RatioCI], claimed: float | None) -> str | None:
    """One line over all scenarios, e.g. "claimed 6x: holds for long_cached (5.8x [5.1, 6.4]);
    1.9x [1.7, 2.1] for short_long_out"."""
    if not claimed or not cis:
        return None
    holds, fails, unknown = [], [], []
    for scenario, ci in cis.items():
        status = claim_status(ci, claimed)
        if status == "holds":
            holds.append(f"{scenario} ({fmt_ci(ci)})")
        elif status == "does not hold":
            fails.append(f"{fmt_ci(ci)} for {scenario}")
        else:
            unknown.append(scenario)
    parts = [f"holds for {', '.join(holds)}" if holds else "holds for no scenario", *fails]
    if unknown:
        parts.append(f"n too small for {', '.join(unknown)}")
    return f"claimed {claimed:g}x: " + "; ".join(parts)


def paired_samples(samples: Iterable[Sample]) -> dict[str, list[dict[str, Sample]]]:
    """Per scenario, {"fast": s, "base": s} of the same run, case and repetition (batch 0)."""
    slots: dict[tuple[int, int, int], dict[str, Sample]] = defaultdict(dict)
    scenario_of: dict[tuple[int, int, int], str] = {}
    for s in samples:
        if s.batch == 0:
            key = (s.run_id, s.case_id, s.repetition)
            slots[key][s.tier] = s
            scenario_of[key] = s.case.scenario
    out: dict[str, list[dict[str, Sample]]] = defaultdict(list)
    for key, pair in slots.items():
        if "fast" in pair and "base" in pair:
            out[scenario_of[key]].append(pair)
    return out


def _ci_dict(ci: RatioCI, claimed: float | None) -> dict[str, Any]:
    return {"estimate": ci.estimate, "low": ci.low, "high": ci.high, "n": ci.n,
            "method": ci.method, "note": ci.note, "text": fmt_ci(ci),
            "claim": claim_check(ci, claimed) if claimed else None,
            "status": claim_status(ci, claimed)}


def speedups(pairs: dict[str, list[dict[str, Sample]]], claimed: float | None,
             min_n: int) -> tuple[dict[str, Any], dict[str, str | None]]:
    """Per scenario and metric the CI, and per metric the claim line over the scenarios."""
    table: dict[str, Any] = {}
    by_metric: dict[str, dict[str, RatioCI]] = {m: {} for m, _, _ in METRICS}
    for scenario in scenario_order(pairs):
        table[scenario] = {}
        for key, field, _label in METRICS:
            def value(s: Sample, field: str = field) -> float | None:
                return getattr(s, field) if s.ok else None
            ci = paired_ratio_ci([value(p["base"]) for p in pairs[scenario]],
                                 [value(p["fast"]) for p in pairs[scenario]],
                                 kind="duration", min_n=min_n)
            table[scenario][key] = _ci_dict(ci, claimed)
            by_metric[key][scenario] = ci
    return table, {m: claim_line(by_metric[m], claimed) for m in by_metric}


def otps_speedups(pairs: dict[str, list[dict[str, Sample]]], claimed: float | None,
                  min_n: int) -> dict[str, Any]:
    """Per scenario and OTPS definition: fast tok/s ÷ base tok/s with its paired CI."""
    table: dict[str, Any] = {}
    for scenario in scenario_order(pairs):
        table[scenario] = {}
        for key, _label in OTPS:
            ci = paired_ratio_ci([output_tps(p["base"], definition=key) for p in pairs[scenario]],
                                 [output_tps(p["fast"], definition=key) for p in pairs[scenario]],
                                 kind="rate", min_n=min_n)
            table[scenario][key] = _ci_dict(ci, claimed)
    return table


def _med(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return median(vals) if vals else None


def breakdown(samples: Sequence[Sample]) -> dict[str, Any]:
    """Medians (ms) of connect, headers − connect, TTFT − headers, E2E − TTFT over successful
    samples with every mark. A reused keep-alive connection has connect ≈ pool wait only."""
    full = [s for s in samples if s.ok and None not in
            (s.connect_ms, s.headers_ms, s.ttft_ms, s.e2e_ms)]
    parts = {
        "connect": _med(s.connect_ms for s in full),
        "headers": _med(s.headers_ms - s.connect_ms for s in full),
        "prefill": _med(s.ttft_ms - s.headers_ms for s in full),
        "decode": _med(s.e2e_ms - s.ttft_ms for s in full),
    }
    return {"n": len(full), **parts}


def _slo(pair: Pair) -> dict[str, float]:
    return {k: v for k, v in (("ttft_ms", pair.slo_ttft_ms), ("e2e_ms", pair.slo_e2e_ms)) if v}


def goodput_block(samples: Sequence[Any], slo: dict[str, float]) -> dict[str, Any]:
    return {"value": goodput(samples, slo) if slo else None, "n": len(samples)}


def speed_report(*, pair: Pair, runs: Sequence[Run] | None = None) -> dict[str, Any]:
    """Everything the speed page shows, from the samples of ``runs`` (default: the pair's
    newest finished probe runs). Shape: see the module docstring and the keys below."""
    runs = default_runs(pair) if runs is None else list(runs)
    min_n = int(settings.TIERWATCH_MIN_N)
    samples = list(Sample.objects.filter(run__in=[r.id for r in runs])
                   .select_related("case").only(*SAMPLE_FIELDS).order_by("run_id", "seq"))
    by = defaultdict(list)
    for s in samples:
        by[(s.case.scenario, s.tier)].append(s)
    scenarios = scenario_order(s.case.scenario for s in samples)
    pairs = paired_samples(samples)
    table, claims = speedups(pairs, pair.claimed_speedup, min_n)
    slo = _slo(pair)
    return {
        "pair": pair.name,
        "claimed": pair.claimed_speedup,
        "simulated": pair.fast.simulated or pair.base.simulated,
        "min_n": min_n,
        "run_ids": [r.id for r in runs],
        "n_samples": len(samples),
        "scenarios": scenarios,
        "descriptions": {s: SCENARIOS[s].description for s in scenarios if s in SCENARIOS},
        "n_pairs": {s: len(pairs.get(s, [])) for s in scenarios},
        "speedup": table,
        "otps": otps_speedups(pairs, pair.claimed_speedup, min_n),
        "claim": claims,
        "percentiles": {
            scn: {t: {m: percentiles([getattr(s, m) for s in by[(scn, t)] if s.ok], min_n=min_n)
                      for m in TIMINGS} for t in TIERS}
            for scn in scenarios
        },
        "breakdown": {scn: {t: breakdown(by[(scn, t)]) for t in TIERS} for scn in scenarios},
        "goodput": {
            "slo": slo,
            "tiers": {t: goodput_block([s for s in samples if s.tier == t], slo) for t in TIERS},
            "scenarios": {scn: {t: goodput_block(by[(scn, t)], slo) for t in TIERS}
                          for scn in scenarios},
        },
        "hints": mechanism_hints(pair, runs, samples, by, min_n),
        "skipped": skipped_cases(runs),
        "load": latest_load(pair),
    }


def skipped_cases(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Cases the runs skipped (``Run.summary["skipped"]``), newest run first, one per case."""
    seen: dict[str, dict[str, Any]] = {}
    for run in runs:
        for item in (run.summary or {}).get("skipped") or []:
            seen.setdefault(item["case"], {**item, "run": run.id})
    return list(seen.values())


def latest_load(pair: Pair) -> dict[str, Any] | None:
    run = (Run.objects.filter(pair=pair, trigger="load", status="done")
           .order_by("-created_at", "-id").first())
    if run is None or not (run.summary or {}).get("load"):
        return None
    when = run.finished_at or run.created_at
    return {"run": run.id, "at": when.isoformat(), "levels": run.summary["load"]}


# --- mechanism hints -------------------------------------------------------------------------

def _hint(mechanism: str, indication: str, finding: str, evidence: list[str],
          link: dict[str, Any] | None = None) -> dict[str, Any]:
    """``indication``: "suggested" (numbers consistent with it), "no sign", "cannot tell"."""
    return {"mechanism": mechanism, "indication": indication, "finding": finding,
            "evidence": evidence, "link": link}


def mechanism_hints(pair: Pair, runs: Sequence[Run], samples: Sequence[Sample],
                    by: dict[tuple[str, str], list[Sample]], min_n: int) -> list[dict[str, Any]]:
    return [prefix_cache_hint(by, min_n), speculative_hint(samples, min_n),
            numerics_hint(samples), smaller_model_hint(pair, runs)]


def prefix_cache_hint(by: dict[tuple[str, str], list[Sample]], min_n: int) -> dict[str, Any]:
    """TTFT of a repeated long prefix (long_cached) vs the same prompts behind a unique nonce
    (long_cold), per tier: a prefix cache skips prefill only for the first. Plus the cached
    prompt tokens the usage reports."""
    evidence, ratios = [], {}
    for tier in TIERS:
        cached = [s.ttft_ms for s in by.get(("long_cached", tier), []) if s.ok and s.ttft_ms]
        cold = [s.ttft_ms for s in by.get(("long_cold", tier), []) if s.ok and s.ttft_ms]
        if len(cached) < min_n or len(cold) < min_n:
            evidence.append(f"{tier}: n too small (long_cached n={len(cached)}, "
                            f"long_cold n={len(cold)}; need {min_n})")
            continue
        ratios[tier] = median(cold) / median(cached)
        evidence.append(f"{tier}: TTFT P50 long_cold {median(cold):,.0f} ms vs long_cached "
                        f"{median(cached):,.0f} ms = {ratios[tier]:.1f}x "
                        f"(n={len(cold)}/{len(cached)})")
        reported = [s for s in by.get(("long_cached", tier), []) if s.cached_tokens is not None]
        if reported:
            tokens = median(s.cached_tokens for s in reported)
            prompt = _med(s.prompt_tokens for s in reported)
            of = f" of ~{prompt:,.0f} prompt tokens" if prompt else ""
            evidence.append(f"{tier}: usage reports a median {tokens:,.0f} cached tokens{of} in "
                            f"long_cached (n={len(reported)})")
        else:
            evidence.append(f"{tier}: no cached-token count in the usage")
    if not ratios:
        return _hint("prefix cache", "cannot tell", "Not enough long_cached and long_cold "
                     "samples: run the scenarios suite.", evidence)
    cachers = [t for t, r in ratios.items() if r >= 1.5]
    if not cachers:
        finding = "A repeated prefix is not answered markedly faster than a unique one."
        return _hint("prefix cache", "no sign", finding, evidence)
    which = " and ".join(cachers)
    verb = "tiers start" if len(cachers) > 1 else "tier starts"
    finding = (f"The {which} {verb} answering a repeated "
               f"long prefix {' / '.join(f'{ratios[t]:.1f}x' for t in cachers)} sooner than a "
               "unique one: consistent with a prefix cache. A headline speed-up measured on "
               "cached prompts will not carry over to cold ones.")
    return _hint("prefix cache", "suggested", finding, evidence)


NEAR_ZERO_GAP_MS = 1.0


def chunk_shape(samples: Sequence[Sample]) -> dict[str, Any]:
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


def speculative_hint(samples: Sequence[Sample], min_n: int) -> dict[str, Any]:
    shapes = {t: chunk_shape([s for s in samples if s.tier == t]) for t in TIERS}
    evidence = []
    for tier, sh in shapes.items():
        if sh["multi_share"] is None:
            evidence.append(f"{tier}: no streamed chunks")
            continue
        cv = "—" if sh["gap_cv_p50"] is None else f"{sh['gap_cv_p50']:.2f}"
        evidence.append(f"{tier}: {100 * sh['multi_share']:.0f}% of chunks carry > 1 token, "
                        f"{sh['tokens_per_chunk']:.2f} tokens per chunk (n={sh['n_chunks']} "
                        f"chunks); gap CV P50 {cv} (n={sh['n_gap_samples']} samples); "
                        f"{100 * (sh['near_zero_share'] or 0):.0f}% of gaps under "
                        f"{NEAR_ZERO_GAP_MS:g} ms")
    fast, base = shapes["fast"], shapes["base"]
    if fast["n_gap_samples"] < min_n or base["n_gap_samples"] < min_n:
        return _hint("speculative decoding", "cannot tell",
                     "Too few streamed samples with several chunks.", evidence)
    more = fast["multi_share"] - base["multi_share"]
    burstier = (fast["gap_cv_p50"] or 0) - (base["gap_cv_p50"] or 0)
    if more >= 0.10 and fast["tokens_per_chunk"] >= 1.2 * base["tokens_per_chunk"]:
        finding = (f"The fast tier streams several tokens per chunk {100 * more:.0f} points more "
                   "often than the base tier"
                   + (f", with burstier gaps (CV +{burstier:.2f})" if burstier > 0.1 else "")
                   + ": consistent with speculative decoding (accepted drafts arrive together). "
                   "A server that batches tokens into events looks the same; token counts per "
                   "chunk are our estimate.")
        return _hint("speculative decoding", "suggested", finding, evidence)
    back_to_back = (fast["near_zero_share"] or 0) - (base["near_zero_share"] or 0)
    if back_to_back >= 0.10:
        finding = (f"The fast tier writes tokens back to back (gaps under {NEAR_ZERO_GAP_MS:g} ms) "
                   f"{100 * back_to_back:.0f} points more often than the base tier: consistent "
                   "with speculative decoding that streams each accepted draft token as its own "
                   "event. Output-side batching would look the same.")
        return _hint("speculative decoding", "suggested", finding, evidence)
    return _hint("speculative decoding", "no sign", "Both tiers stream chunks of a similar size "
                 "and gap shape.", evidence)


def _texts(samples: Sequence[Sample]) -> dict[str, list[tuple[Any, Any]]]:
    """Sample pairs (not texts) fast-vs-base and base-vs-base, as ``summary.text_pairs``."""
    slots: dict[tuple[int, str, int, int], dict[int, Sample]] = defaultdict(dict)
    for s in samples:
        if s.ok:
            slots[(s.run_id, s.tier, s.batch, s.case_id)][s.repetition] = s
    fb, bb = [], []
    for (run_id, tier, batch, case_id), reps in slots.items():
        if tier != "base" or batch != 0:
            continue
        fast = slots.get((run_id, "fast", 0, case_id), {})
        fb += [(fast[r], s) for r, s in reps.items() if r in fast]
        other = slots.get((run_id, "base", 1, case_id))
        if other:
            bb += [(s, other[r]) for r, s in reps.items() if r in other]
        elif 0 in reps and 1 in reps:
            bb.append((reps[0], reps[1]))
    return {"fast_vs_base": fb, "base_vs_base": bb}


def divergence_margin(sample: Sample, position: int) -> float | None:
    """Logprob gap between the top two candidates at the token holding character ``position``
    of ``sample.text`` (a near tie, < ~0.5 nats, is where numerics flip a greedy choice)."""
    at = 0
    for entry in sample.logprobs or []:
        at += len(entry.get("token") or "")
        if at > position:
            top = sorted((t["logprob"] for t in entry.get("top_logprobs") or []
                          if t.get("logprob") is not None), reverse=True)
            return top[0] - top[1] if len(top) >= 2 else None
    return None


def numerics_hint(samples: Sequence[Sample]) -> dict[str, Any]:
    """Near-identical temperature-0 text that diverges late, beside the base-vs-base floor.

    Scenarios with a unique prefix per request (long_cold's nonce) are left out: their two
    samples had different prompts, so their texts may differ for that reason alone.
    """
    unique = {name for name, scn in SCENARIOS.items() if scn.prefix == "unique"}
    pairs = _texts([s for s in samples if s.case.scenario not in unique])
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
    evidence.append(_sim_line("base vs base (noise floor)", bb) if bb["n"] else
                    "base vs base: no repeated base probes (repeat ≥ 2 gives the noise floor)")
    late = median(relative) if relative else None
    if late is not None:
        evidence.append(f"diverging pairs: first difference at {100 * late:.0f}% of the text "
                        f"(median, n={len(relative)})")
    evidence.append(f"logprob margin at the divergence: P50 {median(margins):.2f} nats "
                    f"(n={len(margins)})" if margins else
                    "logprob margin at the divergence: no logprobs requested")
    mean = fb["mean_ratio"]
    if late is None:
        return _hint("quantization / numerics", "no sign",
                     "Fast and base texts are identical at temperature 0.", evidence)
    if mean >= 0.9 and late >= 0.25:
        finding = (f"Texts are near-identical ({100 * mean:.0f}% similar) and part late: "
                   "consistent with different numerics (quantization, kernels, batch "
                   "composition) on the same model, rather than a different model.")
        return _hint("quantization / numerics", "suggested", finding, evidence)
    return _hint("quantization / numerics", "no sign",
                 f"Texts differ early or widely ({100 * mean:.0f}% similar): more than "
                 "numerics usually explain; see the verdict.", evidence)


def _sim_line(label: str, stat: dict[str, Any]) -> str:
    div = stat.get("first_divergence_p50")
    return (f"{label}: mean similarity {100 * stat['mean_ratio']:.1f}%, "
            f"{100 * stat['exact_match_rate']:.0f}% identical, first divergence at char "
            f"{'—' if div is None else f'{div:,.0f}'} (median), n={stat['n']} pairs")


def smaller_model_hint(pair: Pair, runs: Sequence[Run]) -> dict[str, Any]:
    """Points to the newest audit verdict (``Run.summary["verdict"]``) of the same two endpoints
    (under any pair: the verdict is about the endpoints, not the suite) and the probes' pass
    rates."""
    evidence = []
    rates = {}
    for tier in TIERS:
        blocks = [((r.summary or {}).get("tiers") or {}).get(tier) or {} for r in runs]
        tested = sum(b.get("n_tested") or 0 for b in blocks)
        if tested:
            passed = sum((b.get("pass_rate") or 0) * (b.get("n_tested") or 0) for b in blocks)
            rates[tier] = passed / tested
            evidence.append(f"{tier}: unit tests passed {100 * rates[tier]:.0f}% (n={tested})")
    audits = Run.objects.filter(kind="audit", status="done", pair__fast=pair.fast_id,
                                pair__base=pair.base_id)  # any pair of the same two endpoints
    audit = next((r for r in audits.order_by("-created_at", "-id")[:20]
                  if (r.summary or {}).get("verdict")), None)
    if audit is None:
        evidence.append("no audit run with a verdict yet (an audit samples at temperature 1)")
        return _hint("smaller model", "cannot tell", "Run an audit for the verdict.", evidence)
    verdict = audit.summary["verdict"]
    label = verdict.get("label", "") if isinstance(verdict, dict) else ""
    sentence = verdict.get("sentence", label) if isinstance(verdict, dict) else str(verdict)
    evidence.append(f"audit run #{audit.id}: {sentence}")
    link = {"run": audit.id, "text": f"verdict of audit run #{audit.id}"}
    if label == "different_model":
        return _hint("smaller model", "suggested", "The audit finds a different model: part of "
                     "the speed-up may come from a smaller one.", evidence, link)
    return _hint("smaller model", "no sign" if label else "cannot tell",
                 "The audit does not find a different model.", evidence, link)


# --- load ------------------------------------------------------------------------------------

def load_cases(cases: Sequence[Case]) -> list[Case]:
    """Short, test-free cases first: a load probe measures the server, not the sandbox."""
    for scenario in ("mid", "short", None):
        chosen = [c for c in cases if scenario is None or c.scenario == scenario]
        if chosen:
            return [c for c in chosen if not c.unit_tests] or chosen
    return []


def load_block(records: Sequence[TimingRecord], wall_s: float, slo: dict[str, float],
               min_n: int) -> dict[str, Any]:
    return {
        "n": len(records), "n_ok": sum(1 for r in records if r.ok),
        "ttft_ms": percentiles([r.ttft_ms for r in records if r.ok], min_n=min_n),
        "e2e_ms": percentiles([r.e2e_ms for r in records if r.ok], min_n=min_n),
        "goodput": goodput(records, slo) if slo else None,
        "wall_s": wall_s,
        "throughput_rps": len(records) / wall_s if wall_s > 0 else None,
    }


def run_load_probe(
    *, pair: Pair, concurrency_levels: Sequence[int] = LOAD_LEVELS,
    requests_per_level: int | None = None, suite=None, seed: int | None = None,
) -> Run:
    """Probe each tier alone at each concurrency level (bounded, short) and store a Run with
    kind "probe", trigger "load" and ``summary["load"][str(level)][tier]``.

    Per level and tier, ``requests_per_level`` requests (default max(8, 2 × level), at most
    ``MAX_LOAD_REQUESTS``) cycle through short cases, at most ``level`` in flight. Tiers go one
    after the other so each curve shows a tier under its own load. Samples are saved after
    each level, outside the timed loop.
    """
    from monitor.services.runs import create_run, endpoint_spec, save_sample, summarise_run

    run = create_run(pair=pair, kind="probe", trigger="load", repeat=1, seed=seed)
    if suite is not None:
        run.suite = suite
    run.status, run.started_at = "running", timezone.now()
    run.save(update_fields=["suite", "status", "started_at"])
    levels = sorted({min(MAX_LOAD_CONCURRENCY, int(c)) for c in concurrency_levels if c >= 1})
    min_n, slo = int(settings.TIERWATCH_MIN_N), _slo(pair)
    try:
        cases = load_cases(list(run.suite.cases.order_by("key")))
        if not cases:
            raise ValueError(f"suite {run.suite} has no cases")
        counts = {lv: min(MAX_LOAD_REQUESTS, requests_per_level or max(8, 2 * lv)) for lv in levels}
        Run.objects.filter(id=run.id).update(planned=2 * sum(counts.values()))
        endpoints = {"fast": pair.fast, "base": pair.base}
        seq, load = 0, {}
        for level in levels:
            load[str(level)] = {}
            for tier in TIERS:
                items = [PlannedRequest(seq=seq + i, case_key=cases[i % len(cases)].key,
                                        tier=tier, repetition=i // len(cases))
                         for i in range(counts[level])]
                seq += len(items)
                records, wall_s = asyncio.run(_send(run, items, cases, endpoint_spec(
                    endpoints[tier]), level))
                for item, record in records:
                    save_sample(run=run, case=next(c for c in cases if c.key == item.case_key),
                                endpoint=endpoints[tier], item=item, record=record)
                load[str(level)][tier] = load_block([r for _, r in records], wall_s, slo, min_n)
        summary = summarise_run(run_id=run.id)
        Run.objects.filter(id=run.id).update(summary={**summary, "load": load}, status="done",
                                             finished_at=timezone.now())
    except Exception as exc:  # the run says why; samples already saved stay
        log.exception("load probe %s failed", run.id)
        Run.objects.filter(id=run.id).update(status="failed", finished_at=timezone.now(),
                                             error=f"{type(exc).__name__}: {exc}")
    return Run.objects.get(id=run.id)


async def _send(run: Run, items: list[PlannedRequest], cases: Sequence[Case], spec,
                level: int) -> tuple[list[tuple[PlannedRequest, TimingRecord]], float]:
    by_key = {c.key: c for c in cases}
    out: list[tuple[PlannedRequest, TimingRecord]] = []

    def build(item: PlannedRequest) -> ChatRequest:
        case = by_key[item.case_key]
        return ChatRequest(messages=fill_nonce(case.messages, f"{run.id}-{item.seq}"),
                           max_tokens=case.max_tokens, temperature=0.0, seed=0)

    async def keep(item: PlannedRequest, record: TimingRecord) -> None:
        out.append((item, record))

    loop = asyncio.get_running_loop()
    start = loop.time()
    await execute_plan(items, endpoints={items[0].tier: spec}, build_request=build,
                       concurrency={items[0].tier: level}, on_record=keep)
    return out, loop.time() - start
