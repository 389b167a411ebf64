"""A pair's capability loss decision, controlled across runs: each finished probe is folded,
once, into a loss detector per category (``evals.stats.capability_loss``), stored with the
pair's other evidence (``PairMonitorState.capability``) and restarted when a person
acknowledges (``evidence.acknowledge``).

Why not the window test after every run: it looks at overlapping data 720 times a month at
hourly probes, with nothing bounding its false loss reports. The detector's threshold is set
so that the expected number of false loss reports is ≤ capability loss's share of the pair's
budget (``evals.stats.error_budget.share("capability")``) a quarter over the pair's
categories, split evenly (≤ that / K per category), at the pair's
probe cadence. The routing advice's "keep on base" comes from here; the window's p-values stay
on the page as evidence.
"""

from __future__ import annotations

from collections import defaultdict

from django.db import transaction

from evals.stats import capability_loss, error_budget
from evals.stats.capability_paired import CaseCounts
from monitor.derived import evidence
from monitor.models import (
    BENCHMARK_CASES,
    Pair,
    PairMonitorState,
    Run,
    RunKind,
    RunRollup,
    RunStatus,
)

LAST_RUN = "_last_run_id"  # key of the state map that is not a category


def categories(pair: Pair) -> list[str]:
    """The capability categories of the pair's suite."""
    cases = pair.suite.cases.filter(BENCHMARK_CASES)
    return sorted(set(cases.values_list("category", flat=True)))


def threshold(pair: Pair, n_categories: int | None = None) -> float:
    every, _ = evidence.cadence_s(pair, RunKind.PROBE)
    k = n_categories if n_categories is not None else len(categories(pair))
    return capability_loss.threshold_for(
        error_budget.runs_per_quarter(every), max(1, k), error_budget.share("capability")
    )


def budget_words(pair: Pair) -> str:
    every, scheduled = evidence.cadence_s(pair, RunKind.PROBE)
    k = max(1, len(categories(pair)))
    per_month = error_budget.share("capability") / 3
    tail = "" if scheduled else " (no schedule: hourly assumed; slower runs report less)"
    return (
        f"expected false loss reports: ≤ {per_month / k:.2g} per category a month "
        f"(≤ {per_month:.2g} over the pair's {k} categories) at "
        f"{evidence.every_words(every)} probes{tail} ({error_budget.share_words('capability')})"
    )


def states(pair: Pair) -> dict[str, capability_loss.LossState]:
    row = PairMonitorState.objects.filter(pair=pair).values_list("capability", flat=True).first()
    return {
        cat: capability_loss.LossState.from_dict(data)
        for cat, data in (row or {}).items()
        if cat != LAST_RUN
    }


def run_cases(run: Run) -> dict[str, list[CaseCounts]]:
    """The run's paired cases per category, from its rollups."""
    tiers = dict(
        RunRollup.objects.filter(run=run, tier__in=("fast", "base")).values_list("tier", "cases")
    )
    fast, base = tiers.get("fast", {}), tiers.get("base", {})
    out: dict[str, list[CaseCounts]] = defaultdict(list)
    for key, f in fast.items():
        b = base.get(key, {})
        if f.get("n") and b.get("n"):
            out[f["c"]].append(CaseCounts(f["c"], f["n"], f["p"], b["n"], b["p"]))
    return out


def after_run(*, run_id: int) -> None:
    """Fold a finished probe on the pair's current suite into the detectors, once (a run not
    newer than the last one folded, or measured before the acknowledgement, is left out)."""
    run = Run.objects.select_related("pair", "pair__suite").get(id=run_id)
    pair = run.pair
    if run.status != RunStatus.DONE or run.kind != RunKind.PROBE or run.suite_id != pair.suite_id:
        return
    by_cat = run_cases(run)
    if not by_cat:
        return
    limit = threshold(pair)
    with transaction.atomic():
        row = evidence.locked_state(pair)
        data = dict(row.capability or {})
        if data.get(LAST_RUN, 0) >= run.id or (row.since and run.created_at < row.since):
            return
        for cat, cases in by_cat.items():
            state = capability_loss.LossState.from_dict(data.get(cat, {}))
            data[cat] = capability_loss.update(
                state, cases, threshold=limit, run_id=run.id
            ).to_dict()
        data[LAST_RUN] = run.id
        row.capability = data
        row.save(update_fields=["capability", "updated_at"])
