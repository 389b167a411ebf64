"""The one entry point for what a run leaves behind once it has ended: ``record_run_end``.

Every path that ends a run — the pipeline (done or failed), the watchdog (a run nobody owns),
a load probe — calls it once, after its last write to the run. It writes the derived data that
does not depend on how the run ended (the rollups: a failed run's requests still count in
availability), bumps the pair's generation so every cached page of the pair is out of date,
then refreshes the cache through the warmers the web layer registers (``register_warmer``,
called from ``MonitorConfig.ready``), so the first view after a run is served warm and no path
can forget a page. This module imports nothing from the web layer: the registry is how the
derived layer reaches the pages without depending on them.

Why one entry point: before it, five call sites each had to remember to refresh the cache, and
the cache's version was a composite of a Redis-held token and the newest run's id and time —
two of its bugs were an id that came back on SQLite. Now the version is one transactional
column (``Pair.generation``, ``monitor.derived.page_cache``) and its refresh has one caller.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction

from monitor.derived import rollups
from monitor.models import Run, bump_generation

log = logging.getLogger(__name__)

Warmer = Callable[[int], None]
_WARMERS: list[Warmer] = []


def register_warmer(warm: Warmer) -> Warmer:
    """Add ``warm(pair_id)`` to what runs after every run's end (idempotent)."""
    if warm not in _WARMERS:
        _WARMERS.append(warm)
    return warm


def warm(pair_id: int) -> None:
    """Fill every registered page of the pair into the cache; never raises (a view rebuilds on a
    miss). Also what the 5-minute refill task calls, after a cache loss."""
    for warmer in list(_WARMERS):
        try:
            warmer(pair_id)
        except Exception:
            log.exception("cache of pair %s not warmed by %s", pair_id, warmer.__qualname__)


def record_run_end(run_id: int, *, rollups_written: bool = False) -> None:
    """What a run that has ended (done or failed) leaves behind: its rollups from what it
    stored (a failed or reaped run's requests still count in availability; the pipeline's done
    path wrote them already, as a measured step the judging reads, and says so), a new
    generation for its pair, and its pair's pages warmed. Never raises: the run's end is
    already stored, and a view rebuilds whatever is missing."""
    pair_id = Run.objects.filter(id=run_id).values_list("pair_id", flat=True).first()
    if pair_id is None:
        return
    with transaction.atomic():
        if not rollups_written:
            rollups.record_run_safely(run_id=run_id)
        bump_generation([pair_id])
    warm(pair_id)
