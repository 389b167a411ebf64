"""Celery tasks: thin wrappers that take ids and call a service (docs/architecture.md).

Runs are claimed idempotently inside ``execute_run`` (a redelivered task finds the run no longer
queued and does nothing), so ``acks_late`` is safe. Only named transient errors are retried.
"""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from monitor.models import Pair
from monitor.services import alerts, report_archive, reports, runs

TRANSIENT = (OperationalError, ConnectionError)


@shared_task(
    acks_late=True,
    soft_time_limit=3300,
    time_limit=3600,
    autoretry_for=TRANSIENT,
    retry_backoff=True,
    max_retries=3,
)
def execute_run_task(run_id: int) -> int | None:
    run = runs.execute_run(run_id=run_id)
    if run is None:
        return None
    if run.status == "done":
        for alert in alerts.evaluate_after_run(run_id=run.id):
            notify_task.delay(alert.id)
    return run.id


@shared_task(acks_late=True, time_limit=60)
def probe_pair_task(pair_name: str, kind: str = "probe") -> int | None:
    """The task beat schedules: create a run of the pair now and execute it in this worker."""
    pair = Pair.objects.filter(name=pair_name, active=True).first()
    if pair is None:
        return None
    run = runs.create_run(pair=pair, kind=kind, trigger="scheduled")
    execute_run_task.delay(run.id)
    return run.id


@shared_task(acks_late=True, time_limit=120, autoretry_for=TRANSIENT, max_retries=3)
def notify_task(alert_id: int) -> int:
    return len(alerts.notify(alert_id=alert_id))


@shared_task(acks_late=True, time_limit=600)
def weekly_report_task(week: str | None = None) -> int:
    """Archive the week's report (PDF, CSV), then email it."""
    if week:
        report_archive.archive_report(week=week)
    else:
        report_archive.archive_last_period(kind="week")
    return reports.email_weekly_report(week=week)


@shared_task(acks_late=True, time_limit=600)
def monthly_report_task() -> int:
    """Archive the last complete month's report (PDF, CSV); returns the files stored."""
    return len(report_archive.archive_last_period(kind="month"))
