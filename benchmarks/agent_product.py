"""Multi-turn agent tasks through the product: one probe of the ``bfcl_agent`` suite, what it
costs, and how many probes the per-category loss detector needs.

1. The ``bfcl_agent`` suite (BFCL v4 multi-turn, 5 tasks per category) is synced into a fresh
   SQLite database and one probe of a SIMULATED pair (``demo-distilled`` as fast,
   ``demo-base`` as base, the vendor in-process with no delays) goes through
   ``monitor.runs.pipeline.execute_run``: episodes (each environment in the sandbox), storage,
   scoring in the evaluate step, summary. Reported: wall time and CPU (this process and its
   sandbox children), per tier the requests, tokens, model time and cost per task, and the
   success rate per category with its Wilson interval.
2. The loss detector: the simulated vendor's answers are seeded per task and turn, so every
   probe of the pair answers alike; the probe's rollups are folded into the pair's loss
   detectors once per further probe, as ``monitor.derived.loss_detectors.after_run`` does
   after each run, until each category alarms or ``MAX_PROBES`` (hourly probes, the
   detector's default cadence).

Run: ``.venv/bin/python benchmarks/agent_product.py --write-docs`` (a few minutes on 2 cores;
needs the BFCL wheel in the cache).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TMP = Path(tempfile.mkdtemp(prefix="tierwatch-agent-bench-"))
os.environ["DATABASE_URL"] = f"sqlite:///{TMP / 'bench.sqlite3'}"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from benchmarks.capability_product import PRICES, simulated_pair  # noqa: E402
from benchmarks.docs_section import write_section  # noqa: E402
from evals.sandbox import isolation  # noqa: E402
from evals.vendors.simulated import serve_in_thread  # noqa: E402
from monitor.derived import loss_detectors  # noqa: E402
from monitor.judging import capability  # noqa: E402
from monitor.models import Pair, Run, RunRollup, Sample  # noqa: E402
from monitor.runs import budget  # noqa: E402
from monitor.runs.pipeline import execute_run  # noqa: E402
from monitor.runs.steps import create_run  # noqa: E402
from monitor.setup.suite_import import sync_benchmark_suite  # noqa: E402
from monitor.web.worse import agent_rows, rate_cell, usd  # noqa: E402

SECTION = "## Multi-turn agent tasks through the product (probe, cost, runs to detect)"
MAX_PROBES = 200
NOTE = (
    "Each task is played twice per tier (the pair's default of 2 repetitions), so a category's "
    "10 episodes are 5 tasks. The probes to detect repeat one probe's outcomes (the simulated "
    "tiers answer alike every probe), so they say how fast the detector's threshold is reached "
    "at these differences, not what a real vendor's run-to-run variation would take; with 5 "
    "tasks per category, a 20-point loss takes several times the probes an 80-point one does."
)


def cpu_s() -> float:
    own, children = (
        resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def probe(url: str) -> tuple[Pair, Run, float, float]:
    pair = simulated_pair(url, sync_benchmark_suite(name="bfcl_agent"), concurrency=4)
    wall, cpu = time.perf_counter(), cpu_s()
    run = execute_run(run_id=create_run(pair=pair).id)
    return pair, run, time.perf_counter() - wall, cpu_s() - cpu


def probes_to_alarm(pair: Pair, run: Run) -> dict[str, int | None]:
    """Per category, the probe (1 = the measured one) at which its loss detector alarmed."""
    rollups = list(RunRollup.objects.filter(run=run).values())
    fired: dict[str, int | None] = {c: None for c in loss_detectors.categories(pair)}
    loss_detectors.after_run(run_id=run.id)
    for i in range(1, MAX_PROBES + 1):
        for cat, state in loss_detectors.states(pair).items():
            if state.alarmed and fired.get(cat) is None:
                fired[cat] = i
        if all(v is not None for v in fired.values()) or i == MAX_PROBES:
            return fired
        copy = Run.objects.create(
            pair=pair, suite=run.suite, kind=run.kind, status="done", repeat=run.repeat
        )
        RunRollup.objects.bulk_create(
            RunRollup(**{**r, "id": None, "run_id": copy.id, "at": copy.created_at})
            for r in rollups
        )
        loss_detectors.after_run(run_id=copy.id)
    return fired


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    with serve_in_thread(time_scale=0.0) as url:
        pair, run, wall, cpu = probe(url)
    assert run.status == "done", run.error
    samples = Sample.objects.filter(run=run)
    episodes = samples.filter(tests_detail__kind="agent").count()
    report = capability.window_report(pair)
    cost = budget.run_cost(run)
    fired = probes_to_alarm(pair, run)
    lines = [
        SECTION,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()} ({os.cpu_count()} cores "
        f"shared with other work, load average {os.getloadavg()[0]:.1f}), Python "
        f"{platform.python_version()}, SQLite, sandbox `{isolation()}`. Command: "
        "`.venv/bin/python benchmarks/agent_product.py --write-docs`. The pair is SIMULATED "
        "(`demo-distilled` vs `demo-base`, no delays): the times are tierwatch's own work "
        "(requests through the client, an environment process per episode in the sandbox, "
        "storage, scoring with the benchmark's answer played in a fresh environment, summary).",
        "",
        f"One probe of `bfcl_agent` ({pair.suite.cases.count()} tasks, both tiers): "
        f"{episodes} episodes, {samples.count()} requests, {wall:.1f} s wall, {cpu:.1f} s CPU "
        f"(this process and its sandbox children), cost at the example prices (USD per million "
        f"tokens, fast {PRICES['fast'][0]}/{PRICES['fast'][1]}, base "
        f"{PRICES['base'][0]}/{PRICES['base'][1]} input/output): fast "
        f"{usd(cost['fast'])}, base {usd(cost['base'])}.",
        "",
        "| category | tier | episodes | requests per task | prompt tokens per task | output "
        "tokens per task | model time per task (s) | cost per task |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for a in agent_rows(pair, report):
        lines.append(
            f"| {a['category']} | {a['tier']} | {a['episodes']} | {a['requests']} | "
            f"{a['prompt']} | {a['output']} | {a['seconds']} | {a['cost']} |"
        )
    lines += [
        "",
        "Success rate per category (Wilson 95%) and the probes the per-category loss detector "
        "took to report the loss (every probe answers alike: the simulated answers are seeded "
        f"per task and turn; its threshold at hourly probes, at most {MAX_PROBES} probes tried):",
        "",
        "| category | fast | base | paired difference | probes to detect |",
        "|---|---|---|---|---|",
    ]
    for r in report.results:
        rates = report.rates[r.category]
        when = fired.get(r.category)
        lines.append(
            f"| {r.category} | {rate_cell(rates['fast'])} | {rate_cell(rates['base'])} | "
            f"{r.diff_points:+.0f} points | {when if when else 'none in ' + str(MAX_PROBES)} |"
        )
    lines += ["", NOTE]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write_docs:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
