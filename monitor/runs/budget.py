"""What runs cost, and how many cases a pair's daily budget lets a run take.

Cost of a sample (USD), from the usage the vendor reported and the endpoint's prices per
million tokens: ((prompt − cached) · input + cached · cached_input + completion · output) / 10⁶,
cached input at the input price when the vendor does not price it apart; completion tokens as
our tokenizer estimates them when the vendor sent no usage. A finished run's cost comes from
its rollups' token sums (the formula is linear), a running one's from its samples.

The budget covers every run of the pair that sends requests for it — probes and audits — since
midnight UTC. A case is taken only if its *estimate* still fits what is left of the day: both
tiers × repetitions × (its prompt at the full input price — the largest prompt seen for it in
the pair's recent runs, else 1.25 × our estimate — plus its expected reply at the output
price). The expected reply is the P90 of the output tokens the case drew from that tier in the
pair's last ``ROTATION_RUNS`` runs (their rollups), capped at ``max_tokens``; a case never
answered counts at ``max_tokens``. (``max_tokens`` for all was ~6× pessimistic on HumanEval.)
A multi-turn agent task is several requests: it counts at its expected requests per tier ×
(its largest prompt + its expected reply). Expected requests: the P90 of the requests its
episodes took on that tier in the pair's recent runs (their rollups' ``r``); for a task never
played, the benchmark's own answer read as requests — per turn its ground-truth calls, one
request each at worst, plus the answer that ends the turn — capped at the episode's request
limit; its prompt, before it was ever sent, is the estimate over every turn's user messages
and the tools (the whole conversation the last request carries, less the tool results).
Replies longer than their P90 can carry a run past the budget: then :func:`settle` says so in
the run's summary ("over budget: …") and the log — never silently. Cases rotate (the least
answered in the pair's recent runs of the same kind first) and are taken round-robin across
categories, so a small budget still covers every category. A run the budget limited says so
in its summary: "limited by budget: k of n cases".
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, time
from typing import Any

import numpy as np

from evals.agent.loop import Limits
from evals.benchmarks import bfcl_multi_turn
from evals.suites import prompt_estimate
from monitor.derived.run_summary import Budget
from monitor.judging.capability import spec_of
from monitor.models import Case, Endpoint, Pair, Run, RunKind, RunRollup, Sample

PROMPT_MARGIN = 1.25  # over our prompt estimate, for a case never sent before
ROTATION_RUNS = 30  # recent runs whose answers count for rotation and for the token estimate
OUTPUT_QUANTILE = 90  # percent: the expected reply of a case from its recent replies
log = logging.getLogger(__name__)
SPENDING = (RunKind.PROBE, RunKind.AUDIT)  # the runs a pair's daily budget covers
_USAGE = ("tier", "prompt_tokens", "completion_tokens", "estimated_tokens", "cached_tokens")


def priced(endpoint: Endpoint) -> bool:
    return endpoint.price_input_per_mtok is not None and endpoint.price_output_per_mtok is not None


def sample_cost(
    endpoint: Endpoint, prompt: int | None, completion: int | None, cached: int | None = None
) -> float | None:
    """The module docstring's formula; None when unpriced or the prompt count is unknown."""
    if not priced(endpoint) or prompt is None:
        return None
    cached = min(cached or 0, prompt)
    cached_price = endpoint.price_cached_input_per_mtok
    if cached_price is None:
        cached_price = endpoint.price_input_per_mtok
    return (
        (prompt - cached) * endpoint.price_input_per_mtok
        + cached * cached_price
        + (completion or 0) * endpoint.price_output_per_mtok
    ) / 1e6


def _costs(pair: Pair, rows: Iterable[dict[str, Any]]) -> dict[str, float | None]:
    endpoints = {"fast": pair.fast, "base": pair.base}
    out: dict[str, float | None] = {"fast": 0.0, "base": 0.0}
    for r in rows:
        tier = r["tier"]
        completion = (
            r["completion_tokens"] if r["completion_tokens"] is not None else r["estimated_tokens"]
        )
        cost = sample_cost(endpoints[tier], r["prompt_tokens"], completion, r["cached_tokens"])
        if cost is None and priced(endpoints[tier]) and r["prompt_tokens"] is None:
            continue  # a request that failed before usage: nothing billed that we can see
        so_far = out[tier]
        out[tier] = None if cost is None or so_far is None else so_far + cost
    return out


def _rolled_up(runs: Sequence[Run]) -> dict[int, list[dict[str, Any]]]:
    """The token sums of the finished runs' rollups, as one usage row per tier."""
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    done = [r.id for r in runs if not r.active]
    for r in RunRollup.objects.filter(run_id__in=done).values(
        "run_id", "tier", "prompt_tokens", "completion_tokens", "cached_tokens"
    ):
        out[r.pop("run_id")].append({**r, "estimated_tokens": None})
    return out


