"""What the overview shows of each pair's measurements: its newest verdict, its TTFT trend line
and its TTFT P95 over the last ``P95_WINDOW``, cached per pair until the pair's data changes.

Why: these three read the runs and rollups tables (five of the page's queries, ~100 ms at 10 M
samples, and the SVGs' CPU; docs/benchmarks.md, "Scale"), while what they show changes only
when a run of the pair ends or writes its summary, or when the oldest run in the window ages
out, and the overview refreshes every 5 s in every open browser.

An entry's version is the pair's data version (``monitor.derived.page_cache.data_version``: its
fields and its endpoints', ``Pair.generation`` among them, bumped in the same transaction as
every ``Run.summary`` write, run end and derived-data write); the entry also says until when it
holds (``valid_until``: the moment its oldest windowed run leaves the window), so it is exact,
not merely recent. What can
change without a run stays out and is read on every view: status, last run, open alerts,
maintenance windows, the e-BH flags across pairs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import OuterRef, Subquery
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from evals import sketch
from evals.latency import MIN_N
from evals.records import TIERS
from monitor.derived import page_cache
from monitor.derived.run_summary import RunSummary
from monitor.models import Pair, Run, RunKind, RunRollup, RunStatus
from monitor.web import sparkline
from monitor.web.cells import NO_DATA, fraction, percentile, similarity, speedup

P95_WINDOW = timedelta(hours=24)
TEMPLATE = "monitor/overview.html"


@dataclass(frozen=True)
class Measured:
    """One pair's cached cells, rendered (the overview's partials "verdict-trend" and
    "numbers": rendering 50 rows' cells was most of the page's CPU), with the facts its status
    needs from the newest comparable run's summary."""

    verdict_html: SafeString  # the newest verdict and the TTFT trend line
    numbers_html: SafeString  # TTFT P95, speed-ups, similarity, pass rates
    drifting: tuple[str, ...]  # the series its CUSUM finds in drift, if any
    availability: dict[str, float]  # tier → availability of the newest comparable run
    valid_until: datetime | None  # the oldest windowed run leaves the window then


def newest_numbers(summary: RunSummary, window: Mapping[str, dict]) -> dict[str, Any]:
    """The row's numbers: TTFT P95 over the window with its n (without a run in the window,
    the newest run's own), the rest from the newest comparable run."""
    tiers = [summary.tiers.get(t) for t in TIERS]
    p95 = [
        percentile(window[t], "p95", MIN_N)
        if window.get(t, {}).get("n")
        else percentile(s.ttft_ms, "p95", summary.min_n)
        if s
        else NO_DATA
        for t, s in zip(TIERS, tiers, strict=True)
    ]
    return {
        "ttft_p95": p95,
        "speedup_ttft": speedup(summary.speedup.ttft),
        "speedup_e2e": speedup(summary.speedup.e2e),
        "sim_fast_base": similarity(summary.similar("fast_vs_base")),
        "sim_base_base": similarity(summary.similar("base_vs_base")),
        "pass_rate": [fraction(t.pass_rate, t.n_tested) if t else NO_DATA for t in tiers],
    }


def latest_verdicts(pair_ids: Sequence[int]) -> dict[int, tuple[str, str, int]]:
    """Pair id → (label, sentence, run id) of its newest finished audit (one query: an index
    lookup per pair for the newest audit's id, then those runs' summaries only)."""
    newest = (
        Run.objects.filter(pair=OuterRef("pk"), kind=RunKind.AUDIT, status=RunStatus.DONE)
        .order_by("-created_at", "-id")
        .values("id")[:1]
    )
    ids = Pair.objects.filter(pk__in=pair_ids).annotate(newest=Subquery(newest)).values("newest")
    out = {}
    for pair_id, run_id, data in Run.objects.filter(id__in=ids).values_list(
        "pair_id", "id", "summary"
    ):
        v = RunSummary.from_json(data).verdict
        if v:
            out[pair_id] = (v.label, v.sentence, run_id)
    return out


