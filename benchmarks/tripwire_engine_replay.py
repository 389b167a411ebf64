"""Replay months of hourly logprob tripwires on real-engine pools, through the product's fold.

Pools: ``benchmarks/tripwire_engine_pools.py`` (llama.cpp windows of the tripwire's own
queries). Each month and tier: every hour one window is drawn from the scenario's null pool and
folded by ``monitor.derived.tripwire``'s own per-tier step (``_tier_after``: the first
``REFERENCE_RUNS`` runs frozen as the reference, then ``evals.stats.tripwire.window_test`` and
the e-detector at the product's threshold) — the same function ``after_run`` applies to the
stored ``TripwireState``. A firing on a null pool is a false alarm; it is acknowledged (the
tier's state emptied, as ``monitor.derived.tripwire.acknowledge`` does) and the month goes on.
At a random hour of each month the tier's state is also branched into each switch pool: hours
until it fires (or the month ends: not flagged).

Why a cache of p-values: one test is ~0.1 s and a month is 1,440 of them; a window drawn twice
against the same reference gets the p of its first draw (its permutation seed differs in the
product: a Monte Carlo difference of about ±0.005 at p = 0.5). The database path is checked
against this fold on whole months by ``tests/benchmarks/test_tripwire_engine_replay.py``.

Run: ``nice -n 15 .venv/bin/python benchmarks/tripwire_engine_replay.py --months 100``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import django
import numpy as np
from scipy.stats import chi2, norm

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")
django.setup()

from evals.stats import eprocess  # noqa: E402
from evals.stats import tripwire as stats  # noqa: E402
from monitor.derived import tripwire as derived  # noqa: E402

HOURS = 720  # a month of hourly runs
QUARTER_MONTHS = 3
# null scenario → switch pools branched from it
SCENARIOS: dict[str, tuple[list[str], list[str]]] = {
    "f16 1 thread": (["f16 1 thread"], ["f16 speculative (q4_0 draft)"]),
    "f16 2 threads": (["f16 2 threads"], []),
    "f16 no prompt cache": (["f16 no prompt cache"], []),
    "f16 2 slots": (["f16 2 slots"], []),
    "f16 4 slots": (
        ["f16 4 slots"],
        ["q8_0 4 slots", "q4_0 4 slots", "gemma 4 slots", "f16 4 slots n-gram speculative"],
    ),
    "all f16 mixed": (
        ["f16 1 thread", "f16 2 threads", "f16 no prompt cache", "f16 2 slots", "f16 4 slots"],
        ["q8_0 4 slots", "q4_0 4 slots", "gemma 4 slots"],
    ),
}
Window = dict[str, list[dict[str, float]]]


def key(window: Mapping[str, Any]) -> tuple:
    """A window's content (rows sorted per prompt: the statistic does not see their order)."""
    return tuple(
        (p, tuple(sorted(tuple(sorted(r.items())) for r in rows)))
        for p, rows in sorted(window.items())
    )


def cached_window_test(tolerance: float | None = None) -> Callable[..., stats.WindowTest]:
    """``evals.stats.tripwire.window_test`` with its results kept per (reference, window);
    ``tolerance`` (None: the product's default) for a what-if replay."""
    plain, memo = stats.window_test, {}
    extra = {} if tolerance is None else {"tolerance": tolerance}

    def window_test(reference: Any, current: Any, **kw: Any) -> stats.WindowTest:
        k = (key(reference), key(current))
        if k not in memo:
            memo[k] = plain(reference, current, **kw, **extra)
        return memo[k]

    window_test.memo = memo  # type: ignore[attr-defined]
    return window_test


def windows_of(pools: Mapping[str, Any], names: list[str]) -> list[Window]:
    return [w for n in names for life in pools[n]["lifetimes"] for w in life]


