"""Maintenance windows: which apply to a pair at a moment, and marking runs measured in one.

A window applies to a pair when it names the pair, names the host of either endpoint's base
URL (``vendor_host``), or names neither (every pair). A one-off window is active on
[starts_at, ends_at); a recurring one on [start, start + duration) for each start its cron
expression (UTC, read by ``croniter``) yields. Checks keep measuring during a window; the run
is marked ``in_maintenance`` and notifications are held (``alert_lifecycle.hold_reason``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from croniter import croniter
from django.db.models import Q
from django.utils import timezone

from monitor.models import MaintenanceWindow, Pair, Run


def hosts(pair: Pair) -> set[str]:
    return {urlsplit(ep.base_url).hostname or "" for ep in (pair.fast, pair.base)}


def covers(window: MaintenanceWindow, pair: Pair) -> bool:
    if window.pair_id:
        return window.pair_id == pair.pk
    return not window.vendor_host or window.vendor_host in hosts(pair)


def windows_for(pair: Pair) -> list[MaintenanceWindow]:
    """Every window that names this pair, one of its endpoints' hosts, or all pairs."""
    scope = Q(pair=pair) | Q(pair__isnull=True, vendor_host__in=hosts(pair))
    scope |= Q(pair__isnull=True, vendor_host="")
    return list(MaintenanceWindow.objects.filter(scope).order_by("pk"))


def active_by_pair(pairs: Iterable[Pair], at: datetime) -> dict[int, MaintenanceWindow]:
    """For many pairs at once (one query): pair id → its first window active at ``at``."""
    windows = [w for w in MaintenanceWindow.objects.order_by("pk") if occurrence_at(w, at)]
    return {p.pk: w for p in pairs for w in reversed(windows) if covers(w, p)}


def occurrence_at(window: MaintenanceWindow, at: datetime) -> tuple[datetime, datetime] | None:
    """The (start, end) of the window's occurrence that contains ``at``, or None."""
    if not window.cron:
        if window.starts_at and window.ends_at and window.starts_at <= at < window.ends_at:
            return window.starts_at, window.ends_at
        return None
    # croniter's get_prev is strictly before its base; one second later includes a start
    # at exactly ``at`` (cron has minute resolution).
    start = croniter(window.cron, at + timedelta(seconds=1)).get_prev(datetime)
    end = start + timedelta(minutes=window.duration_minutes or 0)
    return (start, end) if start <= at < end else None


def occurrences(
    window: MaintenanceWindow, since: datetime, until: datetime, limit: int = 50
) -> list[tuple[datetime, datetime]]:
    """The window's occurrences overlapping [since, until), oldest first (for the timeline)."""
    if not window.cron:
        if (
            window.starts_at
            and window.ends_at
            and window.starts_at < until
            and window.ends_at > since
        ):
            return [(window.starts_at, window.ends_at)]
        return []
    length = timedelta(minutes=window.duration_minutes or 0)
    found: list[tuple[datetime, datetime]] = []
    it = croniter(window.cron, since - length)
    while len(found) < limit:
        start = it.get_next(datetime)
        if start >= until:
            break
        if start + length > since:
            found.append((start, start + length))
    return found


def active_window(pair: Pair, at: datetime | None = None) -> MaintenanceWindow | None:
    """The first window of the pair active at ``at`` (default now), or None."""
    at = at or timezone.now()
    return next((w for w in windows_for(pair) if occurrence_at(w, at)), None)


def mark_run(*, run_id: int, moments: Iterable[datetime | None] = ()) -> bool:
    """Mark the run as measured in maintenance when a window of its pair was active at its
    creation, its start or now; returns the mark."""
    run = Run.objects.select_related("pair__fast", "pair__base").get(pk=run_id)
    times = [t for t in (run.created_at, run.started_at, timezone.now(), *moments) if t]
    windows = windows_for(run.pair)
    marked = any(occurrence_at(w, t) for w in windows for t in times)
    if marked and not run.in_maintenance:
        Run.objects.filter(pk=run_id).update(in_maintenance=True)
    return marked or run.in_maintenance