def window_ttft(
    pair_ids: Sequence[int], since: datetime
) -> tuple[dict[tuple[int, str], dict], dict[int, datetime]]:
    """(pair id, tier) → TTFT percentiles {"n", "p95"} of the pair's comparable runs
    (``Run.objects.trend``: done probes) since ``since``, from their rollup sketches merged
    (``evals.sketch``; one query, no samples), P95 withheld below its own minimum n; and pair
    id → the start of its oldest run in the window."""
    merged: dict[tuple[int, str], dict[str, int]] = defaultdict(dict)
    oldest: dict[int, datetime] = {}
    rows = RunRollup.objects.filter(
        pair_id__in=pair_ids, kind=RunKind.PROBE, at__gte=since, run__status=RunStatus.DONE
    ).values_list("pair_id", "tier", "at", "ttft_sketch")
    for pair_id, tier, at, counts in rows:
        oldest[pair_id] = min(at, oldest.get(pair_id, at))
        into = merged[(pair_id, tier)]
        for key, n in (counts or {}).items():
            into[key] = into.get(key, 0) + n
    stats = {k: sketch.quantiles(s, (95,), MIN_N, per_quantile=True) for k, s in merged.items()}
    return stats, oldest


def build(pairs: Mapping[int, tuple[str, int | None]], now: datetime) -> dict[int, Measured]:
    """The cells of these pairs (pair id → its name and its newest comparable run's id), read
    fresh: six queries for any number of pairs."""
    pair_ids = list(pairs)
    verdicts = latest_verdicts(pair_ids)
    trends = sparkline.ttft_trends(pair_ids)
    window, oldest = window_ttft(pair_ids, now - P95_WINDOW)
    summaries = dict(
        Run.objects.filter(id__in=[i for _, i in pairs.values() if i]).values_list("id", "summary")
    )
    out = {}
    for pair_id, (name, newest) in pairs.items():
        trend = trends[pair_id]
        summary = RunSummary.from_json(summaries.get(newest))
        label, sentence, _ = verdicts.get(pair_id, ("", "", None))
        tier_window = {t: window[(pair_id, t)] for t in TIERS if (pair_id, t) in window}
        drift = summary.drift
        out[pair_id] = Measured(
            verdict_html=render_to_string(
                f"{TEMPLATE}#verdict-trend",
                {
                    "pair_name": name,
                    "verdict_label": label.replace("_", " "),
                    "verdict_sentence": sentence,
                    "spark": sparkline.svg(trend),
                    "spark_runs": trend.n_runs,
                    "spark_last": [sparkline.ms(trend.last(t)) for t in TIERS],
                },
            ),
            numbers_html=render_to_string(
                f"{TEMPLATE}#numbers", newest_numbers(summary, tier_window)
            ),
            drifting=tuple(drift.drifting) if drift and drift.state == "drift" else (),
            availability={
                t: s.availability for t, s in summary.tiers.items() if s.availability is not None
            },
            valid_until=oldest[pair_id] + P95_WINDOW if pair_id in oldest else None,
        )
    return out


def measured(rows: Sequence[tuple[Pair, Run | None]], now: datetime) -> dict[int, Measured]:
    """Pair id → its cells, from the cache where the pair's version is unchanged and the
    entry's window still holds, built for the rest in one pass. ``rows``: each pair with its
    newest comparable finished run (``selectors.pairs_overview`` reads it), or None."""
    versions = {pair.pk: page_cache.data_version(pair) for pair, _ in rows}
    pairs = {pair.pk: (pair.name, run and run.pk) for pair, run in rows}
    return page_cache.cached_many(
        "overview",
        versions,
        lambda missing: build({p: pairs[p] for p in missing}, now),
        fresh=lambda cells: cells.valid_until is None or now < cells.valid_until,
    )


def warm(pair: Pair, now: datetime) -> None:
    """Build one pair's cells into the cache (the pipeline, after a run's last write)."""
    newest = (
        Run.objects.trend()
        .filter(pair=pair)
        .order_by("-created_at", "-id")
        .only("id", "finished_at")
        .first()
    )
    measured([(pair, newest)], now)
