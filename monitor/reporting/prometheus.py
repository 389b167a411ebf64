"""Prometheus metrics from the stored run summaries (``/metrics``).

The workers that measure are other processes, so nothing is counted in this one: at each scrape
a custom collector reads, per pair, the newest finished probe and audit (``Run.summary_obj``),
open alerts and run counts: six queries however many pairs there are.

Names follow Prometheus' conventions: base units (``_seconds``; the summaries store ms),
ratios as ``_ratio`` in 0..1 (a speed-up is a ratio > 1), labels ``pair``, ``tier``,
``scenario`` ("all" for the whole run) and ``percentile`` (``p50``…``p99``). Not
``quantile``: Prometheus reserves that label for summaries, and these are gauges of stored
percentiles (a summary would need a count and sum per scrape window that a run does not have;
``promtool check metrics`` refuses a gauge with it). A percentile below its minimum n is
absent, as on the pages.

A single probe is usually too small for a P95 (n ≥ 59), so the ``tierwatch_window_*``
families merge the TTFT/E2E sketches of the done probes of the last ``WINDOW``
(``monitor.derived.rollups.window_sketches``, what the overview's P95 reads) and export the
window's percentiles with its n as its own series (``tierwatch_window_samples``): a reader
sees how much a P95 rests on, and a P99 appears once n allows it. The verdict is a state set:
one series per label, 1 for the current one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from evals import sketch
from evals.claims import Claim
from evals.latency import MIN_N
from evals.stats.labels import LABELS
from monitor import selectors
from monitor.derived import rollups
from monitor.derived.run_summary import Percentiles, RunSummary, Timings
from monitor.models import AlertState, Pair, Run, RunKind, RunStatus

PERCENTILES = ("p50", "p90", "p95", "p99")
WINDOW = timedelta(hours=24)  # as the overview's P95 (monitor.web.overview_cells.P95_WINDOW)
WINDOWED = (("ttft", "time to first token"), ("e2e", "end-to-end latency"))
TIMINGS = (
    ("ttft_ms", "ttft", "time to first token"),
    ("e2e_ms", "e2e", "end-to-end latency"),
    ("tpot_ms", "tpot", "time per output token after the first"),
)
ALL = "all"


@dataclass
class PairSnapshot:
    name: str
    claim: Claim | None
    alerts_firing: int
    probe: Run | None
    audit: Run | None
    runs_by_status: dict[str, int]
    # tier → {"ttft"/"e2e": merged sketch} of the window's done probes
    window: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)


def snapshot() -> list[PairSnapshot]:
    """Everything a scrape reports, in a fixed number of queries (seven)."""
    pairs = list(
        Pair.objects.order_by("name").annotate(
            firing=Count("alerts", filter=Q(alerts__state=AlertState.FIRING))
        )
    )
    probes = selectors.latest_done_runs(RunKind.PROBE)
    audits = selectors.latest_done_runs(RunKind.AUDIT)
    counts: dict[int, dict[str, int]] = {}
    # Count("*"), not Count("id"): the (pair, status) index alone answers it (index-only scan)
    for row in Run.objects.order_by().values("pair_id", "status").annotate(n=Count("*")):
        counts.setdefault(row["pair_id"], {})[row["status"]] = row["n"]
    window: dict[int, dict[str, dict[str, dict[str, int]]]] = {}
    for (pair_id, tier), sketches in rollups.window_sketches(timezone.now() - WINDOW).items():
        window.setdefault(pair_id, {})[tier] = sketches
    return [
        PairSnapshot(
            p.name,
            p.claim,
            p.firing,
            probes.get(p.pk),
            audits.get(p.pk),
            counts.get(p.pk, {}),
            window.get(p.pk, {}),
        )
        for p in pairs
    ]


def _timings(
    families: dict[str, GaugeMetricFamily], pair: str, tier: str, scenario: str, timings: Timings
) -> None:
    for name, short, _ in TIMINGS:
        stats: Percentiles = timings.metric(name)
        for key in PERCENTILES:
            value = stats.get(key)
            if value is not None:
                families[short].add_metric([pair, tier, scenario, key], value / 1000.0)


def _window(
    families: dict[str, GaugeMetricFamily],
    samples: GaugeMetricFamily,
    pair: str,
    window: dict[str, dict[str, dict[str, int]]],
) -> None:
    qs = [float(key[1:]) for key in PERCENTILES]
    for tier, sketches in sorted(window.items()):
        for short, _ in WINDOWED:
            stats = sketch.quantiles(sketches[short], qs, MIN_N, per_quantile=True)
            if not stats["n"]:
                continue
            samples.add_metric([pair, tier, short], stats["n"])
            for key in PERCENTILES:
                if stats.get(key) is not None:
                    families[short].add_metric([pair, tier, key], stats[key] / 1000.0)


def _hours(span: timedelta) -> str:
    return f"{span.total_seconds() / 3600:g}"


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def families(pairs: list[PairSnapshot]) -> list[GaugeMetricFamily]:
    timing = {
        short: _gauge(
            f"tierwatch_{short}_seconds",
            f"{doc}, percentile of the newest finished probe",
            ["pair", "tier", "scenario", "percentile"],
        )
        for _, short, doc in TIMINGS
    }
    windowed = {
        short: _gauge(
            f"tierwatch_window_{short}_seconds",
            f"{doc}, percentile over the done probes of the last {_hours(WINDOW)} h",
            ["pair", "tier", "percentile"],
        )
        for short, doc in WINDOWED
    }
    window_n = _gauge(
        "tierwatch_window_samples",
        f"values behind the window's percentiles (done probes, last {_hours(WINDOW)} h)",
        ["pair", "tier", "metric"],
    )
    requests = _gauge(
        "tierwatch_probe_requests", "requests in the newest finished probe", ["pair", "tier"]
    )
    avail = _gauge(
        "tierwatch_availability_ratio",
        "successes / requests with 429s left out, newest finished probe",
        ["pair", "tier"],
    )
    errors = _gauge(
        "tierwatch_error_ratio",
        "failed requests (429s included) / requests, newest finished probe",
        ["pair", "tier"],
    )
    downgrade = _gauge(
        "tierwatch_downgrade_ratio",
        "share of requests served below the expected tier, newest finished probe",
        ["pair", "tier"],
    )
    speedup = _gauge(
        "tierwatch_speedup_ratio",
        "base/fast ratio of medians (decode: of TPOT), newest finished probe",
        ["pair", "scenario", "metric"],
    )
    claimed = _gauge(
        "tierwatch_claimed_speedup_ratio",
        "the vendor's claimed factor over base (a factor claim; its metric in tierwatch_claim)",
        ["pair"],
    )
    claim_info = _gauge(
        "tierwatch_claim",
        "the vendor's claim as worded: value (factor ×, floor tok/s or ms) by metric and form; "
        "percentile for a floor",
        ["pair", "metric", "form", "percentile"],
    )
    similarity = _gauge(
        "tierwatch_similarity_ratio",
        "mean Indel similarity of temperature-0 texts, newest finished probe",
        ["pair", "comparison"],
    )
    verdict = _gauge(
        "tierwatch_verdict", "the newest audit's verdict: 1 for its label", ["pair", "verdict"]
    )
    p_value = _gauge(
        "tierwatch_verdict_p_value", "p-value of the newest audit's fast-vs-base test", ["pair"]
    )
    last_run = _gauge(
        "tierwatch_last_run_timestamp_seconds",
        "when the newest finished run of the kind finished (Unix time)",
        ["pair", "kind"],
    )
    firing = _gauge(
        "tierwatch_alerts_firing", "alerts firing (not acknowledged, not resolved)", ["pair"]
    )
    runs = _gauge("tierwatch_runs", "runs stored, by status", ["pair", "status"])
    for p in pairs:
        firing.add_metric([p.name], p.alerts_firing)
        for status in RunStatus.values:
            runs.add_metric([p.name, status], p.runs_by_status.get(status, 0))
        if p.claim is not None:
            c = p.claim
            if c.form == "factor":
                claimed.add_metric([p.name], c.value)
            pct = "" if c.percentile is None else f"{c.percentile:g}"
            claim_info.add_metric([p.name, c.metric, c.form, pct], c.value)
        for kind, run in ((RunKind.PROBE, p.probe), (RunKind.AUDIT, p.audit)):
            if run is not None:
                when = run.finished_at or run.created_at
                last_run.add_metric([p.name, kind], when.timestamp())
        _window(windowed, window_n, p.name, p.window)
        if p.probe is not None:
            summary = p.probe.summary_obj
            for tier, stats in summary.tiers.items():
                _timings(timing, p.name, tier, ALL, stats)
                requests.add_metric([p.name, tier], stats.n)
                for family, value in (
                    (avail, stats.availability),
                    (errors, stats.error_rate),
                    (downgrade, stats.downgrade_rate),
                ):
                    if value is not None:
                        family.add_metric([p.name, tier], value)
            for scenario, scenario_stats in sorted(summary.by_scenario.items()):
                for tier in ("fast", "base"):
                    _timings(timing, p.name, tier, scenario, scenario_stats.tier(tier))
            _speedups(speedup, p.name, summary)
            for comparison, sim in summary.similarity.items():
                if sim is not None and sim.mean_ratio is not None:
                    similarity.add_metric([p.name, comparison], sim.mean_ratio)
        v = p.audit.summary_obj.verdict if p.audit is not None else None
        if v is not None:
            for label in LABELS:
                verdict.add_metric([p.name, label], 1.0 if v.label == label else 0.0)
            if v.p_value is not None:
                p_value.add_metric([p.name], v.p_value)
    return [
        *timing.values(),
        *windowed.values(),
        window_n,
        requests,
        avail,
        errors,
        downgrade,
        speedup,
        claimed,
        claim_info,
        similarity,
        verdict,
        p_value,
        last_run,
        firing,
        runs,
    ]


def _speedups(family: GaugeMetricFamily, pair: str, summary: RunSummary) -> None:
    per_scenario = [(ALL, summary.speedup)] + [
        (scn, stats.speedup) for scn, stats in sorted(summary.by_scenario.items())
    ]
    for scenario, s in per_scenario:
        for metric in ("ttft", "e2e", "decode"):
            value = getattr(s, metric)
            if value is not None:
                family.add_metric([pair, scenario, metric], value)


class SummaryCollector(Collector):
    """Reads the database at each scrape; no state of its own."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from families(snapshot())


# Its own registry: the default one would add this web process's Python metrics, which say
# nothing about the vendors. auto_describe off, so registering does not query the database.
REGISTRY = CollectorRegistry(auto_describe=False)
REGISTRY.register(SummaryCollector())
