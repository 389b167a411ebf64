"""How much memory does one evaluation hold, and how fast is it stopped, with and without the
per-evaluation cap (``evals.sandbox_watch.Watch``)?

The program: 8 children of 200 MB each, every one under its 256 MB address-space limit
(``tests/evals/sandbox_bounds_worker.py``). Per mode (bwrap, unsafe-subprocess) and cap (the
default 512 MB, and a cap of 100 GB that never fires, which is how it ran before), over
``--repeats`` runs: the peak resident memory of the worker's descendants, sampled by this
script every 20 ms (``tests.evals.test_sandbox_bounds.Sampler``), and the evaluation's wall
time (the uncapped program sleeps until its 20 s deadline).

Run as root, from the worktree: ``.venv/bin/python benchmarks/sandbox_bounds.py --write-docs``
(about 3 minutes).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.docs_section import write_section  # noqa: E402
from evals.sandbox import run_unit_tests  # noqa: E402
from tests.evals.sandbox_bounds_worker import PROGRAMS  # noqa: E402
from tests.evals.test_sandbox_bounds import Sampler  # noqa: E402

PROGRAM = "8 children of 200 MB"
HEADER = "## Sandbox: memory of one evaluation, capped as a whole"


def measure(mode: str, cap_mb: int) -> tuple[float, float, str]:
    sampler = Sampler(os.getpid())
    sampler.start()
    started = time.perf_counter()
    result = run_unit_tests(
        PROGRAMS[PROGRAM], "assert True\n", timeout_s=20, mode=mode, total_memory_mb=cap_mb
    )
    wall = time.perf_counter() - started
    sampler.done.set()
    sampler.join()
    return sampler.peak_mb, wall, result.error_class or "passed"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    rows = []
    for mode in ("bwrap", "unsafe-subprocess"):
        for cap in (512, 100_000):
            runs = [measure(mode, cap) for _ in range(args.repeats)]
            peaks, walls = [r[0] for r in runs], [r[1] for r in runs]
            classes = sorted({r[2] for r in runs})
            cap_text = f"{cap} MB" if cap < 100_000 else "none (before)"
            rows.append(
                f"| {mode} | {cap_text} | {statistics.median(peaks):.0f} "
                f"({min(peaks):.0f}-{max(peaks):.0f}) | {statistics.median(walls):.1f} "
                f"({min(walls):.1f}-{max(walls):.1f}) | {', '.join(classes)} |"
            )
            print(rows[-1], flush=True)
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    text = (
        f"{HEADER}\n\n"
        f"Program: {PROGRAM}, each under its 256 MB address-space limit "
        "(`tests/evals/sandbox_bounds_worker.py`). Command: `.venv/bin/python "
        f"benchmarks/sandbox_bounds.py --write-docs` as root ({args.repeats} runs each; "
        f"{platform.machine()}, {os.cpu_count()} cores shared with other sessions, load "
        f"{load} at the end). Peak: resident memory of the worker's descendants, sampled "
        "every 20 ms by the script (a page shared after fork counts in each process). Wall: "
        "start to result; uncapped, the program sleeps until its 20 s deadline.\n\n"
        "| mode | cap (total) | peak MB, median (range) | wall s, median (range) | class |\n"
        "| --- | --- | --- | --- | --- |\n" + "\n".join(rows) + "\n\n"
        "The peak lies above the cap: the watch decides on proportional memory (a shared "
        "page counted once) while this view counts shared pages in every process, and a 50 ms "
        "step of the watch lets each child allocate further before the kill.\n"
    )
    if args.write_docs:
        write_section(HEADER, text)
    print(text)


if __name__ == "__main__":
    main()
