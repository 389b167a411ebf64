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
- **alerting** — it has an open alert (firing, acknowledged or silenced).
- **stale** — it has a probe schedule but no finished run within twice the schedule's
  interval (or none at all): the monitor itself is not measuring.
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

from evals.latency import MIN_N
from monitor import selectors
from monitor.models import MaintenanceWindow
from monitor.run_summary import RunSummary
from monitor.services import maintenance, monitoring
from monitor.web import overview_cells
from monitor.web.access import VIEW_PAIR, requires
from monitor.web.cells import NO_DATA, Cell, fraction, percentile, similarity, speedup
from monitor.web.htmx import render_page
from monitor.web.overview_cells import TIERS, Measured

DEGRADED_AVAILABILITY = 0.99


def probe_intervals(names: Sequence[str]) -> dict[str, timedelta]:
    """Pair name → its enabled probe schedule's interval (one query)."""
    tasks = (PeriodicTask.objects.filter(name__in=[f"probe:{n}" for n in names], enabled=True,
                                         interval__isnull=False).select_related("interval"))
    return {t.name.removeprefix("probe:"): timedelta(**{t.interval.period: t.interval.every})
            for t in tasks}


def ttft_p95_cell(cells: Measured, tier: str, summary: RunSummary) -> Cell:
    """The windowed P95 with its n; without a run in the window, the newest run's own."""
    stat = cells.window.get(tier)
    if stat and stat["n"]:
        return percentile(stat, "p95", MIN_N)
    t = summary.tiers.get(tier)
    return percentile(t.ttft_ms, "p95", summary.min_n) if t else NO_DATA


@dataclass(frozen=True)
class Context:
    """What the statuses of all pairs need, read once for the page."""

    now: datetime
    windows: dict[int, MaintenanceWindow]
    intervals: dict[str, timedelta]
    measured: dict[int, Measured]  # verdict, trend, windowed P95: cached per pair
    differs: dict[int, bool]  # e-BH across the pairs shown

    @classmethod
    def read(cls, items: Sequence[selectors.PairOverview]) -> Context:
        now = timezone.now()
        pairs = [i.pair for i in items]
        newest = {i.pair.pk: i.last_done.pk if i.last_done else None for i in items}
        return cls(now=now, windows=maintenance.active_by_pair(pairs, now),
                   intervals=probe_intervals([p.name for p in pairs]),
                   measured=overview_cells.measured(newest, now),
                   differs=monitoring.differs_across_pairs(pairs))


def status(item: selectors.PairOverview, ctx: Context) -> tuple[str, str]:
    """(status, why) by the rules in the module docstring."""
    window = ctx.windows.get(item.pair.pk)
    if window:
        return "maintenance", window.reason
    if item.open_alerts:
        return "alerting", f"{item.open_alerts} open alert{'s' * (item.open_alerts != 1)}"
    interval = ctx.intervals.get(item.pair.name)
    done = item.last_done
    finished = (done.finished_at or done.created_at) if done else None
    if interval and (finished is None or ctx.now - finished > 2 * interval):
        return "stale", (f"no finished probe since {finished:%Y-%m-%d %H:%M} UTC" if finished
                         else "no finished probe yet") + f" (schedule every {interval})"
    if done is None:
        return "no data", "no finished probe run and no schedule"
    summary = done.summary_obj
    if summary.drift and summary.drift.state == "drift":
        return "degraded", "drift against the frozen baseline: " + ", ".join(
            summary.drift.drifting)
    low = [t for t in TIERS if t in summary.tiers and summary.tier(t).availability is not None
           and summary.tier(t).availability < DEGRADED_AVAILABILITY]
    if low:
        return "degraded", f"availability below {DEGRADED_AVAILABILITY:.0%}: {', '.join(low)}"
    if ctx.differs.get(item.pair.pk):
        return "degraded", "outputs differ across audits (e-BH over the pairs)"
    return "ok", ""


def overview_row(item: selectors.PairOverview, ctx: Context) -> dict[str, Any]:
    summary = item.last_done.summary_obj if item.last_done else RunSummary()
    tiers = [summary.tiers.get(t) for t in TIERS]
    cells = ctx.measured[item.pair.pk]
    label, sentence, verdict_run = cells.verdict
    state, why = status(item, ctx)
    return {
        "item": item,
        "differs": ctx.differs.get(item.pair.pk, False),
        "status": state,
        "status_why": why,
        "verdict_label": label.replace("_", " "),
        "verdict_sentence": sentence,
        "verdict_run": verdict_run,
        "spark": cells.spark,
        "spark_runs": cells.spark_runs,
        "spark_last": cells.spark_last,
        "ttft_p95": [ttft_p95_cell(cells, t, summary) for t in TIERS],
        "speedup_ttft": speedup(summary.speedup.ttft),
        "speedup_e2e": speedup(summary.speedup.e2e),
        "sim_fast_base": similarity(summary.similar("fast_vs_base")),
        "sim_base_base": similarity(summary.similar("base_vs_base")),
        "pass_rate": [fraction(t.pass_rate, t.n_tested) if t else NO_DATA for t in tiers],
    }


@requires(VIEW_PAIR)
@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    items = selectors.pairs_overview()
    ctx = Context.read(items)
    rows = [overview_row(item, ctx) for item in items]
    return render_page(request, "monitor/overview.html", "table", {"rows": rows})
