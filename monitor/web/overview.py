"""The overview page: every pair with its status, newest verdict, TTFT trend, newest run and
the numbers of its newest comparable finished run (TTFT P95, speed-ups, similarity beside its
noise floor, pass rates).

A pair's status, the first that applies in this order:

- **maintenance** — a maintenance window of the pair is active now (checks still run;
  notifications are held).
- **alerting** — it has an open alert (firing, acknowledged or silenced).
- **stale** — it has a probe schedule but no finished run within twice the schedule's
  interval (or none at all): the monitor itself is not measuring.
- **degraded** — no alert, but its newest comparable run shows a problem: a tracked drift
  series is drifting, either tier's availability is below ``DEGRADED_AVAILABILITY``, or its
  newest audit verdict is "different model".
- **ok** — none of these; **no data** — no finished run and no schedule (a new pair).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from django_celery_beat.models import PeriodicTask

from monitor import selectors
from monitor.models import Run, RunKind, RunStatus
from monitor.run_summary import RunSummary
from monitor.services import maintenance
from monitor.web import sparkline
from monitor.web.cells import NO_DATA, fraction, percentile, similarity, speedup
from monitor.web.htmx import render_page

TIERS = ("fast", "base")
DEGRADED_AVAILABILITY = 0.99


def probe_interval(pair_name: str) -> timedelta | None:
    """The pair's probe schedule interval (an enabled interval schedule), or None."""
    task = (PeriodicTask.objects.filter(name=f"probe:{pair_name}", enabled=True)
            .select_related("interval").first())
    if task is None or task.interval is None:
        return None
    return timedelta(**{task.interval.period: task.interval.every})


def latest_verdict(item: selectors.PairOverview) -> tuple[str, str, int | None]:
    """(label, sentence, run id) of the pair's newest audit verdict, or ("", "", None)."""
    run = (Run.objects.filter(pair=item.pair, kind=RunKind.AUDIT, status=RunStatus.DONE)
           .only("id", "summary").order_by("-created_at", "-id").first())
    v = run.summary_obj.verdict if run else None
    return (v.label, v.sentence, run.pk) if v else ("", "", None)


def status(item: selectors.PairOverview, verdict_label: str, now: datetime) -> tuple[str, str]:
    """(status, why) by the rules in the module docstring."""
    window = maintenance.active_window(item.pair, now)
    if window:
        return "maintenance", window.reason
    if item.open_alerts:
        return "alerting", f"{item.open_alerts} open alert{'s' * (item.open_alerts != 1)}"
    interval = probe_interval(item.pair.name)
    done = item.last_done
    finished = (done.finished_at or done.created_at) if done else None
    if interval and (finished is None or now - finished > 2 * interval):
        return "stale", (f"no finished probe since {finished:%Y-%m-%d %H:%M} UTC" if finished
                         else "no finished probe yet") + f" (schedule every {interval})"
    if done is None:
        return "no data", "no finished probe run and no schedule"
    summary = done.summary_obj
    if summary.drift and summary.drift.drifting:
        return "degraded", "drifting: " + ", ".join(summary.drift.drifting)
    low = [t for t in TIERS if t in summary.tiers and summary.tier(t).availability is not None
           and summary.tier(t).availability < DEGRADED_AVAILABILITY]
    if low:
        return "degraded", f"availability below {DEGRADED_AVAILABILITY:.0%}: {', '.join(low)}"
    if verdict_label == "different_model":
        return "degraded", "newest audit: different model"
    return "ok", ""


def overview_row(item: selectors.PairOverview, now: datetime | None = None) -> dict[str, Any]:
    summary = item.last_done.summary_obj if item.last_done else RunSummary()
    tiers = [summary.tiers.get(t) for t in TIERS]
    label, sentence, verdict_run = latest_verdict(item)
    state, why = status(item, label, now or timezone.now())
    trend = sparkline.ttft_trend(item.pair)
    return {
        "item": item,
        "status": state,
        "status_why": why,
        "verdict_label": label.replace("_", " "),
        "verdict_sentence": sentence,
        "verdict_run": verdict_run,
        "spark": sparkline.svg(trend),
        "spark_runs": trend.n_runs,
        "spark_last": [sparkline.ms(trend.last(t)) for t in TIERS],
        "ttft_p95": [percentile(t.ttft_ms, "p95", summary.min_n) if t else NO_DATA
                     for t in tiers],
        "speedup_ttft": speedup(summary.speedup.ttft),
        "speedup_e2e": speedup(summary.speedup.e2e),
        "sim_fast_base": similarity(summary.similar("fast_vs_base")),
        "sim_base_base": similarity(summary.similar("base_vs_base")),
        "pass_rate": [fraction(t.pass_rate, t.n_tested) if t else NO_DATA for t in tiers],
    }


@login_required
@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    rows = [overview_row(item) for item in selectors.pairs_overview()]
    return render_page(request, "monitor/overview.html", "table", {"rows": rows})
