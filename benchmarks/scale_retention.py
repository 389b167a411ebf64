"""Retention throughput and disk per sample before and after payloads are emptied (PostgreSQL).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scale_ret \\
        python -m benchmarks.scale_retention --days 0 --batch-size 5000

Runs ``monitor.derived.retention.prune_payloads`` over the database that ``benchmarks.scale_data``
filled (``--days 0``: every sample but the exempt audits), then measures the sample table: as
left (space freed inside the table for new rows, what production sees after autovacuum) and
after ``VACUUM FULL`` (the size a table of only pruned rows needs).
"""

from __future__ import annotations

import argparse
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")
django.setup()

from django.db import connection  # noqa: E402

from monitor.derived.retention import prune_payloads  # noqa: E402
from monitor.models import RunRollup, Sample  # noqa: E402


def size(table: str) -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_total_relation_size(%s)", [table])
        return cur.fetchone()[0]


def report(label: str, n: int) -> None:
    total = size("monitor_sample")
    print(f"| {label} | {total / 2**20:,.0f} MB | {total / n:,.0f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument(
        "--no-vacuum-full",
        action="store_true",
        help="skip VACUUM FULL (it rewrites the table: minutes at 10 M samples)",
    )
    args = parser.parse_args(argv)
    n = Sample.objects.count()
    rollups = RunRollup.objects.count()
    print(f"samples {n:,}; rollups {rollups:,}, {size('monitor_runrollup') / rollups:,.0f} B each")
    print("| sample table | size | bytes per sample |\n|---|---|---|")
    report("full payloads", n)
    result = prune_payloads(days=args.days, batch_size=args.batch_size, max_seconds=3600)
    print(
        f"pruned {result.rows:,} rows in {result.batches} batches of ≤ {args.batch_size}: "
        f"{result.seconds:.1f} s, {result.rows_per_s:,.0f} rows/s"
    )
    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE monitor_sample")
    report("after pruning + VACUUM (space reusable, file not shrunk)", n)
    if not args.no_vacuum_full:
        with connection.cursor() as cur:
            cur.execute("VACUUM FULL monitor_sample")
        report("after VACUUM FULL", n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
