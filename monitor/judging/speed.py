"""How much faster the fast tier really is, per scenario, why, and how sure we are.

A vendor's "6x" is usually measured where it looks best (long cached context, short output).
``speed_report`` answers per scenario of the speed matrix (``evals.suites.SCENARIOS``), from
*paired probes*: the fast and base samples of the same case and repetition in the same run
(batch 0), which were sent interleaved and so share the vendor's load at that moment.

- Speed-up = base/fast of TTFT, of decode speed (fast tok/s ÷ base tok/s = base TPOT ÷ fast
  TPOT, since decode speed = 1/TPOT) and of E2E, with a cluster-bootstrap interval that
  resamples whole runs (``evals.stats.speedup_runs.cluster_ratio_ci``: probes of one run share
  its load), no interval below 20 pairs, and failed probes counted as the slowest rather than
  dropped; each against the pair's claimed factor (``assess_claim``: confirmed when the lower
  bound reaches the claim, contradicted when the upper bound is below it, else not
  contradicted). The status is the plain string value, so the report serialises as is.
- Output tokens per second, fast ÷ base, in both definitions vendors use
  (``evals.latency.output_tps``): tokens / (E2E − TTFT) and tokens / E2E. A vendor that sells
  a fast tier on output speed (Anthropic's fast mode) is checked on its own measure.
- Where the time goes: medians of connect, headers − connect, TTFT − headers (queue + prefill)
  and E2E − TTFT (decode) per tier and scenario.
- Mechanism hints (``evals.mechanism``): numbers that are *consistent with* a serving trick,
  never a certainty.
- Goodput against the pair's SLOs (``evals.latency.goodput``), skipped cases, the newest load
  probe (``monitor.runs.load``).

Nothing here is stored: the page calls ``speed_report`` over a bounded number of runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import timedelta
from statistics import median
from typing import Any

from django.conf import settings
from django.utils import timezone

from evals.comparable import comparable_pairs
from evals.latency import goodput, output_tps, percentiles
from evals.mechanism import AuditRef, mechanism_hints
from evals.records import TIERS
from evals.stats.speedup import RatioCI
from evals.stats.speedup_runs import MIN_PAIRS, assess_claim
from evals.suites import SCENARIOS
from monitor.judging import claims as claim_checks
from monitor.judging.pairing import fmt_ci, paired_samples, ratio_ci, scenario_order
from monitor.models import Case, Pair, Run, RunKind, RunStatus, Sample
from monitor.runs.load import latest_load

# (report key, sample field, label): every speed-up is base/fast of a duration.
METRICS = (
    ("ttft", "ttft_ms", "TTFT"),
    ("decode", "tpot_ms", "decode speed"),
    ("e2e", "e2e_ms", "E2E"),
)
# (report key, label): output-tokens-per-second definitions, see evals.latency.output_tps
OTPS = (
    ("generation", "output tok/s, tokens / (E2E − TTFT)"),
    ("e2e", "output tok/s, tokens / E2E"),
)
TIMINGS = ("ttft_ms", "e2e_ms", "tpot_ms")
BREAKDOWN = (
    ("connect", "connect"),
    ("headers", "headers − connect"),
    ("prefill", "TTFT − headers (queue + prefill)"),
    ("decode", "E2E − TTFT (decode)"),
)
DEFAULT_RUNS = 10
HOURLY_WINDOW = timedelta(days=30)  # the downgrade rate per hour of day looks this far back
AUDITS_LOOKED_AT = 20  # newest audits searched for a verdict (smaller-model hint)
SAMPLE_FIELDS = (
    "id",
    "run_id",
    "case_id",
    "case__key",
    "case__scenario",
    "tier",
    "batch",
    "repetition",
    "turn",
    "step",
    "ok",
    "connect_ms",
    "headers_ms",
    "ttft_ms",
    "ttft_answer_ms",
    "e2e_ms",
    "tpot_ms",
    "chunk_gaps_ms",
    "chunk_tokens",
    "text",
    "prompt_tokens",
    "cached_tokens",
    "logprobs",
    "completion_tokens",
    "estimated_tokens",
    "endpoint_id",
    "served_tier",
)


# --- the report ------------------------------------------------------------------------------


def default_runs(pair: Pair, limit: int = DEFAULT_RUNS) -> list[Run]:
    """The pair's newest comparable runs (``Run.objects.trend``)."""
    return list(Run.objects.trend().filter(pair=pair).order_by("-created_at", "-id")[:limit])


