"""Capability in the product: each probe sample of a benchmark case scored when it is stored,
and "is the fast tier worse?" read from the stored outcomes of a window of runs.

Scoring (:func:`check`) uses the evals dispatcher :func:`evals.benchmarks.score.score` (tool
call / structured output / unit tests in the sandbox / verifiable constraints) and stores the
outcome in the sample's ``tests_passed`` and ``tests_detail`` (kind, category, error class such
as ``invalid_json``, ``unknown_function``, ``schema_mismatch``, and the tool calls made).

The window (:func:`window_report`): the last ``WINDOW_RUNS`` finished probes of the pair on its
current suite version, read from their rollups' per-case outcomes (``monitor.derived.rollups``).
Cases rotate through runs (a budget takes some per run), so each case
has its own pass counts per tier; the paired test, Holm per category, the minimum detectable
drop and the routing sentence are :mod:`evals.stats.capability_paired`'s. Whether a category
*loses* is the controlled decision of its loss detector (``capability_monitor``), carried
across runs; the window's p-values are the evidence shown beside it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from evals.benchmarks import score as scoring
from evals.benchmarks.toolcheck import ToolMetrics, ToolVerdict, tool_metrics
from evals.records import CaseSpec, TimingRecord
from evals.stats.capability_loss import LossState
from evals.stats.capability_paired import (
    CaseCounts,
    PairedResult,
    compare,
    routing_advice,
)
from monitor.derived import loss_detectors
from monitor.derived.rollups import failed_class
from monitor.models import Case, Pair, Run, RunKind, RunRollup, RunStatus

WINDOW_RUNS = 30
ALPHA = 0.05


def spec_of(case: Case) -> CaseSpec:
    return CaseSpec(
        key=case.key,
        messages=case.messages,
        category=case.category,
        scenario=case.scenario,
        max_tokens=case.max_tokens,
        difficulty=case.difficulty,
        unit_tests=case.unit_tests,
        entry_point=case.entry_point,
        constraints=list(case.constraints or []),
        tools=list(case.tools or []),
        tool_answers=case.tool_answers,
        response_format=case.response_format,
        agent=case.agent,
    )


def check(case: Case, record: TimingRecord) -> tuple[bool | None, dict | None]:
    """``(passed, detail)`` of one sample of a benchmark case; ``(None, None)`` when the case
    carries nothing to check."""
    try:
        outcome = scoring.score(spec_of(case), record)
    except ValueError:
        return None, None
    detail: dict[str, Any] = {
        "kind": outcome.kind,
        "category": case.category,
        "error_class": outcome.error_class,
        "tool_calls": list(record.tool_calls),
    }
    verdict = outcome.detail
    if outcome.kind == "tool_call":
        detail.update(
            called=verdict.called,
            n_calls=verdict.n_calls,
            n_schema_valid=verdict.n_schema_valid,
            output=verdict.detail,
        )
    elif outcome.kind == "unit_tests":
        detail.update(
            n_tests=verdict.n_tests,
            n_failed=verdict.n_failed,
            output=verdict.output[-2000:],
            isolation=verdict.isolation,
            n_in_child=getattr(verdict, "n_in_child", 0),
        )
    elif outcome.kind == "constraints":
        detail.update(
            n_tests=len(verdict.strict),
            n_failed=verdict.strict.count(False),
            loose=verdict.prompt_loose,
        )
    elif outcome.kind == "structured":
        detail.update(output=verdict.detail)
    elif outcome.kind == "request_failed":  # not checked: a refusal is not a wrong answer
        detail.update(output=record.error_class or "")
        return None, detail
    return outcome.passed, detail


def window_runs(pair: Pair, limit: int = WINDOW_RUNS, *fields: str) -> list[Run]:
    """The window's runs, newest first; ``fields``: load only those (the report needs ids)."""
    runs = Run.objects.filter(
        pair=pair, suite=pair.suite, kind=RunKind.PROBE, status=RunStatus.DONE
    ).order_by("-created_at")
    return list((runs.only(*fields) if fields else runs)[:limit])


@dataclass(frozen=True)
class Rate:
    passed: int
    n: int
    low: float | None  # Wilson 95% interval (scipy's binomtest)
    high: float | None

    @property
    def rate(self) -> float | None:
        return self.passed / self.n if self.n else None


def rate(passed: int, n: int) -> Rate:
    if not n:
        return Rate(0, 0, None, None)
    from scipy.stats import binomtest

    ci = binomtest(passed, n).proportion_ci(confidence_level=0.95, method="wilson")
    return Rate(passed, n, ci.low, ci.high)


@dataclass(frozen=True)
class LosingCase:
    key: str
    category: str
    fast: str  # "k/n"
    base: str
    run_id: int  # a run where fast failed and base passed (for the diff viewer)
    error_class: str


