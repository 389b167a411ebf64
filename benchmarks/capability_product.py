"""Capability through the product: one full probe of the ``capability`` suite, its cost, and
the "Is it worse?" page over a full window.

1. The ``capability`` suite (every benchmark case: HumanEval, BFCL simple/irrelevance/multiple/
   parallel, instructions, structured, long-tail) is synced into a fresh SQLite database, and
   one probe of a SIMULATED pair (``demo-distilled`` as fast, ``demo-base`` as base, the
   vendor in-process with no delays) goes through ``monitor.runs.pipeline.execute_run``:
   requests, storage, per-sample scoring (unit tests in the sandbox), summary. Reported: wall
   time, samples, cost at the example prices below.
2. The window: the probe's samples are copied into ``WINDOW_RUNS`` − 1 more done runs, each
   rolled up as the pipeline does (``monitor.derived.rollups.record_run``), and ``window_report``
   plus
   the whole page (``/pairs/NAME/worse/`` through Django's test client) are timed over the
   full window: median of 3, wall and CPU (``time.process_time``; the machine is shared).
   ``--before`` adds the figures measured on the code before the rollups, for comparison.
3. A budgeted day: with ``--budget`` USD a day, how many cases a probe takes (the estimate
   rule of ``monitor.runs.budget``) and what it then costs.

Run: ``.venv/bin/python benchmarks/capability_product.py --write-docs`` (a few minutes on 2
cores; needs the HumanEval and BFCL wheels in the cache).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TMP = Path(tempfile.mkdtemp(prefix="tierwatch-capability-bench-"))
os.environ["DATABASE_URL"] = f"sqlite:///{TMP / 'bench.sqlite3'}"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")
os.environ.setdefault("TIERWATCH_ALLOWED_HOSTS", "testserver")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from benchmarks.docs_section import write_section  # noqa: E402
from evals.sandbox import isolation  # noqa: E402
from evals.vendors.simulated import serve_in_thread  # noqa: E402
from monitor.derived.rollups import record_run  # noqa: E402
from monitor.judging import capability  # noqa: E402
from monitor.models import Endpoint, Pair, Run, Sample, Suite  # noqa: E402
from monitor.runs import budget  # noqa: E402
from monitor.runs.pipeline import execute_run  # noqa: E402
from monitor.runs.steps import create_run  # noqa: E402
from monitor.setup.suite_import import sync_benchmark_suite  # noqa: E402

SECTION = "## Capability through the product (probe, cost, page)"
PRICES = {"fast": (0.5, 2.0), "base": (3.0, 15.0)}  # USD per million tokens: input, output


def simulated_pair(url: str, suite: Suite, *, concurrency: int) -> Pair:
    """The pair "sim": the simulated vendor's distilled tier as fast, its base as base, at the
    example prices (``PRICES``), so a benchmark's cost figures are in dollars."""
    eps = {
        tier: Endpoint.objects.create(
            name=f"sim-{tier}",
            base_url=url,
            model=model,
            simulated=True,
            max_concurrency=concurrency,
            price_input_per_mtok=PRICES[tier][0],
            price_output_per_mtok=PRICES[tier][1],
        )
        for tier, model in (("fast", "demo-distilled"), ("base", "demo-base"))
    }
    return Pair.objects.create(name="sim", fast=eps["fast"], base=eps["base"], suite=suite)


def full_probe(url: str) -> tuple[Pair, Run, float]:
    pair = simulated_pair(url, sync_benchmark_suite(name="capability"), concurrency=8)
    t0 = time.perf_counter()
    run = execute_run(run_id=create_run(pair=pair).id)
    return pair, run, time.perf_counter() - t0


def fill_window(pair: Pair, run: Run) -> int:
    samples = list(Sample.objects.filter(run=run))
    for _ in range(capability.WINDOW_RUNS - 1):
        copy = Run.objects.create(pair=pair, suite=run.suite, status="done", summary=run.summary)
        for s in samples:
            s.pk, s.run = None, copy
        Sample.objects.bulk_create(samples, batch_size=2000)
        record_run(run=copy)
    return Sample.objects.filter(run__pair=pair).count()


