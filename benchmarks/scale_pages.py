"""Server time and query count of the pages and of the weekly SLA report on the database that
``benchmarks.scale_data`` filled.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scale_03m \\
        python -m benchmarks.scale_pages --repeat 20 --week 2026-W48

Pages go through Django's test client (the whole request: middleware, views, templates) with a
logged-in user, in this process, so the time is server time without a network or browser.
Each page is timed twice: **cold**, the first view after a new run (the pair's figure cache
gets a new generation before each request, as a run's summary write does:
``monitor.derived.page_cache.touch``), and **warm**, a repeated view (the first request is a warm-up
and not counted); the overview also with the whole cache emptied before each request (a
Redis restart: every pair's cells and figures rebuilt). Code without the figure cache (before
it existed) has no cold case: both rows time the same thing. The machine is shared: CPU ms
(this process's CPU time, without PostgreSQL's) is the figure that does not move with the load
average, which is printed too; query ms is the time spent waiting for PostgreSQL in one warm
request (one sample).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from statistics import median

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")
django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.cache import cache  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from monitor.models import Pair, Run, Sample  # noqa: E402
from monitor.reporting.sla import build_sla_report, render_text  # noqa: E402


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def timed(
    call, repeat: int, before=None, slow_ms: float = 0
) -> tuple[list[float], list[float], list[float]]:
    """Wall and CPU milliseconds of each of ``repeat`` calls (``before()`` untimed ahead of each
    one) after one warm-up, and the query times of one call (printing those over ``slow_ms``,
    to EXPLAIN them, when it is set)."""
    call()
    times, cpu, queries = [], [], []

    def count(execute, sql, params, many, context):  # request_started resets queries_log
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            queries.append(1000 * (time.perf_counter() - t0))
            if slow_ms and queries[-1] > slow_ms:
                print(f"  slow query {queries[-1]:.0f} ms: {sql} {params}", file=sys.stderr)

    with connection.execute_wrapper(count):
        call()
    for _ in range(repeat):
        if before is not None:
            before()
        t0, c0 = time.perf_counter(), time.process_time()
        call()
        times.append(1000 * (time.perf_counter() - t0))
        cpu.append(1000 * (time.process_time() - c0))
    return times, cpu, queries


def new_generation(pair: Pair):
    """What a finished run does to the pair's cached pages: a new generation (the view then
    reads the pair row again, as a real request does)."""
    from monitor.models import bump_generation

    return lambda: bump_generation([pair.pk])


def row(label: str, times: list[float], cpu: list[float], queries: list[float]) -> str:
    return (
        f"| {label} | {median(times):.0f} / {p95(times):.0f} | {median(cpu):.0f} / "
        f"{p95(cpu):.0f} | {len(queries)} | {sum(queries):.0f} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--report-repeat", type=int, default=3)
    parser.add_argument("--week", default="2026-W48")
    parser.add_argument("--pair", default="pair00")
    parser.add_argument("--slow-ms", type=float, default=0, help="print queries slower than this")
    args = parser.parse_args(argv)
    setup_test_environment()  # adds "testserver" to ALLOWED_HOSTS
    user, _ = get_user_model().objects.update_or_create(  # every page: all permissions
        username="bench", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)
    pair = Pair.objects.get(name=args.pair)
    audit = Run.objects.filter(pair=pair, kind="audit").order_by("-created_at").first()
    pages = {
        "overview `/`": "/",
        "pair": f"/pairs/{pair.name}/",
        "speed": f"/pairs/{pair.name}/speed/",
        "verdict": f"/pairs/{pair.name}/verdict/",
        "worse": f"/pairs/{pair.name}/worse/",
        f"audit run ({audit.samples.count()} samples)": f"/runs/{audit.id}/",
    }
    load = os.getloadavg()[0]
    print(
        f"samples: {Sample.objects.count():,}  runs: {Run.objects.count():,}  "
        f"load average: {load:.1f} on {os.cpu_count()} cores"
    )
    print(
        "| page | wall ms P50 / P95 | CPU ms P50 / P95 (this process) | queries | query ms |\n"
        "|---|---|---|---|---|"
    )
    touch = new_generation(pair)
    for label, url in pages.items():

        def get(url=url):
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)

        cold = timed(get, args.repeat, before=touch or (lambda: None))
        warm = timed(get, args.repeat, slow_ms=args.slow_ms)
        print(row(f"{label}, cold", *cold), flush=True)
        print(row(f"{label}, warm", *warm), flush=True)

    def overview():
        assert client.get("/").status_code == 200

    emptied = timed(overview, args.repeat, before=cache.clear)  # a Redis restart, a flush
    print(row("overview `/`, cache emptied", *emptied), flush=True)
    times, cpu, queries = timed(
        lambda: render_text(build_sla_report(week=args.week)),
        args.report_repeat,
        slow_ms=args.slow_ms,
    )
    print(row(f"`sla_report --week {args.week}`", times, cpu, queries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