def month_script(
    scenario: str, month: int, n_null: int, switch_at: int | None = None
) -> dict[str, Any]:
    """The draws of one month: per tier a null window index per hour, and the switch hour
    (random unless given: the database check switches early to keep its months short)."""
    rng = np.random.default_rng([list(SCENARIOS).index(scenario), month])
    script = {
        "fast": rng.integers(n_null, size=HOURS).tolist(),
        "base": rng.integers(n_null, size=HOURS).tolist(),
        "switch_at": int(rng.integers(derived.REFERENCE_RUNS + 24, HOURS - 24)),
        "switch_seed": int(rng.integers(2**31)),
    }
    script["switch_at"] = script["switch_at"] if switch_at is None else switch_at
    return script


def fold(block: dict[str, Any], window: Window, hour: int) -> dict[str, Any]:
    """One hourly run of one tier, the product's step (run id and seed: the hour)."""
    return derived._tier_after(block, window, hour, hour)


def switched(block: dict[str, Any], pool: list[Window], rng: np.random.Generator,
             hours: int, ps: list[float] | None = None) -> int | None:  # fmt: skip
    """Runs after the switch until the tier's tripwire fires, or None within ``hours``; the
    runs' p-values are appended to ``ps``."""
    block = copy.deepcopy(block)
    for k in range(1, hours + 1):
        block = fold(block, pool[int(rng.integers(len(pool)))], HOURS + k)
        if ps is not None:
            ps.append(block["last"]["p"])
        if block["last"].get("new_alarm"):
            return k
    return None


def one_month(
    pools: Mapping[str, Any],
    scenario: str,
    month: int,
    *,
    hours: int = HOURS,
    switch_at: int | None = None,
) -> dict[str, Any]:
    """Both tiers hour by hour; a firing is acknowledged at once (both tiers' references are
    collected again, as ``monitor.derived.tripwire.acknowledge`` does)."""
    nulls, switches = SCENARIOS[scenario]
    switches = [n for n in switches if n in pools]  # a pool the build could not serve: left out
    null = windows_of(pools, nulls)
    script = month_script(scenario, month, len(null), switch_at)
    out: dict[str, Any] = {
        "alarms": [],
        "detect": {},
        "switch_p": {},
        "p": {"fast": [], "base": []},
    }
    blocks: dict[str, dict[str, Any]] = {"fast": {}, "base": {}}
    for hour in range(hours):
        for tier in ("fast", "base"):
            if hour == script["switch_at"] and blocks[tier].get("eprocess") is not None:
                rng = np.random.default_rng(script["switch_seed"])
                for name in switches:
                    pool = windows_of(pools, [name])
                    ps = out["switch_p"].setdefault(name, {}).setdefault(tier, [])
                    out["detect"].setdefault(name, {})[tier] = switched(
                        blocks[tier], pool, rng, HOURS - hour, ps
                    )
            blocks[tier] = fold(blocks[tier], null[script[tier][hour]], hour)
            out["p"][tier].append(blocks[tier]["last"].get("p"))
        fired = [t for t in blocks if blocks[t]["last"].get("new_alarm")]
        if fired:
            out["alarms"].append([hour, fired])
            blocks = {"fast": {}, "base": {}}
    return out


def refold(ps: list[float | None], floor: float, threshold: float) -> list[int]:
    """What-if: the runs at which the mixture e-detector (``evals.stats.eprocess``: the same
    grid and shift calibrators) alarms on these p-values when p is floored at ``floor`` instead
    of ``eprocess.P_FLOOR``; fresh after each alarm. A benchmark-only reading of the recorded
    p-values, for a proposal; the product's own fold is :func:`fold`."""
    cap = float(norm.isf(floor))
    inside = {d: float(norm.cdf(cap - d) - norm.cdf(-cap - d)) for d in eprocess.GRID}
    log_a = {d: float(np.log(np.exp(-d * cap) * norm.cdf(-cap) + np.exp(d * d / 2) * inside[d]
                             + np.exp(d * cap) * norm.sf(cap))) for d in eprocess.GRID}  # fmt: skip
    m, alarms = dict.fromkeys(eprocess.GRID, 1.0), []
    for i, p in enumerate(ps):
        if p is None:
            continue
        z = float(np.clip(norm.isf(p), -cap, cap))
        m = {d: max(v, 1.0) * float(np.exp(d * z - log_a[d])) for d, v in m.items()}
        if np.mean(list(m.values())) >= threshold:
            alarms.append(i)
            m = dict.fromkeys(eprocess.GRID, 1.0)
    return alarms