def claim_line(cis: dict[str, RatioCI], claimed: float | None) -> str | None:
    """One line over all scenarios, e.g. "claimed 6x: confirmed for long_cached (6.8x [6.1,
    7.4]); contradicted for short_long_out (1.9x [1.7, 2.1]); cannot tell for mid"."""
    if not claimed or not cis:
        return None
    by: dict[str, list[str]] = defaultdict(list)
    for scenario, ci in cis.items():
        status = assess_claim(ci, claimed).status
        by[status].append(scenario if status == "cannot tell" else f"{scenario} ({fmt_ci(ci)})")
    order = ("confirmed", "contradicted", "not contradicted", "cannot tell")
    return f"claimed {claimed:g}x: " + "; ".join(
        f"{status} for {', '.join(by[status])}" for status in order if by[status]
    )


def _ci_dict(ci: RatioCI, claimed: float | None) -> dict[str, Any]:
    claim = assess_claim(ci, claimed) if claimed else None
    return {
        "estimate": ci.estimate,
        "low": ci.low,
        "high": ci.high,
        "n": ci.n,
        "method": ci.method,
        "note": ci.note,
        "text": fmt_ci(ci),
        "claim": claim.line if claim else None,
        "status": claim.status if claim else None,
    }


def sample_duration(s: Sample, field: str) -> float | None:
    """A failed probe is None (counted as the slowest); a success without the value (one
    output token has no TPOT) is NaN and leaves the pair out."""
    if not s.ok:
        return None
    value = getattr(s, field)
    return float("nan") if value is None else value


def speedups(
    pairs: dict[str, list[dict[str, Sample]]], claimed: float | None, min_n: int = MIN_PAIRS
) -> tuple[dict[str, Any], dict[str, str | None]]:
    """Per scenario and metric the CI, and per metric the claim line over the scenarios."""
    table: dict[str, Any] = {}
    by_metric: dict[str, dict[str, RatioCI]] = {m: {} for m, _, _ in METRICS}
    for scenario in scenario_order(pairs):
        table[scenario] = {}
        runs = [p["base"].run_id for p in pairs[scenario]]
        for key, field, _label in METRICS:
            ci = ratio_ci(
                [sample_duration(p["base"], field) for p in pairs[scenario]],
                [sample_duration(p["fast"], field) for p in pairs[scenario]],
                runs,
                "duration",
            )
            table[scenario][key] = _ci_dict(ci, claimed)
            by_metric[key][scenario] = ci
    return table, {m: claim_line(by_metric[m], claimed) for m in by_metric}


def otps_speedups(
    pairs: dict[str, list[dict[str, Sample]]],
    claimed: float | None,
    min_n: int = MIN_PAIRS,
    keys: tuple[str, ...] = ("generation", "e2e"),
) -> dict[str, Any]:
    """Per scenario and OTPS definition: fast tok/s ÷ base tok/s with its cluster CI (a failed
    probe's rate counts as 0); the claim's status only in the definitions in ``keys``."""
    table: dict[str, Any] = {}
    for scenario in scenario_order(pairs):
        table[scenario] = {}
        runs = [p["base"].run_id for p in pairs[scenario]]
        for key, _label in OTPS:

            def rate(s: Sample, key: str = key) -> float | None:
                if not s.ok:
                    return None
                value = output_tps(s, definition=key)
                return float("nan") if value is None else value

            ci = ratio_ci(
                [rate(p["base"]) for p in pairs[scenario]],
                [rate(p["fast"]) for p in pairs[scenario]],
                runs,
                "rate",
            )
            table[scenario][key] = _ci_dict(ci, claimed if key in keys else None)
    return table


