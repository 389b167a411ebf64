"""Beat schedules as django-celery-beat rows, created in code and editable in the admin.

``ensure_*`` functions are idempotent: names are stable (``probe:<pair>``), so applying a config
twice updates the rows instead of adding new ones.
"""

from __future__ import annotations

import json
import zlib
from datetime import timedelta

from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from monitor.models import RunKind


def phase_s(name: str, every_s: int) -> int:
    """A stable offset in [0, every_s) from the name: schedules created together still fall due
    spread over the interval, not all at once (a burst of 50 runs at one instant queued for
    up to 9 s P95 on two workers' threads; spread, 0.1 s: docs/benchmarks.md, schedule lag)."""
    return zlib.crc32(name.encode()) % max(1, every_s)


def ensure_interval_task(
    *, name: str, task: str, every_s: int, args: list, enabled: bool = True
) -> PeriodicTask:
    interval, _ = IntervalSchedule.objects.get_or_create(
        every=every_s, period=IntervalSchedule.SECONDS
    )
    defaults = {
        "task": task,
        "interval": interval,
        "crontab": None,
        "args": json.dumps(args),
        "enabled": enabled,
    }
    # Beat counts the interval from last_run_at: a new row's first run comes at its phase.
    first = {"last_run_at": timezone.now() - timedelta(seconds=phase_s(name, every_s))}
    row, _ = PeriodicTask.objects.update_or_create(
        name=name, defaults=defaults, create_defaults={**defaults, **first}
    )
    return row


def ensure_probe_schedule(
    *, pair_name: str, every_s: int, kind: str = RunKind.PROBE, enabled: bool = True
) -> PeriodicTask:
    return ensure_interval_task(
        name=f"{kind}:{pair_name}",
        task="monitor.tasks.probe_pair_task",
        every_s=every_s,
        args=[pair_name, kind],
        enabled=enabled,
    )


TRIPWIRE_EVERY_S = 3600  # the tripwires' default cadence: hourly, a few dozen one-token queries


def ensure_tripwire_schedule(
    *, pair_name: str, every_s: int = TRIPWIRE_EVERY_S, enabled: bool = True
) -> PeriodicTask:
    """The pair's logprob tripwires (``monitor.runs.tripwire``), ``tripwire:<pair>``."""
    return ensure_probe_schedule(
        pair_name=pair_name, every_s=every_s, kind=RunKind.TRIPWIRE, enabled=enabled
    )


def ensure_weekly_report_schedule() -> PeriodicTask:
    """Mondays 07:00 UTC: the previous ISO week's SLA report, archived and emailed; and (one
    call sets up both report schedules) the monthly report on the 1st."""
    ensure_monthly_report_schedule()
    crontab, _ = CrontabSchedule.objects.get_or_create(
        minute="0", hour="7", day_of_week="1", day_of_month="*", month_of_year="*", timezone="UTC"
    )
    row, _ = PeriodicTask.objects.update_or_create(
        name="sla-report:weekly",
        defaults={
            "task": "monitor.tasks.weekly_report_task",
            "crontab": crontab,
            "interval": None,
            "args": "[]",
        },
    )
    return row


def ensure_monthly_report_schedule() -> PeriodicTask:
    """The 1st of each month, 07:30 UTC: the previous month's SLA report, archived."""
    crontab, _ = CrontabSchedule.objects.get_or_create(
        minute="30",
        hour="7",
        day_of_week="*",
        day_of_month="1",
        month_of_year="*",
        timezone="UTC",
    )
    row, _ = PeriodicTask.objects.update_or_create(
        name="sla-report:monthly",
        defaults={
            "task": "monitor.tasks.monthly_report_task",
            "crontab": crontab,
            "interval": None,
            "args": "[]",
        },
    )
    return row


def ensure_retention_schedule(*, every_s: int = 3600) -> PeriodicTask:
    """Hourly: empty the payloads of samples past the retention window
    (``monitor.derived.retention``)."""
    return ensure_interval_task(
        name="retention:payloads",
        task="monitor.tasks.prune_payloads_task",
        every_s=every_s,
        args=[],
    )