@dataclass
class WindowReport:
    runs: int
    results: list[PairedResult]
    advice: dict[str, str]
    rates: dict[str, dict[str, Rate]]  # category -> tier -> pooled answers
    benchmarks: dict[str, dict[str, Rate]]  # benchmark (category prefix) -> tier
    tools: ToolMetrics | None
    schema_valid: dict[str, Rate]  # tier -> tool calls whose arguments validate
    errors: dict[str, Counter]  # tier -> error class counts
    losing: list[LosingCase] = field(default_factory=list)
    detectors: dict[str, LossState] = field(default_factory=dict)  # the controlled decision
    # agent category -> tier -> [episodes, requests, prompt tokens, output tokens, model ms]
    agent_spent: dict[str, dict[str, list[float]]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.rates


def _outcomes(
    runs: list[Run], scored_only: bool = True
) -> list[tuple[int, str, str, dict[str, Any]]]:
    """``(run id, tier, case key, outcome)`` of every checked case of these runs, from the
    runs' rollups (``monitor.derived.rollups``: written when a run is summarised, backfilled by
    migration 0012), never from samples: a 30-run window holds tens of thousands of them."""
    rows = (
        RunRollup.objects.filter(run__in=runs, tier__in=("fast", "base"))
        .values_list("run_id", "tier", "cases")
        .order_by("run_id", "tier")
    )
    return [
        (run_id, tier, key, c)
        for run_id, tier, cases in rows
        for key, c in cases.items()
        if c.get("n") or not scored_only
    ]


def window_report(pair: Pair, limit: int = WINDOW_RUNS) -> WindowReport:
    runs = window_runs(pair, limit, "id")
    everything = _outcomes(runs, scored_only=False)  # agent tasks' cost counts unchecked too
    rows = [row for row in everything if row[3].get("n")]
    counts: dict[str, CaseCounts] = {}
    for _, tier, key, c in rows:
        into = counts.setdefault(key, CaseCounts(c["c"]))
        if tier == "fast":
            into.n_fast, into.pass_fast = into.n_fast + c["n"], into.pass_fast + c["p"]
        else:
            into.n_base, into.pass_base = into.n_base + c["n"], into.pass_base + c["p"]
    results = compare(
        counts, alpha=ALPHA, tolerance_points=settings.TIERWATCH_ROUTE_TOLERANCE_POINTS
    )
    detectors = loss_detectors.states(pair)
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    bench: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    errors: dict[str, Counter] = {"fast": Counter(), "base": Counter()}
    schema: dict[str, list[int]] = {"fast": [0, 0], "base": [0, 0]}
    verdicts: dict[str, dict[str, ToolVerdict]] = {"fast": {}, "base": {}}
    by_case_run: dict[str, dict[int, dict[str, bool]]] = defaultdict(lambda: defaultdict(dict))
    err_of: dict[tuple[str, int], str] = {}
    spent: dict[str, dict[str, list[float]]] = defaultdict(dict)
    for _, tier, _, c in everything:
        if "a" in c:
            sums = spent[c["c"]].setdefault(tier, [0, 0, 0, 0, 0.0])
            for i, value in enumerate(c["a"]):
                sums[i] += value
    for run_id, tier, key, c in rows:
        cat = c["c"]
        for table, name in ((totals, cat), (bench, cat.split("/")[0])):
            table[(name, tier)][0] += c["p"]
            table[(name, tier)][1] += c["n"]
        if "e" in c:
            errors[tier].update(c["e"])
        for rep, ok, called, n_calls, n_valid, error in c.get("t", ()):
            schema[tier][0] += n_valid
            schema[tier][1] += n_calls
            verdicts[tier][f"{run_id}:{key}:{rep}"] = ToolVerdict(
                correct=ok,
                called=called,
                n_calls=n_calls,
                n_schema_valid=n_valid,
                error_class=error,
            )
        by_case_run[key][run_id][tier] = c["p"] == c["n"] if tier == "fast" else c["p"] > 0
        if tier == "fast" and c["p"] < c["n"]:
            err_of[(key, run_id)] = c.get("f") or failed_class(c.get("k"))
    losing = []
    for key, cc in counts.items():
        if cc.n_fast and cc.n_base and cc.pass_fast / cc.n_fast < cc.pass_base / cc.n_base:
            run_id = max(
                (
                    run
                    for run, t in by_case_run[key].items()
                    if t.get("fast") is False and t.get("base")
                ),
                default=0,
            )
            losing.append(
                LosingCase(
                    key,
                    cc.category,
                    f"{cc.pass_fast}/{cc.n_fast}",
                    f"{cc.pass_base}/{cc.n_base}",
                    run_id,
                    err_of.get((key, run_id), ""),
                )
            )
    losing.sort(key=lambda x: (x.category, x.key))
    tiers = ("fast", "base")
    tools = tool_metrics(verdicts["fast"], verdicts["base"]) if verdicts["base"] else None
    return WindowReport(
        runs=len(runs),
        results=results,
        advice={
            r.category: routing_advice(
                r, loss_detected=r.category in detectors and detectors[r.category].alarmed
            )
            for r in results
        },
        detectors=detectors,
        rates={
            cat: {t: rate(*totals[(cat, t)]) for t in tiers}
            for cat in sorted({c for c, _ in totals})
        },
        benchmarks={
            b: {t: rate(*bench[(b, t)]) for t in tiers} for b in sorted({b for b, _ in bench})
        },
        tools=tools,
        schema_valid={t: rate(*schema[t]) for t in tiers},
        errors=errors,
        losing=losing,
        agent_spent=dict(spent),
    )
