"""Multi-turn agent tasks on the SIMULATED pair: per-category success, the paired loss, and how
many runs the per-category loss detector needs to report it.

1. **Episodes.** ``--tasks`` BFCL v4 multi-turn tasks per category (the first of each file)
   are played by each simulated tier (``demo-base``, ``demo-fast``: the same simulated weights,
   ``demo-distilled``: loses later turns) through the project's own client and agent loop
   (:func:`evals.agent.loop.run_episode`, real HTTP, the environments in the sandbox), then
   scored as BFCL scores them (:func:`evals.agent.score.score_episode`). Reported per tier and
   category: success rate with its Wilson 95% interval, requests and tokens per task, TTFT per
   step; per category the paired difference with the stratified permutation test and the
   routing advice (:mod:`evals.stats.capability_paired`, as for every capability category).
2. **Runs to detection.** A monitoring history is replayed from those outcomes (the simulated
   vendor is deterministic at temperature 0, so a task's outcome per tier is the same every
   time it is asked): each hourly run takes ``--per-run`` tasks per category, rotating through
   each category's shuffled tasks, and is folded into the per-category loss detectors
   (:mod:`evals.stats.capability_loss`) at the product's threshold for hourly probes. Reported:
   runs until each category's loss is reported (over ``--histories`` rotation orders), and the
   reports for the honest fast tier.

Run: ``nice -n 15 .venv/bin/python benchmarks/agent_tasks.py --write-docs`` (the bfcl-eval
wheel is fetched through pip on first use).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.docs_section import write_section  # noqa: E402
from evals.agent.loop import run_episode  # noqa: E402
from evals.agent.records import AgentTask, Episode, Step, TaskScore, ToolCall  # noqa: E402
from evals.agent.score import score_episode  # noqa: E402
from evals.benchmarks import bfcl_multi_turn, simulate  # noqa: E402
from evals.claims import wilson  # noqa: E402
from evals.client import make_client  # noqa: E402
from evals.records import EndpointSpec  # noqa: E402
from evals.sandbox import isolation  # noqa: E402
from evals.stats import capability_loss  # noqa: E402
from evals.stats.capability_paired import (  # noqa: E402
    CaseCounts,
    accumulate,
    compare,
    routing_advice,
)
from evals.vendors.simulated import serve_in_thread  # noqa: E402

SECTION = "## Multi-turn agent tasks"
TIERS = ("demo-base", "demo-fast", "demo-distilled")
RUNS_PER_QUARTER = 2160  # hourly probes, the product's default cadence
BUDGET_PER_QUARTER = 0.5  # monitor.derived.evidence.BUDGET_PER_QUARTER


async def play(
    url: str, protocol: str, tasks: list[AgentTask], concurrency: int
) -> dict[tuple[str, str], tuple[Episode, TaskScore]]:
    """Every task on every tier, ``concurrency`` episodes at a time, tiers interleaved."""
    gate = asyncio.Semaphore(concurrency)
    out: dict[tuple[str, str], tuple[Episode, TaskScore]] = {}
    order = [(t, tier) for t in tasks for tier in TIERS]
    random.Random(0).shuffle(order)
    async with make_client() as client:

        async def one(task: AgentTask, tier: str) -> None:
            async with gate:
                endpoint = EndpointSpec(tier, protocol, url, tier)
                episode = await run_episode(client, endpoint, task, tier=tier)
                score = await asyncio.to_thread(score_episode, task, episode)
                out[(task.key, tier)] = (episode, score)

        await asyncio.gather(*(one(t, tier) for t, tier in order))
    return out


def detect(
    tasks: list[AgentTask], passed: dict[tuple[str, str], bool], fast: str, args
) -> dict[str, list[int | None]]:
    """Per category, over ``args.histories`` rotation orders: the run at which the loss
    detector first reported ``fast`` worse than base (None: not within ``args.runs``)."""
    cats = sorted({t.category for t in tasks})
    threshold = capability_loss.threshold_for(RUNS_PER_QUARTER, len(cats), BUDGET_PER_QUARTER)
    found: dict[str, list[int | None]] = {c: [] for c in cats}
    for h in range(args.histories):
        rng = random.Random(1000 + h)
        by_cat = defaultdict(list)
        for t in tasks:
            by_cat[t.category].append(t)
        for rows in by_cat.values():
            rng.shuffle(rows)
        states = {c: capability_loss.LossState() for c in cats}
        first: dict[str, int | None] = dict.fromkeys(cats)
        for r in range(1, args.runs + 1):
            for cat in cats:
                rows = by_cat[cat]
                picked = [rows[(r * args.per_run + i) % len(rows)] for i in range(args.per_run)]
                counts = [
                    CaseCounts(
                        cat, 1, int(passed[(t.key, fast)]), 1, int(passed[(t.key, "demo-base")])
                    )
                    for t in picked
                ]
                states[cat] = capability_loss.update(
                    states[cat], counts, threshold=threshold, run_id=r
                )
                if states[cat].alarmed and first[cat] is None:
                    first[cat] = r
        for cat in cats:
            found[cat].append(first[cat])
    return found


def ground_truth_check(per_category: int) -> tuple[int, int, float, list[str]]:
    """BFCL's ground truth played as an episode (one step a turn) and scored: (passed, tasks,
    wall seconds, the ids that failed). The scoring's own check against BFCL's data."""
    started = time.perf_counter()
    tasks = bfcl_multi_turn.load_tasks(limit=per_category)
    failed = []
    for task in tasks:
        episode = Episode(task.key, "base", turns_done=len(task.turns))
        for turn in range(len(task.turns)):
            calls = bfcl_multi_turn.truth_calls(task, turn)
            made = [
                ToolCall(c["name"], c["arguments_json"], f"t{turn}c{i}")
                for i, c in enumerate(calls)
            ]
            episode.steps.append(Step(turn, 0, True, calls=made))
        if not score_episode(task, episode).passed:
            failed.append(task.bfcl_id)
    return len(tasks) - len(failed), len(tasks), time.perf_counter() - started, failed


def pct(low_high: tuple[float, float]) -> str:
    return f"[{100 * low_high[0]:.0f}, {100 * low_high[1]:.0f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=25, help="tasks per category")
    parser.add_argument("--protocol", default="openai", choices=("openai", "anthropic"))
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--per-run", type=int, default=1, help="tasks per category per run")
    parser.add_argument("--runs", type=int, default=720, help="runs per history (a month)")
    parser.add_argument("--histories", type=int, default=50)
    parser.add_argument(
        "--ground-truth", type=int, default=200, help="tasks per category for the truth check"
    )
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()

    tasks = bfcl_multi_turn.load_tasks(limit=args.tasks)
    wall, cpu = time.perf_counter(), time.process_time()
    load_start = os.getloadavg()[0]
    with serve_in_thread(time_scale=0.0) as url:
        played = asyncio.run(play(url, args.protocol, tasks, args.concurrency))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    passed = {k: s.passed for k, (_, s) in played.items()}
    cats = sorted({t.category for t in tasks})

    rows = []
    for cat in cats:
        in_cat = [t for t in tasks if t.category == cat]
        cells = [f"`{cat}`"]
        for tier in TIERS:
            k = sum(passed[(t.key, tier)] for t in in_cat)
            cells.append(
                f"{k}/{len(in_cat)} = {100 * k / len(in_cat):.0f}% {pct(wilson(k, len(in_cat)))}"
            )
        rows.append("| " + " | ".join(cells) + " |")

    paired = []
    for fast in ("demo-fast", "demo-distilled"):
        outcomes = [
            (t.key, t.category, tier_name, passed[(t.key, tier)])
            for t in tasks
            for tier, tier_name in ((fast, "fast"), ("demo-base", "base"))
        ]
        detected = detect(tasks, passed, fast, args)
        for res in compare(accumulate(outcomes)):
            hits = [r for r in detected[res.category] if r is not None]
            runs = (
                f"{len(hits)}/{args.histories}; median {statistics.median(hits):.0f} "
                f"(max {max(hits)}) runs"
                if hits
                else f"0/{args.histories}"
            )
            advice = routing_advice(res, loss_detected=bool(hits))
            p = "–" if res.p_value is None else f"{res.p_value:.3g}"
            paired.append(
                f"| {fast} | `{res.category}` | {res.diff_points or 0:+.0f} | {p} | {runs} | "
                f"{advice} |"
            )

    cost = []
    for tier in TIERS:
        eps = [played[(t.key, tier)][0] for t in tasks]
        ttft = [s.ttft_ms for e in eps for s in e.steps if s.ttft_ms is not None]
        stops = defaultdict(int)
        for e in eps:
            stops[e.stop] += 1
        cost.append(
            f"| {tier} | {statistics.mean(e.requests for e in eps):.1f} | "
            f"{statistics.mean(e.prompt_tokens for e in eps):.0f} | "
            f"{statistics.mean(e.output_tokens for e in eps):.0f} | "
            f"{statistics.median(ttft):.1f} | "
            + ", ".join(f"{k} {v}" for k, v in sorted(stops.items()))
            + " |"
        )
    failures = defaultdict(int)
    for (_, tier), (_, score) in played.items():
        if tier == "demo-distilled" and not score.passed:
            failures[(score.failure, score.first_failing_turn)] += 1

    threshold = capability_loss.threshold_for(RUNS_PER_QUARTER, len(cats), BUDGET_PER_QUARTER)
    truth_ok, truth_n, truth_s, truth_failed = ground_truth_check(args.ground_truth)
    text = f"""{SECTION}

