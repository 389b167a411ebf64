"""The overview page: every pair with its status, newest verdict, TTFT trend, newest run, its
TTFT P95 over the last ``overview_cells.P95_WINDOW`` (merged from the comparable runs' rollup
sketches: one run of 20 samples never reaches P95's minimum n of 59, a day of runs does), the
numbers of its newest comparable finished run (speed-ups, similarity beside its noise floor,
pass rates), and the "outputs differ" flag from e-BH over every pair's evidence across audits
(false discovery rate ≤ 5% over the flags shown). The verdict, trend and windowed P95 come
from each pair's cached cells (``monitor.web.overview_cells``); the rest is read on every view.

A pair's status, the first that applies in this order:

- **maintenance** — a maintenance window of the pair is active now (checks still run;
  notifications are held).
- **failing** — its newest probe or audit that ended failed: the run's error says what
  failed ("fast tier: HTTP 401: …", "vendor unreachable"), in red, until a run is done again.
- **alerting** — it has an open alert (firing, acknowledged or silenced).
- **new** — it has a probe schedule and its first probe is due or running.
- **stale** — it has a probe schedule but no finished run within twice the schedule's
  interval (counted from its first run while none finished): the monitor itself is not
  measuring.
- **degraded** — no alert, but its newest comparable run shows a problem: its CUSUM is in
  drift against the frozen baseline, either tier's availability is below
  ``DEGRADED_AVAILABILITY``, or e-BH across pairs flags its outputs as differing.
- **ok** — none of these; **no data** — no finished run and no schedule (a new pair).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from django_celery_beat.models import PeriodicTask

from monitor import selectors
from monitor.alerting import maintenance
from monitor.derived import evidence
from monitor.derived.evidence import every_words
from monitor.models import MaintenanceWindow
from monitor.web import overview_answers as answers
from monitor.web import overview_cells
from monitor.web.access import VIEW_PAIR, requires
from monitor.web.htmx import render_page
from monitor.web.overview_cells import TIERS, Measured

DEGRADED_AVAILABILITY = 0.99


def schedule_intervals(names: Sequence[str]) -> dict[str, dict[str, timedelta]]:
    """Kind ("probe", "audit", "tripwire") → pair name → its enabled schedule's interval (one
    query)."""
    kinds = ("probe", "audit", "tripwire")
    tasks = PeriodicTask.objects.filter(
        name__in=[f"{k}:{n}" for k in kinds for n in names], enabled=True, interval__isnull=False
    ).select_related("interval")
    out: dict[str, dict[str, timedelta]] = {k: {} for k in kinds}
    for t in tasks:
        kind, name = t.name.split(":", 1)
        out[kind][name] = timedelta(**{t.interval.period: t.interval.every})
    return out


@dataclass(frozen=True)
class Context:
    """What the statuses of all pairs need, read once for the page."""

    now: datetime
    windows: dict[int, MaintenanceWindow]
    intervals: dict[str, timedelta]
    audit_intervals: dict[str, timedelta]
    tripwire_intervals: dict[str, timedelta]
    measured: dict[int, Measured]  # verdict, trend, windowed P95: cached per pair
    differs: dict[int, bool]  # e-BH across the pairs shown

    @classmethod
    def read(cls, items: Sequence[selectors.PairOverview]) -> Context:
        now = timezone.now()
        pairs = [i.pair for i in items]
        newest = [(i.pair, i.last_done) for i in items]
        every = schedule_intervals([p.name for p in pairs])
        return cls(
            now=now,
            windows=maintenance.active_by_pair(pairs, now),
            intervals=every["probe"],
            audit_intervals=every["audit"],
            tripwire_intervals=every["tripwire"],
            measured=overview_cells.measured(newest, now),
            differs=evidence.differs_across_pairs(pairs),
        )


def status(item: selectors.PairOverview, ctx: Context) -> tuple[str, str]:
    """(status, why) by the rules in the module docstring."""
    window = ctx.windows.get(item.pair.pk)
    if window:
        return "maintenance", window.reason
    failed = item.failing
    if failed is not None:
        return "failing", f"run #{failed.pk}: {failed.error or 'failed'}"
    if item.open_alerts:
        return "alerting", f"{item.open_alerts} open alert{'s' * (item.open_alerts != 1)}"
    interval = ctx.intervals.get(item.pair.name)
    done = item.last_done
    finished = (done.finished_at or done.created_at) if done else None
    if interval and finished is None and item.last_run is None:
        every = every_words(int(interval.total_seconds()))
        return "new", f"its first scheduled probe is due (probes {every})"
    first = item.last_run.created_at if item.last_run else None  # its first run, still going
    if interval and ctx.now - (finished or first) > 2 * interval:  # type: ignore[operator]
        return "stale", (
            f"no finished probe since {finished:%Y-%m-%d %H:%M} UTC"
            if finished
            else "no finished probe yet"
        ) + f" (probes {every_words(int(interval.total_seconds()))})"
    if done is None:
        if interval:
            return "new", "its first probe is running"
        tripwires = ctx.tripwire_intervals.get(item.pair.name)
        if tripwires:  # watched for a change, but nothing measures its speed
            every = every_words(int(tripwires.total_seconds()))
            return "no data", f"no probe schedule: only its tripwires run ({every})"
        return "no data", "no finished probe run and no schedule: it never runs on its own"
    cells = ctx.measured[item.pair.pk]
    if cells.drifting:
        return "degraded", "drift against the frozen baseline: " + ", ".join(cells.drifting)
    low = [t for t in TIERS if cells.availability.get(t, 1.0) < DEGRADED_AVAILABILITY]
    if low:
        return "degraded", f"availability below {DEGRADED_AVAILABILITY:.0%}: {', '.join(low)}"
    if ctx.differs.get(item.pair.pk):
        return "degraded", "outputs differ across audits (e-BH over the pairs)"
    return "ok", ""


def overview_row(item: selectors.PairOverview, ctx: Context) -> dict[str, Any]:
    state, why = status(item, ctx)
    cells = ctx.measured[item.pair.pk]
    name = item.pair.name
    return {
        "item": item,
        "differs": ctx.differs.get(item.pair.pk, False),
        "status": state,
        "status_why": why,
        "cells": cells,
        "same": answers.same_model(cells, ctx.audit_intervals.get(name), ctx.now),
        "faster": answers.faster(cells),
        "changed": answers.changed(cells, ctx.intervals.get(name), ctx.now),
    }


@requires(VIEW_PAIR)
@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    items = selectors.pairs_overview()
    ctx = Context.read(items)
    rows = [overview_row(item, ctx) for item in items]
    return render_page(request, "monitor/overview.html", "table", {"rows": rows})
