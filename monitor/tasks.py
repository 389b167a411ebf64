"""Celery tasks: thin wrappers that take ids and call a service.

Runs are claimed idempotently inside ``execute_run`` (a redelivered task finds the run claimed
and does nothing, unless its heartbeat is stale: then it takes the run over), so ``acks_late``
is safe. Only named transient errors are retried. ``enqueue_run`` is the one way to start a
run from a page or a command: services never import this module.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import OperationalError
from django.utils import timezone

from monitor.alerting import lifecycle
from monitor.derived import retention, run_end
from monitor.models import BENCHMARK_CASES, Pair, Run, RunKind, RunTrigger
from monitor.reporting import archive, sla
from monitor.runs import pipeline, steps, watchdog

TRANSIENT = (OperationalError, ConnectionError)
log = logging.getLogger(__name__)


def enqueue_run(
    *,
    pair: Pair,
    kind: str = RunKind.PROBE,
    trigger: str = RunTrigger.MANUAL,
    repeat: int | None = None,
) -> Run:
    """Create the run now (``steps.queue_run``: raises ``steps.RunAlreadyQueued`` while one of
    the pair and kind waits); the worker picks it up once the transaction has committed."""
    run = steps.queue_run(pair=pair, kind=kind, trigger=trigger, repeat=repeat)
    send_run(run)
    return run


def send_run(run: Run) -> None:
    """Send the run's task once the transaction has committed, and note when
    (``Run.sent_at``: the watchdog sends a queued run again when its message was lost)."""
    Run.objects.filter(pk=run.pk).update(sent_at=timezone.now())
    execute_run_task.delay_on_commit(run.id, kind=run.kind)  # the kind picks the queue


def escalate_to_audit(pair: Pair) -> Run:
    """A tripwire fired: an MMD audit of the pair, queued at once through the same path as
    "Run now", its trigger saying why; and a capability probe where the pair's suite has
    capability cases (``has_capability_cases``), since a changed model may have lost skills
    the audit's text comparison does not score. A run of the kind already queued is reused."""
    if has_capability_cases(pair):
        try:
            enqueue_run(pair=pair, kind=RunKind.PROBE, trigger=RunTrigger.TRIPWIRE)
        except steps.RunAlreadyQueued:
            pass  # the queued probe measures the same cases
    try:
        return enqueue_run(pair=pair, kind=RunKind.AUDIT, trigger=RunTrigger.TRIPWIRE)
    except steps.RunAlreadyQueued as queued:
        return queued.run


def has_capability_cases(pair: Pair) -> bool:
    """The pair's suite scores capability: benchmark cases or cases with unit tests."""
    cases = pair.suite.cases.all() if pair.suite_id else None
    return cases is not None and (
        cases.filter(BENCHMARK_CASES).exists() or cases.exclude(unit_tests="").exists()
    )


# A run's tasks (measuring, and the sandbox's evaluating): acknowledged only when done, so a
# killed worker's run is redelivered; an hour at most; transient errors retried with backoff.
RUN_TASK = dict(
    acks_late=True,
    soft_time_limit=3300,
    time_limit=3600,
    autoretry_for=TRANSIENT,
    retry_backoff=True,
    max_retries=3,
)


@shared_task(**RUN_TASK)
def execute_run_task(run_id: int, kind: str | None = None) -> int | None:
    """``kind`` only routes the task (monitor.runs.routing); the run row says what it is."""
    run = pipeline.execute_run(
        run_id=run_id,
        notify=notify_task.delay,
        evaluate=evaluate_run_task.delay,
        escalate=escalate_to_audit,
    )
    return run.id if run is not None else None


@shared_task(**RUN_TASK)
def evaluate_run_task(run_id: int) -> int | None:
    """The sandbox queue: a measured run's generated code against its unit tests, then the
    rest of its pipeline (``pipeline.evaluate_run``), apart from the timed probes."""
    run = pipeline.evaluate_run(run_id=run_id, notify=notify_task.delay)
    return run.id if run is not None else None


@shared_task(acks_late=True, time_limit=60)
def probe_pair_task(pair_name: str, kind: str = RunKind.PROBE) -> int | None:
    """The task beat schedules: create a run of the pair now and execute it in a worker."""
    pair = Pair.objects.filter(name=pair_name, active=True).first()
    if pair is None:
        return None
    try:
        return enqueue_run(pair=pair, kind=kind, trigger=RunTrigger.SCHEDULED).id
    except steps.RunAlreadyQueued as exc:  # the one waiting measures the same; skip this tick
        log.info("schedule of %s: %s", pair_name, exc)
        return None


@shared_task(acks_late=True, time_limit=120, autoretry_for=TRANSIENT, max_retries=3)
def notify_task(alert_id: int) -> int:
    """Announce an alert opened or resolved (held in maintenance, silences, flapping)."""
    return len(lifecycle.announce(alert_id=alert_id))


@shared_task(acks_late=True, time_limit=240)
def alert_sweep_task() -> dict[str, int]:
    """Every 5 minutes (``CELERY_BEAT_SCHEDULE``): reminders and escalations now due."""
    return lifecycle.sweep()


@shared_task(acks_late=True, time_limit=600)
def weekly_report_task(week: str | None = None) -> int:
    """Archive the week's report (PDF, CSV), then email it."""
    if week:
        archive.archive_report(week=week)
    else:
        archive.archive_last_period(kind="week")
    return sla.email_weekly_report(week=week)


@shared_task(acks_late=True, time_limit=600)
def monthly_report_task() -> int:
    """Archive the last complete month's report (PDF, CSV); returns the files stored."""
    return len(archive.archive_last_period(kind="month"))


@shared_task(time_limit=50)
def watchdog_task() -> int:
    """Every minute (settings.CELERY_BEAT_SCHEDULE): reap stuck runs, check that each
    scheduled pair is still measured, and record that the watchdog ran (``/health``)."""
    changed = watchdog.run_watchdog(resend=send_run)
    for alert in changed:
        notify_task.delay(alert.id)
    return len(changed)


@shared_task(time_limit=240)
def warm_pages_task() -> int:
    """Every 5 minutes (settings.CELERY_BEAT_SCHEDULE): fill what is missing from every pair's
    page cache and overview cells. A run's end warms its own pair; this refills the cache after
    a Redis restart or eviction, so the first viewer does not pay for a cold page (~0.2 s of
    CPU each; docs/benchmarks.md, "Scale"). When all is warm it reads versions only."""
    pair_ids = list(Pair.objects.values_list("id", flat=True))
    for pair_id in pair_ids:
        run_end.warm(pair_id)
    return len(pair_ids)


@shared_task(acks_late=True, time_limit=300)
def prune_payloads_task() -> int:
    """Beat, hourly: bounded batches for at most ~50 s; the next run continues a backlog."""
    return retention.prune_payloads().rows
