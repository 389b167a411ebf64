"""The rows ``metrics_scrape.py`` scrapes, and one timed scrape (imported after Django is set
up, so this module may import models at the top)."""

from __future__ import annotations

import statistics
import time
from datetime import timedelta

from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from monitor.derived.run_summary import (
    Percentiles,
    RunSummary,
    ScenarioStats,
    Similarity,
    SpeedUp,
    TierStats,
    Timings,
    Verdict,
)
from monitor.models import Alert, AlertRule, Case, Endpoint, Pair, Run, Suite

SCENARIOS = ("long_cached", "short_long_out", "long_cold")


def _p(n: int, p50: float) -> Percentiles:
    return Percentiles(n=n, too_small=False, p50=p50, p90=p50 * 1.5, p95=p50 * 1.8, p99=p50 * 2.4)


def _summary(i: int) -> dict:
    def tier(ttft: float) -> TierStats:
        return TierStats(
            n=60,
            n_ok=59,
            availability=0.98,
            ttft_ms=_p(60, ttft),
            e2e_ms=_p(60, ttft * 6),
            tpot_ms=_p(60, 20.0),
            decode_tps_p50=50.0,
        )

    scenarios = {
        s: ScenarioStats(
            fast=Timings(_p(20, 90.0 + k), _p(20, 600.0), _p(20, 9.0)),
            base=Timings(_p(20, 400.0), _p(20, 2500.0), _p(20, 20.0)),
            speedup=SpeedUp(4.0 + k, 3.5, 2.0),
        )
        for k, s in enumerate(SCENARIOS)
    }
    return RunSummary(
        min_n=5,
        tiers={"fast": tier(100.0 + i), "base": tier(420.0)},
        similarity={"fast_vs_base": Similarity(20, 0.93), "base_vs_base": Similarity(20, 0.98)},
        speedup=SpeedUp(4.2, 3.6, 2.1),
        by_scenario=scenarios,
    ).to_json()


def populate(*, pairs: int, runs: int) -> None:
    suite = Suite.objects.create(name="bench")
    Case.objects.create(suite=suite, key="c", messages=[])
    rule = AlertRule.objects.create(name="ttft", metric="ttft_p95", threshold=1)
    verdict = {
        "label": "no_detectable_difference",
        "sentence": "no detectable difference",
        "p_value": 0.4,
    }
    audit = (
        RunSummary.from_json(_summary(0))
        .replace(verdict=Verdict(label="no_detectable_difference", p_value=0.4, data=verdict))
        .to_json()
    )
    now = timezone.now()
    for i in range(pairs):
        fast, base = (
            Endpoint.objects.create(name=f"e{i}-{t}", base_url="http://127.0.0.1:9/v1", model=t)
            for t in ("fast", "base")
        )
        pair = Pair.objects.create(
            name=f"pair-{i}", fast=fast, base=base, suite=suite, claim_value=5
        )
        rows = [
            Run(
                pair=pair,
                suite=suite,
                status="done",
                summary=_summary(k),
                finished_at=now - timedelta(minutes=15 * k),
            )
            for k in range(runs)
        ]
        rows += [
            Run(pair=pair, suite=suite, kind="audit", status="done", summary=audit),
            Run(pair=pair, suite=suite, status="failed"),
        ]
        Run.objects.bulk_create(rows)
        Alert.objects.create(rule=rule, pair=pair, message="TTFT P95 high", value=1.0)


def scrape(token: str) -> tuple[float, int, bytes]:
    """One GET /metrics: seconds, queries, body (an empty token expects the 401)."""
    client = Client(HTTP_HOST="127.0.0.1")
    with CaptureQueriesContext(connection) as queries:
        t0 = time.perf_counter()
        response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
        seconds = time.perf_counter() - t0
    assert response.status_code == (200 if token else 401), response.status_code
    return seconds, len(queries), response.content


def breakdown(repeats: int) -> dict[str, float]:
    """Median seconds of the collector's parts: queries, summaries into series, text format."""
    from prometheus_client import generate_latest

    from monitor.reporting.prometheus import REGISTRY, families, snapshot

    parts: dict[str, list[float]] = {
        "queries (snapshot)": [],
        "summaries → series": [],
        "generate_latest (collects again, then formats)": [],
    }
    for _ in range(repeats):
        t0 = time.perf_counter()
        snap = snapshot()
        for run in (r for p in snap for r in (p.probe, p.audit) if r is not None):
            run.summary  # noqa: B018 (the JSON is decoded with the row; nothing lazy)
        t1 = time.perf_counter()
        families(snap)
        t2 = time.perf_counter()
        generate_latest(REGISTRY)
        t3 = time.perf_counter()
        parts["queries (snapshot)"].append(t1 - t0)
        parts["summaries → series"].append(t2 - t1)
        parts["generate_latest (collects again, then formats)"].append(t3 - t2)
    return {k: statistics.median(v) for k, v in parts.items()}
