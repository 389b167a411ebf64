"""How long does the weekly SLA report take to render as PDF?

A week of synthetic samples (2 pairs, 4 endpoints, 7 days, ``--per-day`` requests per endpoint
and day, with 429s, timeouts and downgraded served tiers) in a fresh SQLite database; then the
report is built from the database (``build_sla_report``) and laid out (``render_pdf``: matplotlib
SVG charts + WeasyPrint), each timed over ``--repeats`` runs. The first page is also written as
PNG (pdftoppm) next to the PDF, to look at.

Run: ``.venv/bin/python benchmarks/sla_pdf.py --write-docs`` (about a minute).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TMP = Path(tempfile.mkdtemp(prefix="tierwatch-sla-bench-"))
os.environ["DATABASE_URL"] = f"sqlite:///{TMP / 'bench.sqlite3'}"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from benchmarks.docs_section import write_section  # noqa: E402
from monitor.models import Case, Endpoint, Pair, Run, Sample, Suite  # noqa: E402
from monitor.reporting.charts import report_charts  # noqa: E402
from monitor.reporting.pdf import render_pdf  # noqa: E402
from monitor.reporting.sla import build_sla_report  # noqa: E402

HEADER = "## SLA report PDF"
WEEK, MONDAY = "2026-W48", datetime(2026, 11, 23, tzinfo=UTC)


def populate(per_day: int) -> int:
    rng = random.Random(7)
    suite = Suite.objects.create(name="smoke")
    case = Case.objects.create(suite=suite, key="hello", messages=[])
    rows = []
    for vendor, speed in (("acme", 1.0), ("globex", 1.6)):
        fast = Endpoint.objects.create(
            name=f"{vendor}-fast",
            base_url="https://x.test/v1",
            model=f"{vendor}-1-fast",
            expected_tier="priority",
        )
        base = Endpoint.objects.create(
            name=f"{vendor}-base", base_url="https://x.test/v1", model=f"{vendor}-1"
        )
        pair = Pair.objects.create(
            name=vendor,
            fast=fast,
            base=base,
            suite=suite,
            slo_ttft_ms=600 * speed,
            slo_e2e_ms=4000 * speed,
        )
        run = Run.objects.create(pair=pair, suite=suite, status="done", summary={})
        Run.objects.filter(pk=run.pk).update(created_at=MONDAY + timedelta(hours=1))
        for tier, endpoint, ttft in (("fast", fast, 180 * speed), ("base", base, 520 * speed)):
            for day in range(7):
                for i in range(per_day):
                    roll = rng.random()
                    error = "rate_limited" if roll < 0.02 else "timeout" if roll < 0.03 else ""
                    load = 1.6 if day in (2, 3) else 1.0
                    served = (
                        "default"
                        if tier == "fast" and rng.random() < 0.04 * load
                        else "priority"
                        if tier == "fast"
                        else "default"
                    )
                    t = rng.lognormvariate(0, 0.3) * ttft * load
                    rows.append(
                        Sample(
                            run=run,
                            case=case,
                            endpoint=endpoint,
                            tier=tier,
                            seq=len(rows),
                            started_at=MONDAY + timedelta(days=day, seconds=i * 86400 // per_day),
                            ok=not error,
                            error_class=error,
                            ttft_ms=None if error else t,
                            e2e_ms=None if error else t + 2500 * speed,
                            served_tier=served,
                        )
                    )
    Sample.objects.bulk_create(rows, batch_size=2000)
    return len(rows)


def timed(fn, repeats: int) -> tuple[float, float, float, object]:
    result = fn()  # warm-up: imports, fonts, pango
    runs = []
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs), min(runs), max(runs), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--per-day", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pdf", default=str(TMP / "sla.pdf"))
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    n = populate(args.per_day)
    build = timed(lambda: build_sla_report(week=WEEK), args.repeats)
    report = build[3]
    cold = time.perf_counter()
    pdf = render_pdf(report)  # the first render in the process loads pango and fonts
    cold = time.perf_counter() - cold
    render = timed(lambda: render_pdf(report), args.repeats)
    charts = timed(lambda: report_charts(report), args.repeats)
    load = os.getloadavg()[0]
    Path(args.pdf).write_bytes(pdf)
    if shutil.which("pdftoppm"):
        subprocess.run(
            [
                "pdftoppm",
                "-png",
                "-r",
                "80",
                "-f",
                "1",
                "-l",
                "1",
                args.pdf,
                str(Path(args.pdf).with_suffix("")),
            ],
            check=True,
        )
    pages = subprocess.run(["pdfinfo", args.pdf], capture_output=True, text=True).stdout
    n_pages = next(
        (line.split()[-1] for line in pages.splitlines() if line.startswith("Pages:")), "?"
    )
    lines = [
        HEADER,
        "",
        f"`benchmarks/sla_pdf.py`: a week of {n:,} synthetic samples (4 endpoints × 7 days × "
        f"{args.per_day}), SQLite, median (min–max) of {args.repeats} runs after a warm-up; "
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} CPUs shared with other work (load average {load:.1f} at the end: "
        "the machine was busy, so read these as upper figures).",
        "",
        "| step | median | min | max |",
        "| --- | --- | --- | --- |",
        f"| `build_sla_report` (queries + aggregation) | {build[0]:.2f} s | {build[1]:.2f} s | "
        f"{build[2]:.2f} s |",
        f"| `render_pdf` (3 SVG charts + WeasyPrint) | {render[0]:.2f} s | {render[1]:.2f} s | "
        f"{render[2]:.2f} s |",
        f"| of which the 3 SVG charts (matplotlib) | {charts[0]:.2f} s | {charts[1]:.2f} s | "
        f"{charts[2]:.2f} s |",
        f"| first `render_pdf` in a fresh process (loads pango, fonts) | {cold:.2f} s | | |",
        "",
        f"The PDF: {len(pdf) / 1024:.0f} KiB, {n_pages} pages.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    print(f"PDF: {args.pdf}")
    if args.write_docs:
        write_section(HEADER, text)


if __name__ == "__main__":
    main()
