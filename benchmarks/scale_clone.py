"""Multiply the history that ``benchmarks.scale_data`` wrote: copy its runs, samples and rollups
K more times, each copy shifted D days further back, in SQL (PostgreSQL only).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scale_3m python -m benchmarks.scale_clone \\
        --copies 9 --shift-days 10

Why: the generator goes through the models and the summary function at ~600–800 samples/s on
this shared 2-core machine (3 M samples would take over an hour); a copy runs at the database's
speed. The copies repeat the generated days' payloads and summaries, so they have the same sizes
and shapes; only their times (and ids) differ. Provenance events are left as they are.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")
django.setup()

from django.db import connection, transaction  # noqa: E402

OFFSET = 10_000_000  # run ids of copy k: original + k × OFFSET
TABLES = {  # table: (time columns to shift, run id column)
    "monitor_run": (("created_at", "started_at", "finished_at"), "id"),
    "monitor_sample": (("started_at",), "run_id"),
    "monitor_runrollup": (("at",), "run_id"),
}


def columns(table: str) -> list[str]:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "ORDER BY ordinal_position",
            [table],
        )
        return [r[0] for r in cur.fetchall()]


def copy(table: str, k: int, shift_days: int) -> int:
    times, run_col = TABLES[table]
    cols = [c for c in columns(table) if c != "id" or table == "monitor_run"]
    exprs = []
    for c in cols:
        if c in times:
            exprs.append(f"{c} - interval '{k * shift_days} days'")
        elif c == run_col:
            exprs.append(f"{c} + {k * OFFSET}")
        else:
            exprs.append(c)
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(exprs)} "
            f"FROM {table} WHERE {run_col} < {OFFSET}"
        )
        return cur.rowcount


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=9)
    parser.add_argument("--shift-days", type=int, default=10)
    args = parser.parse_args(argv)
    if connection.vendor != "postgresql":
        sys.exit("scale_clone needs PostgreSQL (DATABASE_URL=postgres://…)")
    present = set(connection.introspection.table_names())
    t0 = time.monotonic()
    for k in range(1, args.copies + 1):
        with transaction.atomic():
            n = {t: copy(t, k, args.shift_days) for t in TABLES if t in present}
        print(f"copy {k}: {n} ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
    with connection.cursor() as cur:
        cur.execute(
            "SELECT setval(pg_get_serial_sequence('monitor_run', 'id'), "
            "(SELECT max(id) FROM monitor_run))"
        )
        cur.execute("ANALYZE")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
