"""The pair page: its runs, trend charts over its comparable runs, open alerts, and the button
that queues a probe run now."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from evals.served import NEVER_CONFIRMED, never_confirmed
from monitor import selectors
from monitor.derived import page_cache
from monitor.models import RunKind, RunStatus
from monitor.runs import budget
from monitor.runs.steps import RunAlreadyQueued
from monitor.setup import pair_defaults
from monitor.tasks import enqueue_run
from monitor.web import cost, page_figures
from monitor.web.access import ADD_RUN, VIEW_PAIR, requires
from monitor.web.forms import WindowForm
from monitor.web.htmx import render_page, wants_fragment
from monitor.web.worse import usd

ENDED = (RunStatus.DONE, RunStatus.FAILED)


def pair_context(pair, **extra: Any) -> dict[str, Any]:
    runs = selectors.pair_runs(pair)
    # Costs read the listed runs' samples (~0.5 s at 0.3 M samples under load): cached, keyed
    # also by each listed run's status and progress, so a running run's cost stays current.
    costs = page_cache.cached(
        "run-costs",
        pair,
        lambda: budget.runs_costs(pair, runs),
        runs=[(r.id, r.status, r.completed) for r in runs],
    )
    for run in runs:
        run.cost = usd(costs.get(run.id))
    ended = [r for r in runs if r.status in ENDED and r.kind in (RunKind.PROBE, RunKind.AUDIT)]
    every = pair_defaults.schedules(pair.name)
    return {
        "schedule": {k: _every_words(v) for k, v in every.items()},
        "failing": ended[0] if ended and ended[0].status == RunStatus.FAILED else None,
        "pair": pair,
        "simulated": pair.simulated,
        "runs": runs,
        "charts": page_figures.figures("pair", pair),
        "alerts": selectors.open_alerts(pair),
        "polling": selectors.has_active_run(runs),
        "served": served_tier_facts(pair, ended),
        **extra,
    }


def served_tier_facts(pair, runs) -> dict[str, Any]:
    """The fast tier's reported tiers over the listed finished runs (their summaries'
    ``served_tier`` blocks): how many confirmed, were downgraded or said nothing, and the
    note when the vendor never confirmed the expected tier (``evals.served``)."""
    expected = pair.fast.expected_tier
    if not expected:
        return {"expected": ""}
    counts = {"confirmed": 0, "downgraded": 0, "unconfirmed": 0}
    for run in runs:
        block = run.summary_obj.tier("fast").served_tier or {}
        counts["downgraded"] += block.get("n_downgraded") or 0
        counts["confirmed"] += (block.get("n_reported") or 0) - (block.get("n_downgraded") or 0)
        counts["unconfirmed"] += block.get("n_unreported") or 0
    return {
        "expected": expected,
        **counts,
        "note": NEVER_CONFIRMED if never_confirmed(counts) else "",
        "include_downgraded": pair.include_downgraded,
    }


def _every_words(seconds: int | None) -> str:
    if not seconds:
        return ""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            n = seconds // size
            return f"every {n} {unit}{'s' * (n != 1)}" if n != 1 else f"every {unit}"
    return f"every {seconds} s"


@requires(VIEW_PAIR)
@require_GET
def pair_detail(request: HttpRequest, name: str) -> HttpResponse:
    pair = selectors.get_pair_for_user(request.user, name)
    return render_page(
        request,
        "monitor/pair.html",
        "charts",
        pair_context(pair, maintenance_form=WindowForm(), cost_month=cost.context(pair)),
    )


def _refused(request: HttpRequest, pair, exc: RunAlreadyQueued) -> HttpResponse:
    """The button's answer when a probe of the pair waits already: the waiting one, and why.
    htmx swaps only a 2xx answer, so the fragment is a 200; the full page says 409."""
    context = pair_context(pair, queued=exc.run, refused=str(exc))
    response = render_page(request, "monitor/pair.html", "charts", context)
    if not wants_fragment(request):
        response.status_code = 409
    return response


@requires(ADD_RUN)
@require_POST
def run_probe(request: HttpRequest, name: str) -> HttpResponse:
    """Queue a manual probe run of the pair; htmx gets the refreshed live part of the page."""
    pair = selectors.get_pair_for_user(request.user, name)
    try:
        run = enqueue_run(pair=pair)
    except RunAlreadyQueued as exc:
        return _refused(request, pair, exc)
    if not wants_fragment(request):
        return redirect("monitor:run", run_id=run.pk)
    return render(request, "monitor/pair.html#charts", pair_context(pair, queued=run))
