"""What runs cost, and how many cases a pair's daily budget lets a probe take.

Cost of a sample (USD), from the usage the vendor reported and the endpoint's prices per
million tokens: ((prompt − cached) · input + cached · cached_input + completion · output) / 10⁶,
cached input at the input price when the vendor does not price it apart; completion tokens as
our tokenizer estimates them when the vendor sent no usage.

The budget never lets a run exceed it: a case is taken only if its *upper bound* still fits
what is left of the day (UTC): both tiers × repetitions × (its prompt at the full input price,
the largest prompt seen for it so far or 1.25 × our estimate, plus ``max_tokens`` at the
output price). Cases rotate (the least answered in the pair's recent runs first) and are taken
round-robin across categories, so a small budget still covers every category. A run the
budget limited says so in its summary: "limited by budget: k of n cases".
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, time
from typing import Any

from django.db.models import Max

from evals.suites import prompt_estimate
from monitor.models import Case, Endpoint, Pair, Run, RunKind, Sample
from monitor.run_summary import Budget

PROMPT_MARGIN = 1.25  # over our prompt estimate, for a case never sent before
ROTATION_RUNS = 30  # recent runs whose answers count for rotation
_USAGE = ("tier", "prompt_tokens", "completion_tokens", "estimated_tokens", "cached_tokens")


def priced(endpoint: Endpoint) -> bool:
    return endpoint.price_input_per_mtok is not None \
        and endpoint.price_output_per_mtok is not None


def sample_cost(endpoint: Endpoint, prompt: int | None, completion: int | None,
                cached: int | None = None) -> float | None:
    """The module docstring's formula; None when unpriced or the prompt count is unknown."""
    if not priced(endpoint) or prompt is None:
        return None
    cached = min(cached or 0, prompt)
    cached_price = endpoint.price_cached_input_per_mtok
    if cached_price is None:
        cached_price = endpoint.price_input_per_mtok
    return ((prompt - cached) * endpoint.price_input_per_mtok + cached * cached_price
            + (completion or 0) * endpoint.price_output_per_mtok) / 1e6


def _costs(pair: Pair, rows: Iterable[dict[str, Any]]) -> dict[str, float | None]:
    endpoints = {"fast": pair.fast, "base": pair.base}
    out: dict[str, float | None] = {"fast": 0.0, "base": 0.0}
    for r in rows:
        tier = r["tier"]
        completion = r["completion_tokens"] if r["completion_tokens"] is not None \
            else r["estimated_tokens"]
        cost = sample_cost(endpoints[tier], r["prompt_tokens"], completion, r["cached_tokens"])
        if cost is None and priced(endpoints[tier]) and r["prompt_tokens"] is None:
            continue  # a request that failed before usage: nothing billed that we can see
        out[tier] = None if cost is None or out[tier] is None else out[tier] + cost
    return out


def run_cost(run: Run) -> dict[str, float | None]:
    """USD per tier and in total for a run's samples; None where an endpoint has no prices."""
    cost = _costs(run.pair, Sample.objects.filter(run=run).values(*_USAGE))
    fast, base = cost["fast"], cost["base"]
    return {**cost, "total": None if fast is None or base is None else fast + base}


def runs_costs(pair: Pair, runs: Sequence[Run]) -> dict[int, float | None]:
    """Total USD per run of a list (one query), None where an endpoint has no prices."""
    rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in Sample.objects.filter(run__in=list(runs)).values("run_id", *_USAGE):
        rows[r["run_id"]].append(r)
    out: dict[int, float | None] = {}
    for run in runs:
        cost = _costs(pair, rows.get(run.id, []))
        out[run.id] = None if cost["fast"] is None or cost["base"] is None \
            else cost["fast"] + cost["base"]
    return out


def day_start(now: datetime | None = None) -> datetime:
    now = now or datetime.now(UTC)
    return datetime.combine(now.astimezone(UTC).date(), time.min, tzinfo=UTC)