def ttft_both(
    by: dict[tuple[str, str], list[Sample]], scenarios: Sequence[str], min_n: int
) -> dict[str, Any]:
    """TTFT both ways per scenario and tier, where a tier streamed reasoning first (a sample
    whose first answer token came after its first token): to the first token on any channel
    (``ttft_ms``) and to the first answer token (``ttft_answer_ms``), percentiles of the
    successful samples (docs/measures.md, "TTFT of a reasoning model"). Empty when no tier
    streamed reasoning."""
    out: dict[str, Any] = {}
    for scn in scenarios:
        for t in TIERS:
            ok = [s for s in by[(scn, t)] if s.ok]
            reasoned = [s for s in ok if _reasoned_first(s)]
            if reasoned:
                out.setdefault(scn, {})[t] = {
                    "n_reasoning": len(reasoned),
                    "n": len(ok),
                    "any": percentiles([s.ttft_ms for s in ok], min_n=min_n, per_quantile=True),
                    "answer": percentiles(
                        [s.ttft_answer_ms for s in ok], min_n=min_n, per_quantile=True
                    ),
                }
    return out


def _reasoned_first(s: Sample) -> bool:
    return s.ttft_ms is not None and (s.ttft_answer_ms is None or s.ttft_answer_ms > s.ttft_ms)


