"""What the overview shows of each pair's measurements: its newest verdict, its TTFT trend line
and its TTFT P95 over the last ``P95_WINDOW``, cached per pair until the pair's data changes.

Why: these three read the runs and rollups tables (five of the page's queries, ~100 ms at 10 M
samples, and the SVGs' CPU; docs/benchmarks.md, "Scale"), while what they show changes only
when a run of the pair ends or writes its summary, or when the oldest run in the window ages
out, and the overview refreshes every 5 s in every open browser.

An entry's version is the pair's generation (``monitor.figure_cache.generations``, renewed on
commit by every ``Run.summary`` write and every run's end, ``RunQuerySet.end``) with the id of
its newest comparable run; the entry also says until when it holds (``valid_until``: the
moment its oldest windowed run leaves the window), so it is exact, not merely recent. What can
change without a run stays out and is read on every view: status, last run, open alerts,
maintenance windows, the e-BH flags across pairs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import OuterRef, Subquery
from django.utils.safestring import SafeString

from evals import sketch
from evals.latency import MIN_N
from monitor import figure_cache
from monitor.models import Pair, Run, RunKind, RunRollup, RunStatus
from monitor.run_summary import RunSummary
from monitor.web import sparkline

P95_WINDOW = timedelta(hours=24)
TIERS = ("fast", "base")


@dataclass(frozen=True)
class Measured:
    """One pair's cached cells."""

    verdict: tuple[str, str, int | None]  # label, sentence, audit run id; "" when none
    spark: SafeString
    spark_runs: int
    spark_last: list[str]  # fast, base
    window: dict[str, dict]  # tier → TTFT {"n", "p95"} over the window (absent: no run in it)
    valid_until: datetime | None  # the oldest windowed run leaves the window then


def latest_verdicts(pair_ids: Sequence[int]) -> dict[int, tuple[str, str, int]]:
    """Pair id → (label, sentence, run id) of its newest finished audit (one query: an index
    lookup per pair for the newest audit's id, then those runs' summaries only)."""
    newest = (Run.objects.filter(pair=OuterRef("pk"), kind=RunKind.AUDIT, status=RunStatus.DONE)
              .order_by("-created_at", "-id").values("id")[:1])
    ids = Pair.objects.filter(pk__in=pair_ids).annotate(newest=Subquery(newest)).values("newest")
    out = {}
    for pair_id, run_id, data in Run.objects.filter(id__in=ids).values_list(
            "pair_id", "id", "summary"):
        v = RunSummary.from_json(data).verdict
        if v:
            out[pair_id] = (v.label, v.sentence, run_id)
    return out


def window_ttft(pair_ids: Sequence[int], since: datetime
                ) -> tuple[dict[tuple[int, str], dict], dict[int, datetime]]:
    """(pair id, tier) → TTFT percentiles {"n", "p95"} of the pair's comparable runs
    (``Run.objects.trend``: done probes) since ``since``, from their rollup sketches merged
    (``evals.sketch``; one query, no samples), P95 withheld below its own minimum n; and pair
    id → the start of its oldest run in the window."""
    merged: dict[tuple[int, str], dict[str, int]] = defaultdict(dict)
    oldest: dict[int, datetime] = {}
    rows = (RunRollup.objects.filter(pair_id__in=pair_ids, kind=RunKind.PROBE, at__gte=since,
                                     run__status=RunStatus.DONE)
            .values_list("pair_id", "tier", "at", "ttft_sketch"))
    for pair_id, tier, at, counts in rows:
        oldest[pair_id] = min(at, oldest.get(pair_id, at))
        into = merged[(pair_id, tier)]
        for key, n in (counts or {}).items():
            into[key] = into.get(key, 0) + n
    stats = {k: sketch.quantiles(s, (95,), MIN_N, per_quantile=True) for k, s in merged.items()}
    return stats, oldest


def build(pair_ids: list[int], now: datetime) -> dict[int, Measured]:
    """The cells of these pairs, read fresh (five queries for any number of pairs)."""
    verdicts = latest_verdicts(pair_ids)
    trends = sparkline.ttft_trends(pair_ids)
    window, oldest = window_ttft(pair_ids, now - P95_WINDOW)
    out = {}
    for pair_id in pair_ids:
        trend = trends[pair_id]
        out[pair_id] = Measured(
            verdict=verdicts.get(pair_id, ("", "", None)),
            spark=sparkline.svg(trend), spark_runs=trend.n_runs,
            spark_last=[sparkline.ms(trend.last(t)) for t in TIERS],
            window={t: window[(pair_id, t)] for t in TIERS if (pair_id, t) in window},
            valid_until=oldest[pair_id] + P95_WINDOW if pair_id in oldest else None)
    return out


def measured(newest_comparable: Mapping[int, int | None], now: datetime) -> dict[int, Measured]:
    """Pair id → its cells, from the cache where the pair's version is unchanged and the
    entry's window still holds, built for the rest in one pass. ``newest_comparable``: pair id
    → id of its newest comparable finished run (``selectors.pairs_overview`` reads it)."""
    tokens = figure_cache.generations(newest_comparable)
    versions = {pair_id: f"{tokens[pair_id]}:{run_id}"
                for pair_id, run_id in newest_comparable.items()}
    return figure_cache.cached_many(
        "overview", versions, lambda missing: build(missing, now),
        fresh=lambda cells: cells.valid_until is None or now < cells.valid_until)


def warm(pair_id: int, now: datetime) -> None:
    """Build one pair's cells into the cache (the pipeline, after a run's last write)."""
    newest = (Run.objects.trend().filter(pair_id=pair_id).order_by("-created_at", "-id")
              .values_list("id", flat=True).first())
    measured({pair_id: newest}, now)
