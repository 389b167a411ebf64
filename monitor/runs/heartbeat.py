"""Liveness of a running run: who owns it, that its owner is alive, and storing through a
database restart.

A claim is one conditional UPDATE (healthchecks' ``filter(...).update(...)`` idiom), so two
deliveries of one task never both run it. A ``running`` run whose heartbeat is older than
``TIERWATCH_STALE_AFTER_S`` counts as abandoned: a re-delivered task (``acks_late``) may claim it
again, and the claim bumps ``Run.attempt``. Each beat of the owner is conditional on its attempt,
so a worker that was only slow, not dead, learns on its next beat that the run is no longer its
own and stops (``RunLost``) instead of writing beside the new owner.

A run whose generated code must run in the sandbox is handed off after its timed requests
(``hand_off``: status ``evaluating``, no heartbeat) and claimed again by a sandbox worker
(``claim_evaluation``), which then beats like the measuring worker did. ``evaluation_lost``
says when such a run is stuck: claimed and silent past the stale limit, or never claimed
within ``TIERWATCH_QUEUED_STALE_S`` (no worker consumes the sandbox queue).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.db.models import F, Q
from django.utils import timezone

from monitor.models import Run, RunStatus

log = logging.getLogger(__name__)

T = TypeVar("T")
DB_LOST = (OperationalError, InterfaceError)  # the server went away, or the socket did


class RunLost(Exception):
    """The run was reaped or taken over by another delivery while this worker measured it."""


def stale_before(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) - timedelta(seconds=settings.TIERWATCH_STALE_AFTER_S)


def abandoned(now: datetime | None = None) -> Q:
    """Running, but silent for longer than the stale limit (never beat: since it started)."""
    cutoff = stale_before(now)
    return Q(status=RunStatus.RUNNING) & (
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, started_at__lt=cutoff)
    )


def evaluation_lost(now: datetime | None = None) -> Q:
    """Evaluating, but its sandbox worker went silent, or none took it in time."""
    now = now or timezone.now()
    waited = now - timedelta(seconds=settings.TIERWATCH_QUEUED_STALE_S)
    return Q(status=RunStatus.EVALUATING) & (
        Q(heartbeat_at__lt=stale_before(now)) | Q(heartbeat_at__isnull=True, measured_at__lt=waited)
    )


def claim(run_id: int) -> int | None:
    """Take a queued run, or an abandoned running one; the new attempt number, or None when
    the run is done, failed, gone, or alive in another worker."""
    now = timezone.now()
    claimable = Q(status=RunStatus.QUEUED) | abandoned(now)
    taken = Run.objects.filter(claimable, id=run_id).update(
        status=RunStatus.RUNNING, started_at=now, heartbeat_at=now, attempt=F("attempt") + 1
    )
    if not taken:
        return None
    return Run.objects.filter(id=run_id).values_list("attempt", flat=True).first()


def hand_off(run_id: int, attempt: int) -> bool:
    """Measured: the run waits for a sandbox worker (``evaluating``, no heartbeat until one
    claims it). False when the run was no longer this attempt's to hand off."""
    return bool(
        Run.objects.filter(id=run_id, status=RunStatus.RUNNING, attempt=attempt).update(
            status=RunStatus.EVALUATING, measured_at=timezone.now(), heartbeat_at=None
        )
    )


def claim_evaluation(run_id: int) -> int | None:
    """Take a handed-off run for its sandbox step: not claimed yet, or abandoned by the sandbox
    worker that claimed it (a redelivered task). The new attempt number, or None."""
    now = timezone.now()
    claimable = Q(status=RunStatus.EVALUATING) & (
        Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=stale_before(now))
    )
    taken = Run.objects.filter(claimable, id=run_id).update(
        heartbeat_at=now, attempt=F("attempt") + 1
    )
    if not taken:
        return None
    return Run.objects.filter(id=run_id).values_list("attempt", flat=True).first()


def beat(run: Run) -> None:
    """Record that the owner of ``run`` is alive. Raises ``RunLost`` when the run is no longer
    this attempt's; a database that is down is logged and left to the next beat."""
    try:
        alive = Run.objects.filter(
            id=run.id, status__in=(RunStatus.RUNNING, RunStatus.EVALUATING), attempt=run.attempt
        ).update(heartbeat_at=timezone.now())
    except DB_LOST as exc:
        log.warning("run %s: heartbeat not stored (%s); retrying later", run.id, exc)
        connection.close()  # the next query opens a new connection
        return
    if not alive:
        raise RunLost(f"run {run.id} attempt {run.attempt} was reaped or taken over")


def store_once(
    save: Callable[[], T],
    stored: Callable[[], T | None],
    retry_s: float | None = None,
    look_first: bool = False,
) -> T:
    """Call ``save``; when the connection is lost, reconnect with backoff for up to ``retry_s``
    (default ``TIERWATCH_DB_RETRY_S``) and try again, unless ``stored`` finds that the lost
    attempt had committed after all (its reply lost with the connection): one row, never two.
    ``look_first``: the same look before the first try (an earlier call lost its reply)."""
    retry_s = settings.TIERWATCH_DB_RETRY_S if retry_s is None else retry_s
    deadline = time.monotonic() + retry_s
    delay, retried = 0.2, look_first
    while True:
        try:
            if retried and (found := stored()) is not None:
                return found
            return save()
        except DB_LOST as exc:
            if time.monotonic() + delay > deadline:
                raise
            log.warning("database lost while storing (%s); retrying in %.1f s", exc, delay)
            connection.close()
            time.sleep(delay)
            delay, retried = min(2 * delay, 5.0), True


class DatabaseUnavailable(Exception):
    """The database did not answer for ``TIERWATCH_DB_OUTAGE_S``: the run fails saying so (its
    worker is alive; "worker lost" would send the operator to the wrong machine)."""


def database_answers() -> bool:
    """One ``SELECT 1`` on a fresh connection if the last one was lost."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except DB_LOST:
        connection.close()
        return False


def until_database_returns(since: float, what: str) -> None:
    """Wait, polling with backoff, until the database answers; raise ``DatabaseUnavailable``
    once it has been silent ``TIERWATCH_DB_OUTAGE_S`` since ``since`` (``time.monotonic()``),
    naming ``what`` is waiting."""
    delay = 0.2
    while not database_answers():
        silent = time.monotonic() - since
        if silent + delay > settings.TIERWATCH_DB_OUTAGE_S:
            raise DatabaseUnavailable(
                f"database unavailable: it did not answer for {silent:.0f} s "
                f"(limit {settings.TIERWATCH_DB_OUTAGE_S:.0f} s); {what}"
            )
        time.sleep(delay)
        delay = min(2 * delay, 5.0)