def _med(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return median(vals) if vals else None


def breakdown(samples: Sequence[Sample]) -> dict[str, Any]:
    """Medians (ms) of connect, headers − connect, TTFT − headers, E2E − TTFT over successful
    samples with every mark. A reused keep-alive connection has connect ≈ pool wait only."""
    full = [
        s for s in samples if s.ok and None not in (s.connect_ms, s.headers_ms, s.ttft_ms, s.e2e_ms)
    ]
    parts = {
        "connect": _med(s.connect_ms for s in full),
        "headers": _med(s.headers_ms - s.connect_ms for s in full),
        "prefill": _med(s.ttft_ms - s.headers_ms for s in full),
        "decode": _med(s.e2e_ms - s.ttft_ms for s in full),
    }
    return {"n": len(full), **parts}


def goodput_block(samples: Sequence[Any], slo: dict[str, float]) -> dict[str, Any]:
    return {"value": goodput(samples, slo) if slo else None, "n": len(samples)}


def speed_report(*, pair: Pair, runs: Sequence[Run] | None = None) -> dict[str, Any]:
    """Everything the speed page shows, from the samples of ``runs`` (default: the pair's
    newest finished probe runs). Shape: see the module docstring and the keys below.

    Every figure reads the gated samples (``monitor.judging.claims.gate``): a sample the vendor
    served on another tier than expected is counted in ``gating`` and the hourly downgrade
    table, and left out of the rest unless the pair includes downgraded samples."""
    runs = default_runs(pair) if runs is None else list(runs)
    min_n = int(settings.TIERWATCH_MIN_N)
    every = list(
        Sample.objects.filter(run__in=[r.id for r in runs])
        .select_related("case")
        .only(*SAMPLE_FIELDS)
        .order_by("run_id", "seq")
    )
    samples, gating = claim_checks.gate(every, include_downgraded=pair.include_downgraded)
    claim = pair.claim
    factor = claim.value if claim and claim.form == "factor" else None
    now = timezone.now()
    by = defaultdict(list)
    for s in samples:
        by[(s.scenario, s.tier)].append(s)
    scenarios = scenario_order(s.scenario for s in samples)
    pairs = paired_samples(samples)
    table, claims = speedups(pairs, factor if claim and claim.metric != "output_tps" else None)
    if claim and claim.form == "factor":  # a status only in the claim's own metric
        claims = {k: v for k, v in claims.items() if k == claim.metric}
        for row in table.values():
            for key in row:
                if key != claim.metric:
                    row[key].update(claim=None, status=None)
    slo = pair.slo
    otps_claim = factor if claim and claim.metric == "output_tps" else None
    return {
        "pair": pair.name,
        "claimed": factor if claim and claim.metric != "output_tps" else None,  # the chart's line
        "claim_check": claim_checks.check(claim, samples),
        "gating": gating,
        "downgrades_by_hour": claim_checks.downgrades_by_hour(pair, now - HOURLY_WINDOW),
        "premium": claim_checks.premium_by_week(pair, now),
        "ttft_both": ttft_both(by, scenarios, min_n),
        "simulated": pair.simulated,
        "min_n": min_n,
        "run_ids": [r.id for r in runs],
        "n_samples": len(samples),
        "scenarios": scenarios,
        "descriptions": {s: SCENARIOS[s].description for s in scenarios if s in SCENARIOS},
        "n_pairs": {s: len(pairs.get(s, [])) for s in scenarios},
        "speedup": table,
        "otps": otps_speedups(pairs, otps_claim, keys=("generation",) if otps_claim else ()),
        "min_pairs": MIN_PAIRS,
        "claim": claims,
        "percentiles": {
            scn: {
                t: {
                    m: percentiles(
                        [getattr(s, m) for s in by[(scn, t)] if s.ok],
                        min_n=min_n,
                        per_quantile=True,
                    )
                    for m in TIMINGS
                }
                for t in TIERS
            }
            for scn in scenarios
        },
        "breakdown": {scn: {t: breakdown(by[(scn, t)]) for t in TIERS} for scn in scenarios},
        "goodput": {
            "slo": slo,
            "tiers": {t: goodput_block([s for s in samples if s.tier == t], slo) for t in TIERS},
            "scenarios": {
                scn: {t: goodput_block(by[(scn, t)], slo) for t in TIERS} for scn in scenarios
            },
        },
        "hints": mechanism_hints(
            samples=samples,
            by=by,
            pairs=_comparable(samples),
            pass_rates=pass_rates(runs),
            audit=newest_audit(pair),
            min_n=min_n,
        ),
        "skipped": skipped_cases(runs),
        "load": latest_load(pair),
    }


def _comparable(samples: Sequence[Sample]) -> dict[str, list[tuple[Sample, Sample]]]:
    """Comparable answers of the same run and case (``evals.comparable``); each case's messages
    are read once, not per sample."""
    messages = dict(
        Case.objects.filter(id__in={s.case_id for s in samples}).values_list("id", "messages")
    )
    return comparable_pairs(
        samples,
        group=lambda s: (s.run_id, s.case_id, s.turn, s.step),
        messages=lambda s: messages[s.case_id],
    )


def pass_rates(runs: Sequence[Run]) -> dict[str, tuple[float, int]]:
    """Per tier the unit-test pass rate over the runs' tested samples, with its n."""
    out = {}
    for tier in TIERS:
        blocks = [r.summary_obj.tier(tier) for r in runs]
        tested = sum(b.n_tested for b in blocks)
        if tested:
            out[tier] = (sum((b.pass_rate or 0) * b.n_tested for b in blocks) / tested, tested)
    return out


def newest_audit(pair: Pair) -> AuditRef | None:
    """The newest audit verdict of the pair's two endpoints, under any pair."""
    audits = Run.objects.filter(
        kind=RunKind.AUDIT, status=RunStatus.DONE, pair__fast=pair.fast_id, pair__base=pair.base_id
    ).order_by("-created_at", "-id")
    for run in audits[:AUDITS_LOOKED_AT]:
        verdict = run.summary_obj.verdict
        if verdict is not None:
            return AuditRef(run.id, verdict.label, verdict.sentence or verdict.label)
    return None


def skipped_cases(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Cases the runs skipped (their summaries' ``skipped`` block), newest run first, one per
    case."""
    seen: dict[str, dict[str, Any]] = {}
    for run in runs:
        for item in run.summary_obj.skipped:
            seen.setdefault(
                item.case,
                {
                    "case": item.case,
                    "scenario": item.scenario,
                    "reason": item.reason,
                    "run": run.id,
                },
            )
    return list(seen.values())
