"""Which Celery queue each task goes to, so a slow report or audit never delays a probe.

Queues: ``probes`` (scheduled and manual temperature-0 runs: their timed requests), ``sandbox``
(a probe's generated code against its unit tests, after its timed requests, then the rest of its
pipeline: ``monitor.runs.pipeline.evaluate_run``), ``audits`` (temperature-1 audit runs:
hundreds of requests and the verdict's statistics), ``reports`` (alert notifications, the weekly
report, retention, the page cache's refill). Workers subscribe with ``-Q``; one worker may
serve several queues, and every machine's workers share one PostgreSQL and one Redis.
Configured as ``CELERY_TASK_ROUTES`` in settings.
"""

from __future__ import annotations

from typing import Any

PROBES, SANDBOX, AUDITS, REPORTS = "probes", "sandbox", "audits", "reports"
QUEUES = (PROBES, SANDBOX, AUDITS, REPORTS)
BY_NAME = {
    "monitor.tasks.evaluate_run_task": SANDBOX,
    "monitor.tasks.notify_task": REPORTS,
    "monitor.tasks.weekly_report_task": REPORTS,
    "monitor.tasks.prune_payloads_task": REPORTS,
    "monitor.tasks.monthly_report_task": REPORTS,
    "monitor.tasks.watchdog_task": REPORTS,
    "monitor.tasks.warm_pages_task": REPORTS,
}


def queue_for_kind(kind: str | None) -> str:
    return AUDITS if kind == "audit" else PROBES


def route_task(
    name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **_: Any
) -> dict[str, str] | None:
    """Celery router: a run's queue follows its kind (``kind`` keyword of execute_run_task,
    second argument of probe_pair_task); other tasks by name; None leaves Celery's default."""
    if name == "monitor.tasks.execute_run_task":
        return {"queue": queue_for_kind((kwargs or {}).get("kind"))}
    if name == "monitor.tasks.probe_pair_task":
        kind = (kwargs or {}).get("kind") or (args[1] if args and len(args) > 1 else None)
        return {"queue": queue_for_kind(kind)}
    queue = BY_NAME.get(name)
    return {"queue": queue} if queue else None
