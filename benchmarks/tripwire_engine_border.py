"""Border-input tripwires on real engines, logprobs ignored (the black-box case), replayed.

Pools: ``benchmarks/tripwire_engine_pools.py`` ran the product's discovery criterion
(``evals.stats.border``: candidates × 3 temperature-0 one-token answers, ≥ 2 distinct answers
make a border input) on the null server, then collected one-token answers to every border
input found from each pool's server. Each month: the tier's reference is
``REFERENCE_SAMPLES`` answers per border input drawn from the null pool, the best ``KEEP`` kept
(``evals.stats.border.select``), as discovery does; then one run a day of ``SAMPLES`` answers
per kept input, folded by the product's own step (``monitor.derived.border.tier_after``, the
tripwire's threshold). Answers are drawn independently from each pool's answer counts. At a
random day the tier is switched to each switch pool: days until its tripwire fires.

Run: ``nice -n 15 .venv/bin/python benchmarks/tripwire_engine_border.py --months 100``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import django
import numpy as np

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")
django.setup()

from benchmarks.tripwire_engine_replay import QUARTER_MONTHS, poisson_ci  # noqa: E402
from evals.stats import border as stats  # noqa: E402
from monitor.derived import border as fold  # noqa: E402
from monitor.derived import tripwire as derived  # noqa: E402

DAYS = 30
NULL = "f16 4 slots"
SWITCHES = ("q8_0 4 slots", "q4_0 4 slots", "gemma 4 slots")
Pool = Mapping[str, Mapping[str, int]]


def draw(pool: Pool, inputs: list[str], n: int, rng: np.random.Generator) -> dict[str, dict]:
    """``n`` answers per input, drawn from the pool's answer counts."""
    out = {}
    for p in inputs:
        tokens = sorted(pool.get(p, {}))
        if not tokens:
            continue
        counts = np.array([pool[p][t] for t in tokens], dtype=float)
        picks = rng.choice(len(tokens), size=n, p=counts / counts.sum())
        out[p] = {tokens[i]: int(c) for i, c in Counter(picks.tolist()).items()}
    return out


def discovered(found: list[str], null: Pool, rng: np.random.Generator) -> dict[str, Any]:
    """The tier's border block as ``monitor.runs.border.discover`` leaves it."""
    asked = found[: stats.DISCOVERY_TARGET]
    reference = draw(null, asked, stats.REFERENCE_SAMPLES, rng)
    inputs = stats.select(reference, stats.KEEP)
    if len(inputs) < stats.MIN_KEEP:
        return {"inputs": [], "reference": {}, "failed": f"only {len(inputs)} border inputs"}
    return {"inputs": inputs, "reference": {p: reference[p] for p in inputs}}


def one_month(data: Mapping[str, Any], month: int) -> dict[str, Any]:
    rng = np.random.default_rng([7, month])
    pools, found = data["border"], data["border_discovery"]["found"]
    threshold = derived.threshold()
    block = fold.tier_after(
        {}, {"discovered": discovered(found, pools[NULL], rng)}, 0, 0, threshold
    )
    inputs = block["border"]["inputs"]
    out: dict[str, Any] = {"inputs": len(inputs), "alarms": [], "detect": {}}
    if not inputs:
        return out
    switch_at = int(rng.integers(2, DAYS - 7))
    for day in range(1, DAYS + 1):
        if day == switch_at:
            for name in SWITCHES:
                b = copy.deepcopy(block)
                for k in range(1, DAYS - day + 2):
                    b = fold.tier_after(
                        b,
                        {"current": draw(pools[name], inputs, stats.SAMPLES, rng)},
                        100 + k,
                        100 + k,
                        threshold,
                    )
                    if b["last"].get("new_alarm"):
                        break
                out["detect"][name] = k if b["last"].get("new_alarm") else None
        current = draw(pools[NULL], inputs, stats.SAMPLES, rng)
        block = fold.tier_after(block, {"current": current}, day, day, threshold)
        if block["last"].get("new_alarm"):
            out["alarms"].append(day)
            block = {**block, "eprocess": None}  # acknowledged (discovery kept: a shortcut)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pools", type=Path, default=Path("var/tripwire_pools.json"))
    parser.add_argument("--months", type=int, default=100)
    args = parser.parse_args()
    data = json.loads(args.pools.read_text())
    found = data["border_discovery"]["found"]
    print(
        f"discovery on {NULL}: {len(found)} border inputs among "
        f"{data['border_discovery']['candidates']} candidates"
    )
    months = [one_month(data, m) for m in range(args.months)]
    runnable = [m for m in months if m["inputs"]]
    print(f"months with ≥ {stats.MIN_KEEP} kept inputs: {len(runnable)} of {len(months)}")
    if not runnable:
        return
    k = sum(len(m["alarms"]) for m in runnable)
    lo, hi = poisson_ci(k, len(runnable) / QUARTER_MONTHS)
    print(
        f"false alarms: {k} in {len(runnable)} months, "
        f"{k / (len(runnable) / QUARTER_MONTHS):.2f} [{lo:.2f}, {hi:.2f}] per tier per quarter"
    )
    for name in SWITCHES:
        ks = [m["detect"].get(name) for m in runnable if name in m["detect"]]
        hit = [x for x in ks if x is not None]
        med = f"{np.median(hit):.0f}" if hit else "–"
        print(
            f"{name}: fired in {len(hit)} of {len(ks)} months, median {med} daily runs, "
            f"within 1 / 3 / 7 runs: {[sum(x <= h for x in hit) for h in (1, 3, 7)]}"
        )


if __name__ == "__main__":
    main()
