"""The pair's claim checked as the vendor worded it, on the samples that stand for the tier.

Three readers share this: the speed page (``monitor.judging.speed``), the overview's "how much
faster?" (``monitor.judging.speed_window``) and the SLA report (``monitor.reporting.sla``).

- **Gating** (``gate``): samples are sorted by ``evals.served.counts_for_tier`` against their
  own endpoint's expected tier; downgraded ones leave the speed-ups and claims unless the pair
  has ``include_downgraded``. The tallies say how many, and whether the vendor never
  confirmed the tier at all.
- **Claims** (``check``): a factor is judged on the speed-up in the claim's metric with its
  cluster-bootstrap interval, per scenario; a floor on the share of fast-tier requests meeting
  it with a Wilson interval (``evals.claims``).
- **Premium paid vs speed delivered** (``premium_by_week``): per ISO week, the money the fast
  tier cost over the money the base tier cost for the same probes (``monitor.runs.budget``'s
  cost formula), beside the measured speed-up in the claim's metric with its interval.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from django.db.models import Count, Q
from django.db.models.functions import ExtractHour

from evals.claims import Claim, check_floor, judge
from evals.latency import output_tps
from evals.served import NEVER_CONFIRMED, counts_for_tier, never_confirmed, tally
from evals.stats.speedup import RatioCI
from monitor.judging.pairing import fmt_ci, paired_samples, ratio_ci, scenario_order
from monitor.models import Endpoint, Pair, Run, Sample
from monitor.runs.budget import priced, runs_costs_by_tier

# claim metric → (ratio kind, sample field or evals.latency.output_tps definition)
SOURCE: dict[str, tuple[Literal["duration", "rate"], str]] = {
    "e2e": ("duration", "e2e_ms"),
    "ttft": ("duration", "ttft_ms"),
    "output_tps": ("rate", "generation"),
}
DEFAULT_METRIC = "e2e"  # what a user of the fast tier waits for, when no claim names one
PREMIUM_WEEKS = 4


# --- gating -----------------------------------------------------------------------------------


def expected_tiers(endpoint_ids: Iterable[int]) -> dict[int, str]:
    """Endpoint id → the tier it expects the vendor to report ("" = not checked)."""
    ids = set(endpoint_ids)
    if not ids:
        return {}
    return dict(Endpoint.objects.filter(id__in=ids).values_list("id", "expected_tier"))


def gate(
    samples: Sequence[Any], *, include_downgraded: bool, expected: Mapping[int, str] | None = None
) -> tuple[list[Any], dict[str, Any]]:
    """The samples that count for the tiers' figures, and the gating block: per tier the
    count of each ``evals.served`` state, how many were left out, and the note when the
    vendor never confirmed the fast tier."""
    if expected is None:
        expected = expected_tiers(s.endpoint_id for s in samples)
    kept, by_tier = [], defaultdict(list)
    for s in samples:
        want = expected.get(s.endpoint_id, "")
        by_tier[s.tier].append((s.served_tier, want))
        if counts_for_tier(s.served_tier, want, include_downgraded=include_downgraded):
            kept.append(s)
    tiers = {t: tally(v) for t, v in by_tier.items()}
    fast = tiers.get("fast", {})
    unconfirmed = never_confirmed(fast)
    return kept, {
        "tiers": tiers,
        "include_downgraded": include_downgraded,
        "left_out": len(samples) - len(kept),
        "never_confirmed": unconfirmed,
        "note": NEVER_CONFIRMED if unconfirmed else "",
    }


def downgrades_by_hour(pair: Pair, since: datetime) -> list[dict[str, Any]]:
    """Per UTC hour of day, the fast tier's successful probes since ``since`` that reported a
    tier, how many reported another than expected, and the rate (None without a report).
    Every sample counts here, gated or not: the downgrade is what this measures."""
    expected = pair.fast.expected_tier
    if not expected:
        return []
    rows = (
        Sample.objects.filter(run__pair=pair, tier="fast", ok=True, started_at__gte=since)
        .exclude(served_tier="")
        .annotate(hour=ExtractHour("started_at"))
        .values("hour")
        .annotate(n=Count("id"), down=Count("id", filter=~Q(served_tier=expected)))
    )
    by = {r["hour"]: r for r in rows}
    return [
        {
            "hour": h,
            "n": by.get(h, {}).get("n", 0),
            "down": by.get(h, {}).get("down", 0),
            "rate": by[h]["down"] / by[h]["n"] if by.get(h, {}).get("n") else None,
        }
        for h in range(24)
    ]


# --- claims -----------------------------------------------------------------------------------


def sample_value(s: Any, metric: str) -> float | None:
    """One probe's value in ``metric``: None for a failure (counted as the slowest by the
    ratio), NaN for a success without the value (the pair is left out)."""
    if not s.ok:
        return None
    kind, source = SOURCE[metric]
    value = getattr(s, source) if kind == "duration" else output_tps(s, definition=source)
    return float("nan") if value is None else value


def floor_value(s: Any, metric: str) -> float | bool | None:
    """For a floor: False for a failure (a miss), None without a value (left out)."""
    if not s.ok:
        return False
    kind, source = SOURCE[metric]
    return getattr(s, source) if kind == "duration" else output_tps(s, definition=source)


def metric_ci(group: Sequence[dict[str, Any]], metric: str) -> RatioCI:
    """The speed-up fast over base in ``metric`` from paired probes, with its interval."""
    return ratio_ci(
        [sample_value(p["base"], metric) for p in group],
        [sample_value(p["fast"], metric) for p in group],
        [p["base"].run_id for p in group],
        SOURCE[metric][0],
    )


def check(claim: Claim | None, samples: Sequence[Any]) -> dict[str, Any] | None:
    """The claim judged on gated samples: for a factor, per scenario the speed-up in its
    metric and the word (confirmed / contradicted / not yet); for a floor, the share of
    fast-tier requests meeting it. ``line`` sums it up in one sentence."""
    if claim is None:
        return None
    out: dict[str, Any] = {"text": claim.text(), "form": claim.form, "metric": claim.metric}
    if claim.form == "floor":
        floor = check_floor(
            claim, (floor_value(s, claim.metric) for s in samples if s.tier == "fast")
        )
        return {**out, **floor.__dict__, "word": floor.word or "not yet", "line": floor.line(claim)}
    pairs = paired_samples(samples)
    rows: list[dict[str, Any]] = []
    by_word: defaultdict[str, list[str]] = defaultdict(list)
    for scenario in scenario_order(pairs):
        ci = metric_ci(pairs[scenario], claim.metric)
        word: str = judge(ci.low, ci.high, claim.value) or "not yet"
        rows.append({"scenario": scenario, "word": word, "ci": fmt_ci(ci), "n": ci.n})
        by_word[word].append(f"{scenario} ({fmt_ci(ci)})")
    said = "; ".join(
        f"{w} for {', '.join(by_word[w])}"
        for w in ("confirmed", "contradicted", "not yet")
        if by_word[w]
    )
    word = _overall(by_word)
    return {
        **out,
        "scenarios": rows,
        "word": word,
        "line": f"claim {claim.text()}: {said or 'not yet (no paired probes)'}",
    }


def _overall(by_word: Mapping[str, list[str]]) -> str:
    """Contradicted anywhere is contradicted; confirmed everywhere is confirmed; else not yet."""
    if by_word.get("contradicted"):
        return "contradicted"
    if by_word.get("confirmed") and not by_word.get("not yet"):
        return "confirmed"
    return "not yet"


# --- premium paid vs speed delivered ---------------------------------------------------------


def premium_by_week(
    pair: Pair, now: datetime, weeks: int = PREMIUM_WEEKS, runs: Sequence[Run] | None = None
) -> list[dict[str, Any]]:
    """Per ISO week (newest first) over the pair's comparable runs: the fast tier's cost over
    the base tier's for the same probes (the price multiple actually paid) beside the speed-up
    in the claim's metric (E2E without a claim) with its interval, on gated samples. Empty
    when either endpoint has no prices."""
    if not (priced(pair.fast) and priced(pair.base)):
        return []
    if runs is None:
        since = now - timedelta(weeks=weeks)
        runs = list(Run.objects.trend().filter(pair=pair, created_at__gte=since))
    claim = pair.claim
    metric = claim.metric if claim else DEFAULT_METRIC
    costs = runs_costs_by_tier(pair, runs)
    week_of = {r.id: r.created_at.isocalendar()[:2] for r in runs}
    samples = list(
        Sample.objects.filter(run__in=list(week_of), batch=0).select_related("case").only(*_FIELDS)
    )
    kept, _ = gate(samples, include_downgraded=pair.include_downgraded)
    by_week: dict[tuple[int, int], list[Any]] = defaultdict(list)
    for s in kept:
        by_week[week_of[s.run_id]].append(s)
    out = []
    for week in sorted(set(week_of.values()), reverse=True):
        ids = [rid for rid, w in week_of.items() if w == week]
        fast = [costs[i]["fast"] for i in ids]
        base = [costs[i]["base"] for i in ids]
        paid = None
        if None not in fast and None not in base and sum(base) > 0:  # type: ignore[arg-type]
            paid = sum(fast) / sum(base)  # type: ignore[arg-type]
        group = [p for g in paired_samples(by_week[week]).values() for p in g]
        ci = metric_ci(group, metric)
        out.append({
            "week": f"{week[0]}-W{week[1]:02d}",
            "runs": len(ids),
            "price_multiple": paid,
            "metric": metric,
            "speedup": ci.estimate,
            "low": ci.low,
            "high": ci.high,
            "n": ci.n,
            "speedup_text": fmt_ci(ci),
        })  # fmt: skip
    return out


_FIELDS = (
    "id",
    "run_id",
    "case_id",
    "case__scenario",
    "endpoint_id",
    "tier",
    "batch",
    "repetition",
    "turn",
    "step",
    "ok",
    "served_tier",
    "ttft_ms",
    "e2e_ms",
    "completion_tokens",
    "estimated_tokens",
)


def period_claim(pair: Pair, runs: Sequence[Run]) -> dict[str, Any]:
    """The claim checked over a period's comparable runs (the SLA report), with the premium
    per week of those runs: {"check": ``check``'s block or None, "premium": weeks, "gating"}."""
    samples = list(
        Sample.objects.filter(run__in=[r.id for r in runs], batch=0)
        .select_related("case")
        .only(*_FIELDS)
    )
    kept, gating = gate(samples, include_downgraded=pair.include_downgraded)
    return {
        "check": check(pair.claim, kept),
        "premium": premium_by_week(pair, max(r.created_at for r in runs), runs=runs)
        if runs
        else [],
        "gating": gating,
    }
