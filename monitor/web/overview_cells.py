"""What the overview shows of each pair's measurements, cached per pair until the pair's data
changes: its newest audit (label, time, e-detector state), its speed-up over its newest runs
against the claim (``monitor.judging.speed_window``), its drift state and baseline, its TTFT
trend line and its TTFT P95 over the last ``P95_WINDOW``.

Why: these read the runs and rollups tables (five of the page's queries, ~100 ms at 10 M
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
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from evals import sketch
from evals.latency import MIN_N
from evals.records import TIERS
from monitor import selectors
from monitor.derived import page_cache
from monitor.derived.run_summary import RunSummary
from monitor.judging import speed_window
from monitor.models import Pair, Run
from monitor.web import sparkline
from monitor.web.cells import NO_DATA, fraction, percentile, similarity, speedup

P95_WINDOW = timedelta(hours=24)
TEMPLATE = "monitor/overview.html"


@dataclass(frozen=True)
class Audit:
    """The pair's newest finished audit: its label, when it ended, and the e-detector's
    state after it (``alarm`` None before the audit was folded into the pair's evidence)."""

    label: str
    sentence: str
    run_id: int
    at: datetime | None
    alarm: bool | None


@dataclass(frozen=True)
class Measured:
    """One pair's cached cells: the evidence rendered (the overview's partial "numbers":
    rendering 50 rows' cells was most of the page's CPU), and the facts the three answers and
    the status need. What depends on the clock (an audit's age, when the baseline will be
    ready) is worded on each view from these facts (``monitor.web.overview_answers``)."""

    numbers_html: SafeString  # TTFT trend and P95, similarity, pass rates
    drifting: tuple[str, ...]  # the series its CUSUM finds in drift, if any
    availability: dict[str, float]  # tier → availability of the newest comparable run
    valid_until: datetime | None  # the oldest windowed run leaves the window then
    audit: Audit | None = None
    speed: dict[str, Any] = field(default_factory=dict)  # speed_window.words
    drift_state: str = ""  # "" (no probe folded yet), calibrating, ok, drift
    baseline_runs: int = 0  # collected so far while calibrating, else the baseline's
    baseline_at: datetime | None = None  # when the active baseline was frozen


def newest_numbers(summary: RunSummary, window: Mapping[str, dict]) -> dict[str, Any]:
    """The row's numbers: TTFT P95 over the window with its n (without a run in the window,
    the newest run's own), the rest from the newest comparable run (its own speed-ups are
    shown only while no window of paired probes gives an interval)."""
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


def latest_verdicts(pair_ids: Sequence[int]) -> dict[int, Audit]:
    """Pair id → its newest finished audit with a verdict (one query: an index lookup per
    pair for the newest audit's id, then those runs' summaries only)."""
    out = {}
    for pair_id, run_id, at, data in selectors.newest_audits(pair_ids):
        v = RunSummary.from_json(data).verdict
        if v:
            alarm = v.monitor.get("alarm")
            out[pair_id] = Audit(
                v.label, v.sentence, run_id, at, None if alarm is None else bool(alarm)
            )
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
    for pair_id, tier, at, counts in selectors.probe_ttft_sketches(pair_ids, since):
        oldest[pair_id] = min(at, oldest.get(pair_id, at))
        into = merged[(pair_id, tier)]
        for key, n in (counts or {}).items():
            into[key] = into.get(key, 0) + n
    stats = {k: sketch.quantiles(s, (95,), MIN_N, per_quantile=True) for k, s in merged.items()}
    return stats, oldest


def build(
    pairs: Mapping[int, tuple[str, int | None, speed_window.PairClaim]], now: datetime
) -> dict[int, Measured]:
    """The cells of these pairs (pair id → its name, its newest comparable run's id and its
    claim with its gating choice), read fresh: eight queries for any number of pairs, nine
    with a frozen baseline."""
    pair_ids = list(pairs)
    verdicts = latest_verdicts(pair_ids)
    trends = sparkline.ttft_trends(pair_ids)
    window, oldest = window_ttft(pair_ids, now - P95_WINDOW)
    claims = {pid: claimed for pid, (_, _, claimed) in pairs.items()}
    speeds = speed_window.window_speedups(claims)
    summaries = selectors.run_summaries([i for _, i, _ in pairs.values() if i])
    drifts = {
        pid: RunSummary.from_json(summaries.get(newest)).drift
        for pid, (_, newest, _) in pairs.items()
    }
    baseline_ids = [d.baseline_id for d in drifts.values() if d and d.baseline_id]
    frozen = selectors.baseline_times(baseline_ids) if baseline_ids else {}
    out = {}
    for pair_id, (_name, newest, _claimed) in pairs.items():
        trend = trends[pair_id]
        summary = RunSummary.from_json(summaries.get(newest))
        tier_window = {t: window[(pair_id, t)] for t in TIERS if (pair_id, t) in window}
        drift = summary.drift
        numbers = newest_numbers(summary, tier_window)
        speed = speed_window.words(speeds[pair_id], claims[pair_id].claim)
        out[pair_id] = Measured(
            numbers_html=render_to_string(
                f"{TEMPLATE}#numbers",
                {
                    **numbers,
                    # the newest run's own speed-ups only while no window estimate exists
                    "newest_speed": not any(s.estimate for s in speeds[pair_id].scenarios),
                    "spark": sparkline.svg(trend),
                    "spark_runs": trend.n_runs,
                    "spark_last": [sparkline.ms(trend.last(t)) for t in TIERS],
                },
            ),
            drifting=tuple(drift.drifting) if drift and drift.state == "drift" else (),
            availability={
                t: s.availability for t, s in summary.tiers.items() if s.availability is not None
            },
            valid_until=oldest[pair_id] + P95_WINDOW if pair_id in oldest else None,
            audit=verdicts.get(pair_id),
            speed=speed,
            drift_state=drift.state if drift else "",
            baseline_runs=(drift.runs if drift.state == "calibrating" else drift.baseline_runs)
            if drift
            else 0,
            baseline_at=frozen.get(drift.baseline_id) if drift and drift.baseline_id else None,
        )
    return out


def measured(rows: Sequence[tuple[Pair, Run | None]], now: datetime) -> dict[int, Measured]:
    """Pair id → its cells, from the cache where the pair's version is unchanged and the
    entry's window still holds, built for the rest in one pass. ``rows``: each pair with its
    newest comparable finished run (``selectors.pairs_overview`` reads it), or None."""
    versions = {pair.pk: page_cache.data_version(pair) for pair, _ in rows}
    pairs = {
        pair.pk: (
            pair.name,
            run and run.pk,
            speed_window.PairClaim(pair.claim, pair.include_downgraded),
        )
        for pair, run in rows
    }
    return page_cache.cached_many(
        "overview",
        versions,
        lambda missing: build({p: pairs[p] for p in missing}, now),
        fresh=lambda cells: cells.valid_until is None or now < cells.valid_until,
    )


def warm(pair: Pair, now: datetime) -> None:
    """Build one pair's cells into the cache (the pipeline, after a run's last write)."""
    measured([(pair, selectors.newest_trend_run(pair))], now)