def runs_costs_by_tier(pair: Pair, runs: Sequence[Run]) -> dict[int, dict[str, float | None]]:
    """USD per tier and in total for each run (finished runs from their rollups, the others
    from their samples, at most two queries); None where an endpoint has no prices."""
    rows = _rolled_up(runs)
    rest = [r for r in runs if r.id not in rows]
    for r in Sample.objects.filter(run__in=rest).values("run_id", *_USAGE) if rest else ():
        rows[r.pop("run_id")].append(r)
    out = {}
    for run in runs:
        cost = _costs(pair, rows.get(run.id, []))
        fast, base = cost["fast"], cost["base"]
        out[run.id] = {**cost, "total": None if fast is None or base is None else fast + base}
    return out


def run_cost(run: Run) -> dict[str, float | None]:
    """USD per tier and in total for a run; None where an endpoint has no prices."""
    return runs_costs_by_tier(run.pair, [run])[run.id]


def runs_costs(pair: Pair, runs: Sequence[Run]) -> dict[int, float | None]:
    """Total USD per run of a list, None where an endpoint has no prices."""
    return {k: v["total"] for k, v in runs_costs_by_tier(pair, runs).items()}


def day_start(now: datetime | None = None) -> datetime:
    now = now or datetime.now(UTC)
    return datetime.combine(now.astimezone(UTC).date(), time.min, tzinfo=UTC)


def spent_today(pair: Pair, *, exclude_run: int | None = None) -> float:
    """What the pair's probes and audits cost since midnight UTC; a run still going counts at
    its estimate (what it may yet spend) when it has one, a finished one at its cost."""
    runs = Run.objects.filter(pair=pair, kind__in=SPENDING, created_at__gte=day_start())
    runs = list(runs.exclude(id=exclude_run) if exclude_run else runs)
    total = 0.0
    for run, cost in zip(runs, runs_costs(pair, runs).values(), strict=True):
        block = run.summary_obj.budget
        total += max(cost or 0.0, block.bound_usd) if run.active and block else cost or 0.0
    return total


@dataclass(frozen=True)
class Seen:
    """What a pair's recent runs tell about a case per tier: its largest prompt and the
    ``OUTPUT_QUANTILE`` percentile of its output tokens (from the runs' rollups)."""

    prompt: dict[tuple[str, str], int]
    output: dict[tuple[str, str], int]
    requests: dict[tuple[str, str], int] = field(default_factory=dict)  # agent tasks


def seen_tokens(pair: Pair, runs: int = ROTATION_RUNS) -> Seen:
    recent = Run.objects.filter(pair=pair, kind__in=SPENDING).order_by("-created_at")[:runs]
    prompt: dict[tuple[str, str], int] = {}
    outputs: dict[tuple[str, str], list[int]] = defaultdict(list)
    requests: dict[tuple[str, str], list[int]] = defaultdict(list)
    for tier, cases in RunRollup.objects.filter(run__in=recent).values_list("tier", "cases"):
        for key, c in cases.items():
            if "r" in c:
                requests[(key, tier)].append(c["r"])
            if "in" in c:
                prompt[(key, tier)] = max(prompt.get((key, tier), 0), c["in"])
            if "out" in c:
                outputs[(key, tier)].append(c["out"])
    return Seen(
        prompt,
        {k: math.ceil(np.percentile(v, OUTPUT_QUANTILE)) for k, v in outputs.items()},
        {k: math.ceil(np.percentile(v, OUTPUT_QUANTILE)) for k, v in requests.items()},
    )


def agent_requests(case: Case) -> int:
    """A never-played agent task's expected requests (module docstring)."""
    task = bfcl_multi_turn.task_for(spec_of(case))
    return min(Limits().requests, sum(len(calls) + 1 for calls in task.ground_truth))


def agent_prompt(case: Case) -> int:
    """A never-sent agent task's prompt estimate: every turn's user messages and the tools."""
    task = bfcl_multi_turn.task_for(spec_of(case))
    messages = [m for turn in task.turns for m in turn]
    tools = len(json.dumps([*task.tools, *(t for ts in task.added_tools.values() for t in ts)]))
    return math.ceil(PROMPT_MARGIN * (prompt_estimate(messages) + tools / 3))


def case_estimate(case: Case, pair: Pair, repeat: int, seen: Seen) -> float:
    """What one case is expected to cost at most in one run (module docstring)."""
    total = 0.0
    for tier, endpoint in (("fast", pair.fast), ("base", pair.base)):
        prompt = seen.prompt.get((case.key, tier)) or (
            agent_prompt(case)
            if case.agent
            else math.ceil(
                PROMPT_MARGIN
                * (prompt_estimate(case.messages) + len(json.dumps(case.tools or [])) / 3)
            )
        )
        output = min(case.max_tokens, seen.output.get((case.key, tier), case.max_tokens))
        requests = (
            (seen.requests.get((case.key, tier)) or agent_requests(case)) if case.agent else 1
        )
        total += (
            requests
            * (prompt * endpoint.price_input_per_mtok + output * endpoint.price_output_per_mtok)
            / 1e6
        )
    return total * repeat


