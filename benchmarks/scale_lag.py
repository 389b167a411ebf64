"""Schedule lag (the time a probe is due → its first request) with P pairs on 1, 2 and 4 Celery
worker processes against the simulated vendor, over PostgreSQL and Redis.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scale_lag REDIS_URL=redis://127.0.0.1:6379/8 \\
        python -m benchmarks.scale_lag --pairs 50 --every 60 --cycles 3 --workers 1 2 4

This script plays beat: at each due time it publishes every pair's ``probe_pair_task`` at once
(all pairs due together: the worst case, what ``apply_config`` creates when it sets up every
schedule in one go), so the figure is queueing plus run start-up in the workers, and excludes
beat's own tick (≤ 1 s with django-celery-beat's DatabaseScheduler in a quiet deployment).
``--every 60`` sends 50 pairs' probes 5× as often as the issue's 5 minutes: a stricter test.
``--stagger`` spreads the pairs' due times evenly over the interval instead.
A run is "skipped" when it had not sent its first request by the end of the next cycle.
Each worker process: ``-Q probes,celery --pool=threads --concurrency=8``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from statistics import median

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")
django.setup()

from django.db.models import Min  # noqa: E402

from monitor.models import Endpoint, Pair, Run, Sample  # noqa: E402
from monitor.setup.suites import sync_builtin_suite  # noqa: E402
from monitor.tasks import probe_pair_task  # noqa: E402
from tests.factories import free_port  # noqa: E402
from tests.support import ROOT  # noqa: E402


def wait_healthy(url: str, timeout_s: float = 30) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not healthy after {timeout_s} s")


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def setup(vendor_url: str, n: int) -> list[str]:
    suite = sync_builtin_suite(name="smoke")
    names = []
    for i in range(n):
        base, _ = Endpoint.objects.update_or_create(
            name=f"lag{i:02d}-base",
            defaults={"base_url": vendor_url, "model": "demo-base", "simulated": True},
        )
        fast, _ = Endpoint.objects.update_or_create(
            name=f"lag{i:02d}-fast",
            defaults={"base_url": vendor_url, "model": "demo-fast", "simulated": True},
        )
        Pair.objects.update_or_create(
            name=f"lag{i:02d}",
            defaults={"fast": fast, "base": base, "suite": suite, "repeat": 1, "cases_per_run": 3},
        )
        names.append(f"lag{i:02d}")
    return names


def measure(
    names: list[str], workers: int, every: float, cycles: int, stagger: bool = False
) -> dict:
    env = {**os.environ, "TIERWATCH_VENDOR_CONCURRENCY": "64"}
    subprocess.run(
        [sys.executable, "-m", "celery", "-A", "monitor", "purge", "-f"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=True,
    )
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "monitor",
                "worker",
                "-Q",
                "probes,celery",
                "--pool=threads",
                "--concurrency=8",
                "--loglevel=WARNING",
                "-n",
                f"lag{k}@%h",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for k in range(workers)
    ]
    try:
        time.sleep(8)  # workers connect
        first_id = Run.objects.order_by("-id").values_list("id", flat=True).first() or 0
        due: dict[tuple[str, int], datetime] = {}
        t0 = time.monotonic()
        slot = every / len(names) if stagger else 0.0
        for k in range(cycles):
            for i, name in enumerate(names):
                time.sleep(max(0.0, t0 + k * every + i * slot - time.monotonic()))
                due[(name, k)] = datetime.now(UTC)
                probe_pair_task.delay(name)
        time.sleep(max(0.0, t0 + cycles * every - time.monotonic()))
        deadline = time.monotonic() + every
        runs = Run.objects.filter(id__gt=first_id)
        while time.monotonic() < deadline and (
            runs.count() < len(names) * cycles
            or runs.exclude(status__in=["done", "failed"]).exists()
        ):
            time.sleep(1)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)
    firsts = dict(
        Sample.objects.filter(run__in=runs).values_list("run_id").annotate(first=Min("started_at"))
    )
    lags, started = [], 0
    for name in names:
        mine = list(runs.filter(pair__name=name).order_by("created_at", "id"))
        for k, run in enumerate(mine[:cycles]):
            if run.id in firsts:
                lag = (firsts[run.id] - due[(name, k)]).total_seconds()
                if lag <= every:
                    started += 1
                lags.append(lag)
    return {
        "workers": workers,
        "runs": len(lags),
        "expected": len(names) * cycles,
        "skipped": len(names) * cycles - started,
        "p50": median(lags),
        "p95": p95(lags),
        "max": max(lags),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--every", type=float, default=60.0)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--time-scale", type=float, default=0.5)
    parser.add_argument(
        "--stagger",
        action="store_true",
        help="pair i due at i × every / pairs into each cycle, not all at once",
    )
    args = parser.parse_args(argv)
    port = free_port()
    vendor = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "evals.demo_vendor",
            "--port",
            str(port),
            "--time-scale",
            str(args.time_scale),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_healthy(f"http://127.0.0.1:{port}/health")
    try:
        names = setup(f"http://127.0.0.1:{port}/v1", args.pairs)
        print("| worker processes | runs started / due | skipped | lag P50 s | P95 s | max s |")
        print("|---|---|---|---|---|---|")
        for workers in args.workers:
            r = measure(names, workers, args.every, args.cycles, args.stagger)
            print(
                f"| {r['workers']} | {r['runs']} / {r['expected']} | {r['skipped']} | "
                f"{r['p50']:.1f} | {r['p95']:.1f} | {r['max']:.1f} |",
                flush=True,
            )
    finally:
        vendor.terminate()
        vendor.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
