"""The "Is it worse?" page of a pair: capability per benchmark and category over a window of
probe runs, paired differences with Holm-adjusted p, tool-call decision F1 and schema accuracy,
the cases where the fast tier loses (each linked to the diff viewer), routing advice per
category, and what the runs cost against the pair's daily budget.

Everything is read from the runs' rollups (``monitor.judging.capability``), the pair's stored
loss detectors (``monitor.derived.loss_detectors``) and run summaries; the page runs no
check and reads no sample.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from evals.records import TIERS
from evals.stats.capability_loss import LossState
from monitor import selectors
from monitor.derived import loss_detectors
from monitor.derived.run_summary import Budget
from monitor.judging import capability
from monitor.judging.capability import Rate
from monitor.runs import budget
from monitor.web.access import VIEW_PAIR, requires
from monitor.web.htmx import render_page
from monitor.web.worse_charts import worse_charts

MAX_LOSING_SHOWN = 100
COSTS_SHOWN = 10  # newest runs in the cost table


def pct(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}%"


def rate_cell(r: Rate) -> str:
    """ "62% [48–74%] (31/50)": the pooled pass rate, its Wilson 95% interval and n."""
    if not r.n:
        return "—"
    low, high = 100 * (r.low or 0), 100 * (r.high or 0)
    return f"{pct(r.rate)} [{low:.0f}–{high:.0f}%] ({r.passed}/{r.n})"


def usd(value: float | None) -> str:
    if value is None:
        return "not priced"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def across_words(state: LossState, limit: float) -> str:
    """The table's cell for the controlled decision (the advice sentence says the rest)."""
    if state.alarmed:
        return f"loss detected (run #{state.alarm_run})"
    shown = f"{state.detector:,.0f}" if state.detector >= 100 else f"{state.detector:.3g}"
    return f"none yet: detector {shown} of {limit:,.0f} ({state.runs} runs)"


AGENT = "agent/"  # the categories of multi-turn agent tasks (``evals.benchmarks.bfcl_multi_turn``)


def work_words(category: str) -> str:
    """What a category's work is called in the advice: an agent category's is multi-step
    agent work, which a lead routes as a whole (one agent loop, not one request)."""
    return "multi-step agent work" if category.startswith(AGENT) else "this work"


def advice_for_a_lead(kind: str, r: Any, tolerance: float) -> str:
    """The routing advice in one sentence a team lead acts on; the statistician's sentence
    (``routing_advice``) stays beside it. Why: "undecided" at −50 points and p = 0.00025 read
    as a shrug, when it means "looks worse, keep it on base until the runs confirm it"."""
    diff = r.diff_points or 0.0
    work = work_words(r.category)
    if kind == "keep" and work == "this work":
        return "Send this work to base: the fast tier fails these checks more often, across runs."
    if kind == "keep":
        return (
            f"Keep {work} on base: {diff:+.0f} points, the fast tier fails these tasks more "
            "often, across runs."
        )
    if kind == "route":
        return (
            f"Safe to send {work} to the fast tier: it passes as often as base, "
            f"within {tolerance:.0f} points."
        )
    if r.p_adjusted is not None and r.p_adjusted < r.alpha and diff < 0:
        return (
            f"Keep {work} on base for now: the fast tier looks worse here ({diff:+.0f} "
            "points), and tierwatch reports a loss once the next runs confirm it."
        )
    return f"Keep {work} on base for now: too little evidence yet that the fast tier is as good."


def advice_kind(sentence: str) -> str:
    return sentence.split(" ", 1)[0].lower()  # keep | route | undecided | `cat`: (no advice)


def _budget_context(pair, runs) -> dict[str, Any]:
    latest = next((r for r in runs if r.summary_obj.budget), None)
    block = latest.summary_obj.budget if latest else None
    return {
        "limit": pair.daily_budget_usd,
        "spent_today": usd(budget.spent_today(pair))
        if budget.priced(pair.fast) and budget.priced(pair.base)
        else "not priced",
        "latest": latest,
        "block": block,
        "limited_runs": sum(1 for r in runs if (b := r.summary_obj.budget) and b.limited),
        # today's run whose replies carried the day past the budget (budget.settle said so)
        "over": next(
            (
                r
                for r in runs
                if r.created_at >= budget.day_start()
                and "over budget:" in (r.summary_obj.budget or Budget()).note
            ),
            None,
        ),
    }