def answered(run: Run) -> Counter[str]:
    """Fast-tier answers per case key in the pair's last ``ROTATION_RUNS`` runs of this run's
    suite and kind (this run left out), at most three queries and no scan of the samples.

    A run with a fast rollup: each case its ``cases`` lists was sent ``run.repeat`` times to
    fast (one batch, ``evals.plan``; failed answers are listed too), as its samples counted
    (a run that failed part-way counts its listed cases at the full ``repeat``: close enough
    for an order whose aim is that every case gets its turn).
    A run without one — still running, or failed before its rollup was written — is counted
    from its own samples (an indexed read of that run's rows): skipping it would make a run
    started alongside it (a manual run during a scheduled one) take the same cases first."""
    repeat = dict(
        Run.objects.filter(pair=run.pair, suite=run.suite, kind=run.kind)
        .exclude(id=run.id)
        .order_by("-created_at")
        .values_list("id", "repeat")[:ROTATION_RUNS]
    )
    counts: Counter[str] = Counter()
    rolled: set[int] = set()
    for run_id, cases in RunRollup.objects.filter(run_id__in=list(repeat), tier="fast").values_list(
        "run_id", "cases"
    ):
        rolled.add(run_id)
        counts.update(dict.fromkeys(cases, repeat[run_id]))
    if unrolled := repeat.keys() - rolled:
        counts.update(
            Sample.objects.filter(run_id__in=unrolled, tier="fast").values_list(
                "case__key", flat=True
            )
        )
    return counts


def rotation_order(run: Run, cases: Sequence[Case]) -> list[Case]:
    """Least-answered first within each category (ties in a per-run random order), then
    round-robin across categories."""
    counts = answered(run)

    def tie(case: Case) -> str:
        return hashlib.sha256(f"{run.seed}:{case.key}".encode()).hexdigest()

    by_cat: dict[str, list[Case]] = defaultdict(list)
    for case in sorted(cases, key=lambda c: (counts[c.key], tie(c))):
        by_cat[case.category].append(case)
    queues = [by_cat[c] for c in sorted(by_cat)]
    ordered = []
    while any(queues):
        for q in queues:
            if q:
                ordered.append(q.pop(0))
    return ordered


def take_cases(
    run: Run, cases: Sequence[Case], limit: int | None = None
) -> tuple[list[Case], Budget]:
    """The cases this run can afford, in rotation order, and the summary's budget block."""
    pair = run.pair
    stored = run.summary_obj.budget
    if stored is not None and stored.keys:  # a taken-over run resumes its own plan
        chosen = [c for c in cases if c.key in set(stored.keys)]
        return sorted(chosen, key=lambda c: c.key), stored
    limit_usd = float(pair.daily_budget_usd or 0.0)
    ordered = rotation_order(run, cases)[: limit or None]
    unpriced = [ep.name for ep in (pair.fast, pair.base) if not priced(ep)]
    if unpriced:
        note = (
            f"not limited: a daily budget of ${limit_usd:.2f} is set but "
            f"{', '.join(unpriced)} has no prices"
        )
        return sorted(ordered, key=lambda c: c.key), Budget(
            limit_usd=limit_usd,
            taken=len(ordered),
            available=len(cases),
            note=note,
            keys=tuple(c.key for c in ordered),
        )
    spent = spent_today(pair, exclude_run=run.id)
    left = max(0.0, limit_usd - spent)
    seen = seen_tokens(pair)
    chosen, bound = [], 0.0
    for case in ordered:
        cost = case_estimate(case, pair, run.repeat, seen)
        if bound + cost <= left:
            chosen.append(case)
            bound += cost
    note = ""
    if len(chosen) < len(ordered):
        note = (
            f"limited by budget: {len(chosen)} of {len(cases)} cases "
            f"(${left:.4f} left of ${limit_usd:.2f} today, these are expected to cost at "
            f"most ${bound:.4f})"
        )
    return sorted(chosen, key=lambda c: c.key), Budget(
        limit_usd=limit_usd,
        spent_before_usd=spent,
        bound_usd=bound,
        taken=len(chosen),
        available=len(cases),
        note=note,
        keys=tuple(c.key for c in chosen),
    )


def settle(run: Run) -> str:
    """After a budgeted run: if the day's spending (this run included) passed the budget, say so
    in the run's summary and the log, and return the sentence ("" when within it)."""
    block = run.summary_obj.budget
    if (
        block is None
        or not block.limit_usd
        or not (priced(run.pair.fast) and priced(run.pair.base))
    ):
        return ""
    spent = spent_today(run.pair)
    if spent <= block.limit_usd:
        return ""
    over = (
        f"over budget: ${spent:.4f} spent today of ${block.limit_usd:.2f} (replies longer "
        f"than expected; the next runs take fewer cases)"
    )
    log.warning("pair %s: %s (run %s)", run.pair.name, over, run.id)
    note = f"{block.note}; {over}" if block.note else over
    Run.objects.merge_summary(run.id, budget=replace(block, note=note))
    return over
