"""Celery tasks: thin wrappers that take ids and call a service (STYLE.md).

Runs are claimed idempotently inside ``execute_run`` (a redelivered task finds the run no longer
queued and does nothing), so ``acks_late`` is safe. Only named transient errors are retried.
"""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from monitor.models import Pair
from monitor.services import alerts, reports, runs

TRANSIENT = (OperationalError, ConnectionError)


@shared_task(
    acks_late=True,
    soft_time_limit=3300,
    time_limit=3600,
    autoretry_for=TRANSIENT,
    retry_backoff=True,
    max_retries=3,
)
def execute_run_task(run_id: int, kind: str | None = None) -> int | None:
    """``kind`` only routes the task (monitor.routing); the run row says what it is."""
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
    execute_run_task.delay(run.id, kind=run.kind)
    return run.id


@shared_task(acks_late=True, time_limit=120, autoretry_for=TRANSIENT, max_retries=3)
def notify_task(alert_id: int) -> int:
    return len(alerts.notify(alert_id=alert_id))


@shared_task(acks_late=True, time_limit=600)
def weekly_report_task(week: str | None = None) -> int:
    return reports.email_weekly_report(week=week)


@shared_task(acks_late=True, time_limit=300)
def prune_payloads_task() -> int:
    """Beat, hourly: bounded batches for at most ~50 s; the next run continues a backlog."""
    from monitor.retention import prune_payloads

    return prune_payloads().rows