Measured {time.strftime("%Y-%m-%d")} on {platform.machine()} ({os.cpu_count()} cores shared with
other sessions, load average {load_start:.1f} at the start), Python {platform.python_version()},
sandbox {isolation()}. Command: `nice -n 15 .venv/bin/python benchmarks/agent_tasks.py
--tasks {args.tasks} --protocol {args.protocol} --histories {args.histories}
--ground-truth {args.ground_truth} --write-docs`
(episodes: {wall:.0f} s wall, {cpu:.0f} s CPU of this process; each episode's environment and
each score's environment is a bubblewrap process of its own). Tasks: the first {args.tasks} of
each BFCL v4 multi-turn category, all four categories, {len(tasks)} tasks × {len(TIERS)} tiers
= {len(played)} episodes through the project's client ({args.protocol} protocol, real HTTP,
the simulated vendor with no delays). The simulated base tier answers each turn with BFCL's
ground-truth calls and fails {100 * simulate.AGENT_BASE_FAIL:.0f}% of tasks by design; the
distilled tier, from the second turn on, drops or mangles one call of a turn with probability
{", ".join(f"{k} {v:.2f}" for k, v in simulate.AGENT_TURN_LOSS.items())}. A long-context task
asks exactly what its base twin asks, with the same tools (only the environment's data differs),
so the simulated vendor answers both with the base task's ground truth; in 20 of the 200 pairs
BFCL's ground truths differ, and the simulated tiers then fail the long-context task too: its
base rate is below the others' for that reason, on every tier alike.

The scoring's own check: BFCL's ground truth, played as an episode (one step a turn) and
scored in the sandbox, passes {truth_ok} of {truth_n} tasks (the first {args.ground_truth} of
each category; {truth_s:.0f} s wall, one environment per score){
        ": failed " + ", ".join(truth_failed) if truth_failed else ""
    }. `tests/evals/test_agent_score.py` keeps one task per category.

### Success rate per tier (passed / tasks, Wilson 95% interval in points)

| category | demo-base | demo-fast | demo-distilled |
| --- | --- | --- | --- |
{chr(10).join(rows)}

### Paired difference and detection per category

Difference = fast − base in points over the paired tasks, with the stratified permutation
test's p (one answer per task and tier). Runs to detection: the loss detector
(`evals.stats.capability_loss`, threshold c = {RUNS_PER_QUARTER} runs a quarter × {len(cats)}
categories / {BUDGET_PER_QUARTER} = {threshold:,.0f}) fed {args.per_run} task(s) per category
per hourly run, rotating through the category's tasks; {args.histories} rotation orders of
{args.runs} hourly runs each: how many orders reported the loss, and after how many runs.

| fast tier | category | difference | p | loss reported | routing advice |
| --- | --- | --- | --- | --- | --- |
{chr(10).join(paired)}

### Cost per task and stops

| tier | requests / task | prompt tokens / task | output tokens / task | TTFT p50 ms | stops |
| --- | --- | --- | --- | --- | --- |
{chr(10).join(cost)}

Where the distilled tier failed (BFCL's reason, first failing turn: tasks):
{", ".join(f"{f} at turn {t}: {n}" for (f, t), n in sorted(failures.items(), key=str))}.
"""
    print(text)
    if args.write_docs:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
