"""Runs with stored summaries for the page tests (the views' and the lifecycle pages')."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from monitor.derived.run_summary import ScenarioStats, Similarity, SpeedUp, TierStats, Timings
from monitor.models import Pair, Run
from tests import factories


def tier(
    n: int, ttft: tuple[float, float], e2e: tuple[float, float], pass_rate: float
) -> TierStats:
    return factories.tier(
        n,
        ttft=ttft,
        e2e=e2e,
        errors={"timeout": 1} if n > 5 else {},
        decode_tps_p50=80.0,
        tokens_server=1234,
        tokens_estimated=1200,
        pass_rate=pass_rate,
        n_tested=4,
        model_ids=("demo-model",),
        fingerprints=("fp_sim",),
    )


def summary(n: int = 20, fast_ttft: float = 111.0, base_ttft: float = 555.0) -> dict:
    return factories.summary(
        fast=tier(n, (fast_ttft, 2 * fast_ttft), (900.0, 1400.0), 0.75),
        base=tier(n, (base_ttft, 987.0), (3000.0, 4321.0), 1.0),
        similarity=Similarity(n, 0.912, median_ratio=0.95, exact_rate=0.4, first_div_p50=140.0),
        noise_floor=Similarity(n, 0.987, median_ratio=1.0, exact_rate=0.8),
        speedup=SpeedUp(ttft=base_ttft / fast_ttft, e2e=3.33, decode=2.0),
        by_scenario={
            "short-long": ScenarioStats(
                fast=Timings(ttft_ms=factories.stat(n, 100.0, 150.0)),
                base=Timings(ttft_ms=factories.stat(n, 500.0, 700.0)),
            )
        },
    )


def make_run(pair: Pair, *, minutes_ago: int, status: str = "done", **kw) -> Run:
    run = Run.objects.create(
        pair=pair,
        suite=pair.suite,
        status=status,
        planned=40,
        completed=40 if status == "done" else 7,
        summary=kw.pop("summary", summary() if status == "done" else {}),
        **kw,
    )
    when = timezone.now() - timedelta(minutes=minutes_ago)
    Run.objects.filter(pk=run.pk).update(created_at=when, finished_at=when)
    if status in ("done", "failed"):  # ended as the product ends a run: a new pair generation
        Run.objects.filter(pk=run.pk).end(status, finished_at=when)
    run.refresh_from_db()
    return run