def spent_today(pair: Pair, *, exclude_run: int | None = None) -> float:
    """What the pair's probes cost since midnight UTC; a run still going counts at its bound
    (what it may yet spend), a finished one at its cost."""
    total = 0.0
    runs = Run.objects.filter(pair=pair, kind=RunKind.PROBE, created_at__gte=day_start())
    for run in runs.exclude(id=exclude_run) if exclude_run else runs:
        cost = run_cost(run)["total"] or 0.0
        block = run.summary_obj.budget
        total += max(cost, block.bound_usd) if run.active and block else cost
    return total


def case_bound(case: Case, pair: Pair, repeat: int, seen_prompt: dict[tuple[int, str], int]
               ) -> float:
    """The most one case can cost in one run (module docstring)."""
    total = 0.0
    for tier, endpoint in (("fast", pair.fast), ("base", pair.base)):
        prompt = seen_prompt.get((case.id, tier)) or math.ceil(
            PROMPT_MARGIN * (prompt_estimate(case.messages)
                             + len(json.dumps(case.tools or [])) / 3))
        total += (prompt * endpoint.price_input_per_mtok
                  + case.max_tokens * endpoint.price_output_per_mtok) / 1e6
    return total * repeat


def rotation_order(run: Run, cases: Sequence[Case]) -> list[Case]:
    """Least-answered first within each category (ties in a per-run random order), then
    round-robin across categories."""
    recent = Run.objects.filter(pair=run.pair, suite=run.suite, kind=RunKind.PROBE) \
        .exclude(id=run.id).order_by("-created_at")[:ROTATION_RUNS]
    answered = Counter(Sample.objects.filter(run__in=recent, tier="fast")
                       .values_list("case_id", flat=True))

    def tie(case: Case) -> str:
        return hashlib.sha256(f"{run.seed}:{case.key}".encode()).hexdigest()

    by_cat: dict[str, list[Case]] = defaultdict(list)
    for case in sorted(cases, key=lambda c: (answered[c.id], tie(c))):
        by_cat[case.category].append(case)
    queues = [by_cat[c] for c in sorted(by_cat)]
    ordered = []
    while any(queues):
        for q in queues:
            if q:
                ordered.append(q.pop(0))
    return ordered


def take_cases(run: Run, cases: Sequence[Case], limit: int | None = None
               ) -> tuple[list[Case], Budget]:
    """The cases this run can afford, in rotation order, and the summary's budget block."""
    pair = run.pair
    stored = run.summary_obj.budget
    if stored is not None and stored.keys:  # a taken-over run resumes its own plan
        chosen = [c for c in cases if c.key in set(stored.keys)]
        return sorted(chosen, key=lambda c: c.key), stored
    limit_usd = float(pair.daily_budget_usd or 0.0)
    ordered = rotation_order(run, cases)[:limit or None]
    unpriced = [ep.name for ep in (pair.fast, pair.base) if not priced(ep)]
    if unpriced:
        note = (f"not limited: a daily budget of ${limit_usd:.2f} is set but "
                f"{', '.join(unpriced)} has no prices")
        return sorted(ordered, key=lambda c: c.key), Budget(
            limit_usd=limit_usd, taken=len(ordered), available=len(cases), note=note,
            keys=tuple(c.key for c in ordered))
    spent = spent_today(pair, exclude_run=run.id)
    left = max(0.0, limit_usd - spent)
    seen = {(cid, tier): n for cid, tier, n in Sample.objects.filter(
        run__pair=pair, case__in=list(cases), prompt_tokens__isnull=False)
        .values_list("case_id", "tier").annotate(n=Max("prompt_tokens"))}
    chosen, bound = [], 0.0
    for case in ordered:
        cost = case_bound(case, pair, run.repeat, seen)
        if bound + cost <= left:
            chosen.append(case)
            bound += cost
    note = ""
    if len(chosen) < len(ordered):
        note = (f"limited by budget: {len(chosen)} of {len(cases)} cases "
                f"(${left:.4f} left of ${limit_usd:.2f} today, these cost at most "
                f"${bound:.4f})")
    return sorted(chosen, key=lambda c: c.key), Budget(
        limit_usd=limit_usd, spent_before_usd=spent, bound_usd=bound, taken=len(chosen),
        available=len(cases), note=note, keys=tuple(c.key for c in chosen))
