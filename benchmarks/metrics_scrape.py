"""How long does a Prometheus scrape of ``/metrics`` take with 50 pairs?

A fresh database (SQLite in a temporary directory, or the PostgreSQL given by
``--database-url``) gets ``--pairs`` pairs, each with ``--runs`` finished probes (both tiers,
three scenarios), one audit with a verdict, a failed run and an open alert; then ``/metrics``
is fetched through Django's test client (view, collector, queries, text format) ``--repeats``
times with the bearer token, and the queries per scrape are counted.

Run: ``.venv/bin/python benchmarks/metrics_scrape.py --write-docs`` (under a minute).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TOKEN = "bench-token"
HEADER = "## Prometheus scrape (`/metrics`)"  # + the engine: one section per engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--runs", type=int, default=20, help="finished probes per pair")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--database-url", help="default: a fresh SQLite file")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tierwatch-metrics-bench-"))
    os.environ["DATABASE_URL"] = args.database_url or f"sqlite:///{tmp / 'bench.sqlite3'}"
    os.environ["TIERWATCH_METRICS_TOKEN"] = TOKEN
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from benchmarks.metrics_scrape_data import breakdown, populate, scrape

    call_command("migrate", verbosity=0)
    populate(pairs=args.pairs, runs=args.runs)
    scrape("")  # a 401: loads the URL configuration (every page module) in this process
    first_s, _, _ = scrape(TOKEN)
    timings, queries, sizes = [], set(), set()
    for _ in range(args.repeats):
        seconds, n_queries, body = scrape(TOKEN)
        timings.append(seconds)
        queries.add(n_queries)
        sizes.add(len(body))
    series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))
    engine = "PostgreSQL" if args.database_url else "SQLite"
    load = os.getloadavg()[0]
    header = f"{HEADER}, {engine}"
    text = (
        f"{header}\n\n"
        f"`benchmarks/metrics_scrape.py`: {args.pairs} pairs, each with {args.runs} finished "
        f"probes (two tiers, three scenarios), an audit with a verdict, a failed run and an open "
        f"alert; {engine}; `GET /metrics` with the token through Django's test client (view, "
        f"collector, queries, text format), {args.repeats} scrapes after a first one; "
        f"CPython {platform.python_version()}, 2 CPUs shared with other work (load average "
        f"{load:.1f} at the end).\n\n"
        "| figure | value |\n| --- | --- |\n"
        f"| scrape time, median | {statistics.median(timings) * 1000:.0f} ms |\n"
        f"| scrape time, min – max | {min(timings) * 1000:.0f} – {max(timings) * 1000:.0f} ms |\n"
        f"| first scrape (URLs already loaded; cold database cache) | {first_s * 1000:.0f} ms |\n"
        f"| queries per scrape | {', '.join(map(str, sorted(queries)))} |\n"
        f"| series (samples) in the output | {series:,} |\n"
        f"| output size | {max(sizes) / 1024:.0f} KiB |\n"
        + "".join(
            f"| {part}, median | {sec * 1000:.0f} ms |\n"
            for part, sec in breakdown(args.repeats).items()
        )
        + "\n"
        "The query count does not grow with the pairs (the latest run per pair is one "
        "correlated subquery); the time grows with the series, i.e. with pairs × scenarios.\n\n"
    )
    print(text)
    if args.write_docs:
        from benchmarks.docs_section import write_section

        write_section(header, text)


if __name__ == "__main__":
    main()
