"""The pair page: its runs, trend charts over its comparable runs, open alerts, and the button
that queues a probe run now."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

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
from monitor.web.pair_charts import pair_charts
from monitor.web.worse import usd

ENDED = (RunStatus.DONE, RunStatus.FAILED)


def pair_context(pair, view: RunsView | None = None, **extra: Any) -> dict[str, Any]:
    view = view or RunsView()
    runs, older = selectors.pair_runs_between(pair, view.since, view.until, view.page)
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
        "charts": _range_charts(pair, view) if view.ranged else page_figures.figures("pair", pair),
        "alerts": selectors.open_alerts(pair),
        "served": served_tier_facts(pair, ended),
        "polling": selectors.has_active_run(runs) and not view.chosen,
        "view": view,
        "older_query": view.query(view.page + 1) if older else "",
        "newer_query": view.query(view.page - 1) if view.page > 1 else None,
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


@dataclass(frozen=True)
class RunsView:
    """The pair page's range and page of runs: ``?since=YYYY-MM-DD&until=YYYY-MM-DD&page=N``
    (until inclusive, UTC). Without them the page shows the newest 50 runs and the cached
    charts, as before; with a range the charts draw the range's runs (at most
    ``selectors.RANGE_RUNS_MAX``, the newest)."""

    since: datetime | None = None
    until: datetime | None = None  # exclusive: the day after the chosen last day
    page: int = 1
    errors: tuple[str, ...] = ()
    since_text: str = ""
    until_text: str = ""

    @property
    def ranged(self) -> bool:
        return self.since is not None or self.until is not None

    @property
    def chosen(self) -> bool:
        return self.ranged or self.page > 1

    def query(self, page: int) -> str:
        """The query string of another page of the same range."""
        params = {"since": self.since_text, "until": self.until_text, "page": str(page)}
        return urlencode({k: v for k, v in params.items() if v and v != "1"})

    @classmethod
    def parse(cls, get: Any) -> RunsView:
        errors = []
        bounds: dict[str, datetime | None] = {}
        for key in ("since", "until"):
            text = (get.get(key) or "").strip()
            bounds[key] = None
            if text:
                try:
                    day = date.fromisoformat(text)
                except ValueError:
                    errors.append(f"{key}: {text!r} is not a date (YYYY-MM-DD)")
                    continue
                start = datetime.combine(day, time.min, tzinfo=UTC)
                bounds[key] = start + timedelta(days=1) if key == "until" else start
        raw_page = (get.get("page") or "1").strip()
        page = int(raw_page) if raw_page.isdigit() and int(raw_page) >= 1 else 1
        if raw_page != str(page):
            errors.append(f"page: {raw_page!r} is not a page number (1, 2, …)")
        return cls(
            since=bounds["since"],
            until=bounds["until"],
            page=page,
            errors=tuple(errors),
            since_text=(get.get("since") or "").strip() if bounds["since"] else "",
            until_text=(get.get("until") or "").strip() if bounds["until"] else "",
        )


def _range_charts(pair, view: RunsView) -> list:
    """The charts over a chosen range: not cached (any range may be asked for once)."""
    runs = selectors.pair_trend_runs_between(pair, view.since, view.until)
    return pair_charts(
        runs, simulated=pair.simulated, sketches=selectors.run_sketches(r.id for r in runs)
    )


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
    view = RunsView.parse(request.GET)
    return render_page(
        request,
        "monitor/pair.html",
        "charts",
        pair_context(pair, view, maintenance_form=WindowForm(), cost_month=cost.context(pair)),
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
