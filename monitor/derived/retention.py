"""Retention of raw sample payloads: text, reasoning, chunk gaps, tokens per chunk, logprobs,
headers, server timings and an agent request's tool calls and results are emptied once older
than ``TIERWATCH_RETENTION_DAYS`` (default 30); the timing columns, the error class, the test
outcome and everything in runs, summaries, rollups and provenance events stay for good.

Exempt: the samples of each pair's newest ``TIERWATCH_RETENTION_KEEP_AUDITS`` audit runs
(default 4): the verdict page's diff viewer and a re-computed verdict read their texts.

Rows are emptied in bounded batches (``batch_size`` ids per UPDATE, each its own transaction)
found through a partial index on ``started_at`` of the not-yet-pruned rows, so a batch never
scans what was pruned before and a long backlog never holds a long lock. ``prune_payloads``
stops after ``max_seconds`` and the hourly beat task picks up the rest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from monitor.models import Pair, Run, RunKind, Sample

# Each payload column and its emptied value (the column's own default: no NULL in a list field).
EMPTY: dict[str, object] = {
    "text": "", "reasoning_text": "", "chunk_gaps_ms": [], "chunk_tokens": [], "headers": {},
    "logprobs": None, "server_timings": None, "tests_detail": None, "calls": None,
}  # fmt: skip


@dataclass
class PruneResult:
    rows: int
    batches: int
    seconds: float
    done: bool  # False when it stopped at max_seconds with rows left

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def exempt_runs(keep_audits: int) -> list[int]:
    """The newest ``keep_audits`` audit runs of every pair (one small query per pair)."""
    if keep_audits <= 0:
        return []
    ids: list[int] = []
    for pair_id in Pair.objects.values_list("id", flat=True):
        ids += (
            Run.objects.filter(pair_id=pair_id, kind=RunKind.AUDIT)
            .order_by("-created_at", "-id")
            .values_list("id", flat=True)[:keep_audits]
        )
    return ids


def prune_payloads(
    *,
    now: datetime | None = None,
    days: int | None = None,
    keep_audits: int | None = None,
    batch_size: int = 5000,
    max_seconds: float = 50.0,
) -> PruneResult:
    days = settings.TIERWATCH_RETENTION_DAYS if days is None else days
    keep = settings.TIERWATCH_RETENTION_KEEP_AUDITS if keep_audits is None else keep_audits
    now = now or timezone.now()
    cutoff = now - timedelta(days=days)
    exempt = exempt_runs(keep)
    old = (
        Sample.objects.filter(pruned_at__isnull=True, started_at__lt=cutoff)
        .exclude(run_id__in=exempt)
        .order_by()
    )
    t0, rows, batches = time.monotonic(), 0, 0
    while time.monotonic() - t0 < max_seconds:
        with transaction.atomic():
            ids = list(old.values_list("id", flat=True)[:batch_size])
            if not ids:
                return PruneResult(rows, batches, time.monotonic() - t0, True)
            rows += Sample.objects.filter(id__in=ids).update(pruned_at=now, **EMPTY)
            batches += 1
    return PruneResult(rows, batches, time.monotonic() - t0, not old.exists())