def poisson_ci(k: int, exposure: float) -> tuple[float, float]:
    """Exact (Garwood) 95 % interval of a Poisson rate: k events in ``exposure`` units."""
    lo = 0.0 if k == 0 else chi2.ppf(0.025, 2 * k) / 2
    return lo / exposure, chi2.ppf(0.975, 2 * k + 2) / 2 / exposure


WHAT_IF_FLOOR = 1e-4  # 1 / (B + 1) at the tripwire's 9,999 permutations


def summary(results: Mapping[str, list[dict[str, Any]]]) -> str:
    th = derived.threshold()
    lines = ["| null pool | months | false alarms | per pair per quarter [95 % CI] "
             f"| what-if p floor {WHAT_IF_FLOOR:g}: false alarms |",
             "|---|---|---|---|---|"]  # fmt: skip
    for scenario, months in results.items():
        k = sum(len(m["alarms"]) for m in months)
        lo, hi = poisson_ci(k, len(months) / QUARTER_MONTHS)
        rate = k / (len(months) / QUARTER_MONTHS)
        alt = sum(len(refold(m["p"][t], WHAT_IF_FLOOR, th)) for m in months for t in m["p"])
        lines.append(
            f"| {scenario} | {len(months)} | {k} | {rate:.2f} [{lo:.2f}, {hi:.2f}] | {alt} |"
        )
    lines += ["", "| null pool → switch (either tier) | switches | fired within 1 / 3 / 24 runs "
              "| median runs | never in the month | what-if p floor: within 1 / 3 runs |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for scenario, months in results.items():
        names = {n for m in months for n in m["detect"]}
        for name in sorted(names):
            ks = [k for m in months for k in m["detect"].get(name, {}).values()]
            hit = [k for k in ks if k is not None]
            share = [sum(k <= h for k in hit) / len(ks) for h in (1, 3, 24)]
            med = f"{np.median(hit):.0f}" if hit else "–"
            alt = [refold(ps, WHAT_IF_FLOOR, th) for m in months
                   for ps in m["switch_p"].get(name, {}).values()]  # fmt: skip
            within = [sum(bool(a) and a[0] + 1 <= h for a in alt) / len(alt) for h in (1, 3)]
            lines.append(f"| {scenario} → {name} | {len(ks)} | "
                         + " / ".join(f"{s:.0%}" for s in share)
                         + f" | {med} | {len(ks) - len(hit)} | "
                         + " / ".join(f"{s:.0%}" for s in within) + " |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pools", type=Path, default=Path("var/tripwire_pools.json"))
    parser.add_argument("--months", type=int, default=100)
    parser.add_argument("--scenarios", nargs="*", default=list(SCENARIOS))
    parser.add_argument("--out", type=Path, default=Path("var/tripwire_replay.json"))
    parser.add_argument("--tolerance", type=float, help="nats per token (default: the product's)")
    args = parser.parse_args()
    pools = json.loads(args.pools.read_text())["pools"]
    stats.window_test = cached_window_test(args.tolerance)  # type: ignore[assignment]
    results: dict[str, list[dict[str, Any]]] = {}
    started, cpu = time.monotonic(), time.process_time()
    for scenario in args.scenarios:
        results[scenario] = []
        for month in range(args.months):
            stats.window_test.memo.clear()  # type: ignore[attr-defined]
            results[scenario].append(one_month(pools, scenario, month))
        print(f"{scenario}: {args.months} months, {time.monotonic() - started:.0f} s wall, "
              f"{time.process_time() - cpu:.0f} s CPU", flush=True)  # fmt: skip
        args.out.write_text(json.dumps(results))
    print(summary(results))


if __name__ == "__main__":
    main()