def agent_rows(pair, report: capability.WindowReport) -> list[dict[str, Any]]:
    """Per agent category and tier, what one task took on average over the window: requests,
    tokens, model time (its requests' E2E summed) and cost at the endpoint's prices."""
    endpoints = {"fast": pair.fast, "base": pair.base}
    rows = []
    for category, tiers in sorted(report.agent_spent.items()):
        for tier in TIERS:
            if tier not in tiers or not tiers[tier][0]:
                continue
            episodes, requests, prompt, output, model_ms = tiers[tier]
            cost = budget.sample_cost(endpoints[tier], int(prompt), int(output))
            rows.append(
                {
                    "category": category,
                    "tier": tier,
                    "episodes": int(episodes),
                    "requests": f"{requests / episodes:.1f}",
                    "prompt": f"{prompt / episodes:,.0f}",
                    "output": f"{output / episodes:,.0f}",
                    "seconds": f"{model_ms / episodes / 1000:.1f}",
                    "cost": usd(None if cost is None else cost / episodes),
                }
            )
    return rows


def _costs(pair, runs) -> list[tuple[Any, dict[str, str]]]:
    """Each run with its cost per tier and in total, from one read of their rollups
    (``budget.run_cost`` per run re-read the run's pair, its endpoints and its rollups)."""
    costs = budget.runs_costs_by_tier(pair, runs)
    return [(r, {k: usd(v) for k, v in costs[r.id].items()}) for r in runs]


def worse_context(pair) -> dict[str, Any]:
    report = capability.window_report(pair)
    runs = capability.window_runs(pair)
    limit = loss_detectors.threshold(pair)
    results = [
        {
            "r": r,
            "advice": report.advice[r.category],
            "kind": advice_kind(report.advice[r.category]),
            "lead": advice_for_a_lead(
                advice_kind(report.advice[r.category]),
                r,
                settings.TIERWATCH_ROUTE_TOLERANCE_POINTS,
            ),
            "across": across_words(report.detectors.get(r.category, LossState()), limit),
            "fast": rate_cell(report.rates[r.category]["fast"]),
            "base": rate_cell(report.rates[r.category]["base"]),
        }
        for r in report.results
    ]
    tools = report.tools
    return {
        "pair": pair,
        "simulated": pair.simulated,
        "report": report,
        "results": results,
        "benchmarks": [
            (b, rate_cell(t["fast"]), rate_cell(t["base"])) for b, t in report.benchmarks.items()
        ],
        "tools": tools,
        "decision": {
            "f1": pct(tools.decision_f1, 1),
            "precision": pct(tools.decision_precision, 1),
            "recall": pct(tools.decision_recall, 1),
        }
        if tools
        else None,
        "tool_rows": [
            ("correct calls", pct(tools.accuracy_fast, 1), pct(tools.accuracy_base, 1)),
            (
                "schema accuracy: calls whose arguments validate",
                rate_cell(report.schema_valid["fast"]),
                rate_cell(report.schema_valid["base"]),
            ),
        ]
        if tools
        else [],
        "errors": [
            (cls, report.errors["fast"].get(cls, 0), report.errors["base"].get(cls, 0))
            for cls in sorted(set(report.errors["fast"]) | set(report.errors["base"]))
        ],
        "losing": report.losing[:MAX_LOSING_SHOWN],
        "losing_more": max(0, len(report.losing) - MAX_LOSING_SHOWN),
        "charts": worse_charts(report),
        "costs": _costs(pair, runs[:COSTS_SHOWN]),
        "agent_rows": agent_rows(pair, report),
        "budget": _budget_context(pair, runs),
        "window": capability.WINDOW_RUNS,
        "loss_budget": loss_detectors.budget_words(pair),
        "tolerance": f"{settings.TIERWATCH_ROUTE_TOLERANCE_POINTS:g}",
    }


@require_GET
@requires(VIEW_PAIR)
def worse_page(request: HttpRequest, name: str) -> HttpResponse:
    pair = selectors.get_pair_for_user(request.user, name)
    return render_page(request, "monitor/worse.html", "live", worse_context(pair))
