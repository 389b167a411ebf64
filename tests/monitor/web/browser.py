"""What the browser tests share: Debian's chromium and a pair with eight drawn runs (their
rollups too, 20 samples per tier each, so the overview's 24-hour TTFT P95 has n = 160)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from monitor.derived.rollups import record_run
from monitor.derived.run_summary import Similarity, SpeedUp, TierStats
from monitor.models import Case, Pair, Run, Sample, Suite
from tests import factories

CHROMIUM = Path("/usr/bin/chromium")
# Playwright's own browser download cannot work here; Debian's chromium runs headless as root.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def launch(playwright):
    """Debian's chromium, headless, through Playwright."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)


def screenshots_dir() -> Path:
    """Where the browser tests leave their screenshots, to be looked at."""
    shots = Path(settings.BASE_DIR) / "var" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    return shots


def run_summary(i: int) -> dict:
    def tier(ttft: float, e2e: float, rate: float) -> TierStats:
        return factories.tier(
            20,
            ttft=(ttft, ttft * 1.6),
            e2e=(e2e, e2e * 1.4),
            decode_tps_p50=100.0,
            tokens_server=2000,
            tokens_estimated=1980,
            pass_rate=rate,
            n_tested=8,
            model_ids=("sim",),
        )

    return factories.summary(
        fast=tier(90 + 5 * (i % 3), 700 + 20 * i, 0.75),
        base=tier(420 + 15 * (i % 4), 2900 + 40 * i, 0.875),
        similarity=Similarity(
            20, 0.93 - 0.01 * (i % 2), median_ratio=0.95, exact_rate=0.4, first_div_p50=120.0
        ),
        noise_floor=Similarity(20, 0.985, median_ratio=1.0, exact_rate=0.8),
        speedup=SpeedUp(ttft=4.6, e2e=4.1, decode=2.0),
    )


def make_pair() -> Pair:
    suite = Suite.objects.create(name="smoke")
    pair = factories.pair(suite_row=suite, claim_value=6)
    now = timezone.now()
    for i in range(8):
        run = Run.objects.create(
            pair=pair, suite=suite, status="done", planned=40, completed=40, summary=run_summary(i)
        )
        when = now - timedelta(minutes=5 * (8 - i))
        Run.objects.filter(pk=run.pk).update(created_at=when, finished_at=when)
        run.refresh_from_db()
        record_run(run=run, samples=factories.rollup_rows(run, fast_ms=90.0, base_ms=420.0))
    case = Case.objects.create(suite=suite, key="fizzbuzz", messages=[])
    Sample.objects.create(
        run=run,
        case=case,
        endpoint=pair.fast,
        tier="fast",
        started_at=now,
        ok=True,
        ttft_ms=91.0,
        e2e_ms=700.0,
        text="def fizzbuzz(n): return n",
    )
    return pair
