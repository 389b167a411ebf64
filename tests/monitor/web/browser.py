"""What the browser tests share: Debian's chromium and a pair with eight drawn runs (their
rollups too, 20 samples per tier each, so the overview's 24-hour TTFT P95 has n = 160)."""

from __future__ import annotations

import atexit
import re
import shutil
import subprocess
import tempfile
import threading
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


# Playwright's own switches for a headless chromium (its launch passes these): the tests measure
# layout (no sideways scrolling, widths), which --hide-scrollbars and the hover settings change.
PLAYWRIGHT_SWITCHES = [
    "--disable-field-trial-config", "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows", "--disable-back-forward-cache",
    "--disable-breakpad", "--disable-component-extensions-with-background-pages",
    "--disable-component-update", "--no-default-browser-check", "--disable-default-apps",
    "--disable-dev-shm-usage", "--disable-extensions", "--allow-pre-commit-input",
    "--disable-hang-monitor", "--disable-ipc-flooding-protection", "--disable-popup-blocking",
    "--disable-prompt-on-repost", "--disable-renderer-backgrounding",
    "--force-color-profile=srgb", "--metrics-recording-only", "--no-first-run",
    "--password-store=basic", "--use-mock-keychain", "--no-service-autorun",
    "--disable-search-engine-choice-screen", "--disable-infobars", "--disable-sync",
    "--disable-features=AvoidUnnecessaryBeforeUnloadCheckSync,DestroyProfileOnBrowserClose,"
    "HttpsUpgrades,HttpsFirstBalancedModeAutoEnable,LensOverlay,MediaRouter,PaintHolding,"
    "ThirdPartyStoragePartitioning,AvoidCorsURLLoaderRestartOnRedirect,OptimizationHints,"
    "NetworkTimeServiceQuerying",
    "--enable-features=CDPScreenshotNewSurface",
    "--headless", "--hide-scrollbars", "--mute-audio",
    "--blink-settings=primaryHoverType=2,availableHoverTypes=2,primaryPointerType=4,"
    "availablePointerTypes=4",
]  # fmt: skip
_shared: dict[str, object] = {}


def launch(playwright):
    """Debian's chromium, headless, through Playwright: one chromium per test process, started
    on first use and connected to over CDP, so each test pays for a connection and a fresh
    context (``new_page``), not for a browser start; ``close()`` drops the test's contexts and
    leaves the browser to the next test."""
    return playwright.chromium.connect_over_cdp(_endpoint())


def _endpoint() -> str:
    proc = _shared.get("proc")
    if isinstance(proc, subprocess.Popen) and proc.poll() is None:
        return str(_shared["url"])
    profile = tempfile.mkdtemp(prefix="tierwatch-chromium-")
    proc = subprocess.Popen(
        [str(CHROMIUM), *PLAYWRIGHT_SWITCHES, *CHROMIUM_ARGS, f"--user-data-dir={profile}",
         "--remote-debugging-port=0", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:  # chromium names its endpoint on stderr once it listens
        if found := re.search(r"DevTools listening on (ws://\S+)", line):
            break
    else:
        raise RuntimeError(f"chromium exited ({proc.wait()}) without a DevTools endpoint")
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # never block its pipe
    _shared.update(proc=proc, url=found.group(1))
    atexit.register(_stop, proc, profile)
    return found.group(1)


def _stop(proc: subprocess.Popen, profile: str) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(profile, ignore_errors=True)


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