def timed(fn, repeat: int = 3) -> tuple[float, float]:
    """(wall, CPU) seconds, the median of ``repeat`` calls each (the machine is shared, so CPU
    time, ``time.process_time``, is the steadier figure)."""
    walls, cpus = [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return sorted(walls)[len(walls) // 2], sorted(cpus)[len(cpus) // 2]


def command_before(before: str | None) -> str:
    return f" --before {before}" if before else ""


def before_rows(before: str | None, report_s, page_s) -> list[str]:
    """The figures measured before the rollups (samples read at every view), and the ratios."""
    if not before:
        return []
    rw, rc, pw, pc = (float(x) for x in before.split(","))
    return [
        f"| before the rollups (samples read every view, commit 7fe26a1): `window_report` "
        f"| {rw:.2f} s wall, {rc:.2f} s CPU (CPU ratio {rc / report_s[1]:.1f}×) |",
        f"| before the rollups: the whole page | {pw:.2f} s wall, {pc:.2f} s CPU (CPU "
        f"ratio {pc / page_s[1]:.1f}×) |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=float, default=0.05, help="USD per day")
    parser.add_argument("--before", help="report wall,CPU,page wall,CPU (s) before rollups")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_superuser("bench", password="bench-pw-123")
    with serve_in_thread(time_scale=0.0) as url:
        pair, run, wall = full_probe(url)
        n_cases = run.suite.cases.count()
        n_samples = run.samples.count()
        print(f"probe: {n_samples} samples in {wall:.0f} s", flush=True)
        cost = budget.run_cost(run)
        cost_report = timed(lambda: capability.window_report(pair), 1)
        n_window = fill_window(pair, run)
        report_s = timed(lambda: capability.window_report(pair))
        client = Client()
        client.force_login(user)
        page_s = timed(lambda: client.get(f"/pairs/{pair.name}/worse/"))
        print(
            f"window_report: wall {report_s[0]:.2f} s, CPU {report_s[1]:.2f} s; page: wall "
            f"{page_s[0]:.2f} s, CPU {page_s[1]:.2f} s",
            flush=True,
        )
        report = capability.window_report(pair)
        Pair.objects.filter(pk=pair.pk).update(daily_budget_usd=args.budget)
        # a new day: the full probe (yesterday) leaves its observed reply lengths, not its cost
        Run.objects.filter(pair=pair).exclude(id=run.id).delete()
        Run.objects.filter(id=run.id).update(created_at=budget.day_start() - timedelta(hours=1))
        pair.refresh_from_db()
        limited = execute_run(run_id=create_run(pair=pair).id)
    block = limited.summary_obj.budget
    lost = sum(
        1
        for r in report.results
        if r.p_adjusted is not None and r.p_adjusted < 0.05 and (r.diff_points or 0) < 0
    )
    lines = [
        SECTION,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()} ({os.cpu_count()} cores "
        f"shared with other work, load average {os.getloadavg()[0]:.1f}), Python "
        f"{platform.python_version()}, SQLite, sandbox `{isolation()}`. Command: "
        f"`.venv/bin/python benchmarks/capability_product.py{command_before(args.before)} "
        "--write-docs`. The pair is "
        "SIMULATED (`demo-distilled` vs `demo-base`, no delays), so the times are tierwatch's "
        "own work: requests through the client, storage, scoring, summary.",
        "",
        "| measure | value |",
        "| --- | --- |",
        f"| one full probe of `capability` ({n_cases} cases × 2 tiers = {n_samples} samples) "
        f"| {wall:.0f} s ({n_samples / wall:.1f} samples/s, unit tests in the sandbox) |",
        f"| its cost at fast ${PRICES['fast'][0]}/${PRICES['fast'][1]}, base "
        f"${PRICES['base'][0]}/${PRICES['base'][1]} per M tokens in/out "
        f"| ${cost['total']:.4f} (fast ${cost['fast']:.4f}, base ${cost['base']:.4f}) |",
        f"| `window_report` after 1 run | {cost_report[0]:.2f} s wall, {cost_report[1]:.2f} s "
        "CPU |",
        f"| `window_report` over a full window ({capability.WINDOW_RUNS} runs, {n_window:,} "
        f"samples), from rollups | {report_s[0]:.2f} s wall, {report_s[1]:.2f} s CPU "
        "(median of 3) |",
        f"| the whole Is it worse? page over that window | {page_s[0]:.2f} s wall, "
        f"{page_s[1]:.2f} s CPU (median of 3) |",
        *before_rows(args.before, report_s, page_s),
        f"| categories with a detected loss (Holm p < 0.05) over that window | {lost} of "
        f"{len(report.results)} |",
        f"| a probe with a daily budget of ${args.budget:.2f} | {block.taken} of "
        f"{block.available} cases, estimate ${block.bound_usd:.4f}, cost "
        f"${budget.run_cost(limited)['total']:.4f} |",
        "",
        "The copied window repeats one run's outcomes 30 times (the simulated tiers are "
        "deterministic at temperature 0), so its detections say nothing about power; power "
        'and time to detect at a budget are in "Capability benchmarks" above. The budget\'s '
        "estimate takes each reply at the P90 of the case's output tokens in the pair's recent "
        "runs (here: the one full probe before it), `max_tokens` for a case never answered; "
        "a run that still overshoots says so in its summary (before, at `max_tokens` for "
        "every reply, the same $0.05 took 6 cases, an upper bound of $0.0484 for a cost of "
        "$0.0076). Wall times follow the machine's load; CPU times are the figures to "
        "compare. What CPU remains is mostly the permutation tests (4,000 draws × 11 "
        "categories, ~0.5 s) and decoding the 60 rollups' per-case JSON.",
        "",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write_docs:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
