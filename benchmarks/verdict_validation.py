"""Does the verdict work on real engines? False alarms, power, labels and cost of the MMD test.

Two steps, so the slow one runs once and the analysis can be repeated in minutes:

1. ``collect``: pools of temperature-1 completions of the ``audit`` prompts (the 25 that
   ``manage.py measure_ladder`` picks with seed 0) from the local llama.cpp vendor
   (``evals.vendors.llamacpp.vendor``, its own state file, so a developer's running vendor is left
   alone): many samples per prompt from the base tier ``smollm2-f16``, fewer from each
   fast tier (Q8_0, Q4_0, n-gram speculative decoding) and from the different model (Gemma 3
   270M). One shuffled plan over all targets (a target's requests spread in proportion to its
   quota, so a time-budget cut leaves every pool proportionally filled), each server one or
   two requests at a time, at most ``--concurrency`` in flight, the project's own client
   (``evals.client.stream_chat``). Pools are saved as JSON under
   ``$TIERWATCH_CACHE/validation/`` (not the repo); a second ``collect`` tops them up.
2. ``analyse``: resampled tests from the pools. For one resample at k samples per prompt, each
   prompt's pool is shuffled and cut into consecutive chunks, so the draws *from one pool* are
   disjoint (base batch 0, base batch 1, and for A-vs-A the "fast" batch); fast tiers come
   from their own pool. Each resample is a whole product verdict as ``compute_verdict`` builds
   it: ``mmd_test`` fast vs base, the base tier against another batch of itself
   (``evals.stats.stability.base_stability``, reported, never a label), then
   ``evals.stats.labels.judge``. "Rejects" is the MMD fast-vs-base p < α, the label is
   ``judge``'s.

Limits, plainly: resamples of one pool are not independent runs. Two resamples at k per
prompt from a pool of m per prompt share k/m of their samples on average, so the rejection
rates describe *these pools*: given the pools the resamples are independent (their binomial
intervals hold for the pool-conditional rate), but the variation from one collection to the
next is not covered, and where k/m is near 1 (250 per tier from a pool of 12 per prompt) the
rate is close to "did this one pool reject". What they do give: the false-alarm rate under a
null that holds by construction (exchangeable draws of one server: a check of the code), the
order of magnitude of power at each n, and the whole-pool effect sizes (MMD² with every
sample), from which the sample size a substitution needs can be read against the null's 95%
quantile.

Run (the lock keeps other engine benchmarks off the cores while servers run):
``flock /tmp/tierwatch-engine.lock .venv/bin/python benchmarks/verdict_validation.py collect``
``flock /tmp/tierwatch-engine.lock .venv/bin/python benchmarks/verdict_validation.py analyse
--write-docs``
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy.stats import binom  # noqa: E402

from benchmarks.docs_section import write_section  # noqa: E402
from evals.client import RETRIED_MARKER, make_client, stream_chat  # noqa: E402
from evals.records import ChatRequest  # noqa: E402
from evals.stats.labels import LABEL_WORDS, LABELS, judge  # noqa: E402
from evals.stats.ladder import REFERENCE_LADDER  # noqa: E402
from evals.stats.mmd import DEFAULT_L, mmd_test  # noqa: E402
from evals.stats.sequential import BettingTest  # noqa: E402
from evals.stats.stability import base_stability  # noqa: E402
from evals.suites import get_suite  # noqa: E402
from evals.vendors.llamacpp import cache_dir, vendor  # noqa: E402

SECTION = "## Verdict on real engines"
BASE = "smollm2-f16"
QUOTAS = {BASE: 30, "smollm2-q8": 14, "smollm2-q4": 14, "smollm2-f16-spec": 12, "gemma-270m": 10}
# comparison name → (fast target, known answer)
COMPARISONS = {
    "f16 vs f16 (A-vs-A)": (BASE, "same"),
    "spec vs f16": ("smollm2-f16-spec", "same"),
    "q8 vs f16": ("smollm2-q8", "same weights, Q8_0"),
    "q4 vs f16": ("smollm2-q4", "same weights, Q4_0"),
    "gemma vs f16": ("gemma-270m", "different model"),
}
PER_PROMPT = (2, 5, 10)  # × 25 prompts = 50, 125, 250 samples per tier
ALPHA = 0.05
FLAGGED = ("outputs_differ", "capability_difference")  # the labels that say "a difference"


def pool_dir() -> Path:
    return cache_dir() / "validation"


def audit_prompts(n: int, seed: int = 0) -> list:
    """The prompts ``measure_ladder`` uses (same selection rule), so ladder and pools agree."""
    cases = get_suite("audit").cases
    return sorted(random.Random(seed).sample(cases, min(n, len(cases))), key=lambda c: c.key)


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# --- 1. collect ------------------------------------------------------------------------------


def plan(pools: dict, quotas: dict[str, int], keys: list[str], seed: int) -> list[tuple]:
    """(target, key) requests still missing, ordered by each target's fractional progress
    (rep + u) / quota with u uniform, so targets advance in proportion to their quotas."""
    rng = random.Random(seed)
    items = []
    for target, quota in quotas.items():
        for key in keys:
            have = len(pools["targets"].get(target, {}).get("samples", {}).get(key, []))
            items += [((rep + rng.random()) / quota, target, key) for rep in range(have, quota)]
    return [(t, k) for _, t, k in sorted(items)]


def save(pools: dict, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(pools))
    tmp.replace(path)


async def send_all(
    todo: list[tuple],
    urls: dict[str, str],
    pools: dict,
    path: Path,
    *,
    budget_s: float,
    concurrency: int,
    per_target: dict[str, int],
) -> Counter:
    cases = {c.key: c for c in get_suite("audit").cases}
    specs = {t: vendor.endpoint_spec(t, u) for t, u in urls.items()}
    total = asyncio.Semaphore(concurrency)
    mine = {t: asyncio.Semaphore(per_target.get(t, 1)) for t in specs}
    deadline = time.monotonic() + budget_s
    counts: Counter = Counter()
    last_save = time.monotonic()

    async def one(client, target: str, key: str) -> None:
        nonlocal last_save
        async with mine[target], total:
            if time.monotonic() > deadline:
                counts["skipped (budget)"] += 1
                return
            case = cases[key]
            rec = await stream_chat(
                client,
                specs[target],
                ChatRequest(messages=case.messages, max_tokens=case.max_tokens, temperature=1.0),
            )
        entry = pools["targets"].setdefault(target, {"samples": {}, "failed": []})
        if rec.ok:
            entry["samples"].setdefault(key, []).append(
                {
                    "text": rec.text,
                    "t": rec.started_at,
                    "retried": RETRIED_MARKER in (rec.headers or {}),
                }
            )
            counts[f"{target} ok"] += 1
        else:
            entry["failed"].append(
                {
                    "key": key,
                    "t": rec.started_at,
                    "error": f"{rec.error_class}: {rec.error_message}",
                }
            )
            counts[f"{target} failed"] += 1
        if time.monotonic() - last_save > 30:
            save(pools, path)
            last_save = time.monotonic()

    async with make_client() as client:
        await asyncio.gather(*(one(client, t, k) for t, k in todo))
    return counts


def collect(args: argparse.Namespace) -> None:
    path = args.pools
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = [c.key for c in audit_prompts(args.prompts)]
    pools = json.loads(path.read_text()) if path.exists() else {"targets": {}, "runs": []}
    if pools.get("prompts") not in (None, keys):
        sys.exit(f"{path} holds other prompts; use --pools to start a new file")
    pools["prompts"] = keys
    quotas = dict(QUOTAS)
    for spec in args.quota or []:
        name, n = spec.split("=")
        quotas[name] = int(n)
    todo = plan(pools, quotas, keys, seed=len(pools["runs"]))
    state = pool_dir() / "run" / "vendor.json"
    started_at, load_start, t0 = dt.datetime.now(dt.UTC), loadavg(), time.monotonic()
    urls = vendor.up(list(quotas), state=state, log=lambda m: print(m, file=sys.stderr))
    version = json.loads(state.read_text())[BASE]["llama_cpp"]
    try:
        counts = asyncio.run(
            send_all(
                todo,
                urls,
                pools,
                path,
                budget_s=args.budget_s,
                concurrency=args.concurrency,
                per_target={BASE: 2},
            )
        )
    finally:
        vendor.down(list(quotas), state=state)
    pools["runs"].append(
        {
            "started": started_at.isoformat(timespec="seconds"),
            "requests": len(todo),
            "seconds": round(time.monotonic() - t0, 1),
            "loadavg_start": load_start,
            "loadavg_end": loadavg(),
            "quotas": quotas,
            "concurrency": args.concurrency,
            "llama_cpp": version,
            "nproc": os.cpu_count(),
            "counts": dict(counts),
        }
    )
    save(pools, path)
    print(json.dumps(pools["runs"][-1], indent=2))
    for target in quotas:
        got = [len(v) for v in pools["targets"].get(target, {}).get("samples", {}).values()]
        print(f"{target:18} per prompt min {min(got, default=0)} max {max(got, default=0)}")


# --- 2. analyse ------------------------------------------------------------------------------


def texts(pools: dict, target: str) -> dict[str, list[str]]:
    return {k: [s["text"] for s in v] for k, v in pools["targets"][target]["samples"].items()}


def draws(pool: dict[str, list[str]], sizes: list[int], rng: np.random.Generator) -> list[dict]:
    """Disjoint draws from one pool: per prompt a random permutation cut into consecutive
    chunks of ``sizes`` (a chunk comes out short when the prompt's pool is)."""
    out: list[dict[str, list[str]]] = [{} for _ in sizes]
    for key, items in pool.items():
        order, start = rng.permutation(len(items)), 0
        for i, size in enumerate(sizes):
            out[i][key] = [items[j] for j in order[start : start + size]]
            start += size
    return out


def one_verdict(fast: dict, base0: dict, base1: dict, *, B: int, seed: int) -> dict[str, Any]:
    """The product's verdict of one audit run (``compute_verdict``: fast vs base, base batch 1
    standing in for the earlier audit's base batch), reduced to numbers."""
    fvb = mmd_test(fast, base0, B=B, seed=seed)
    bvb = base_stability(base0, base1, B=B, seed=seed + 1)
    j = judge(fast_vs_base=fvb, base_stability=bvb, suite="audit", alpha=ALPHA)
    return {
        "p": fvb.p_value,
        "mmd2": fvb.statistic,
        "q95": fvb.critical_value(ALPHA),
        "bvb_p": bvb.p_value,
        "label": j.label,
        "sentence": j.sentence,
        "flagged": j.label in FLAGGED,
        "detectable_80": j.effect.detectable_80 if j.effect else None,
    }


def resample(pools: dict, target: str, k: int, rng: np.random.Generator) -> tuple[dict, ...]:
    """(fast, base batch 0, base batch 1) for one resampled audit run at k per prompt."""
    base = texts(pools, BASE)
    if target == BASE:
        return tuple(draws(base, [k, k, k], rng))
    b0, b1 = draws(base, [k, k], rng)
    return draws(texts(pools, target), [k], rng)[0], b0, b1


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (Wilson 1927): nominal, as if the
    resamples were independent runs (they are not: see the module docstring)."""
    if n == 0:
        return 0.0, 1.0
    p = hits / n
    mid, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (mid - half) / (1 + z * z / n), (mid + half) / (1 + z * z / n)


def power_rows(pools: dict, resamples: int, B: int, seed: int) -> list[dict]:
    rows = []
    for name, (target, _) in COMPARISONS.items():
        pool_n = min(len(v) for v in texts(pools, target).values())
        base_n = min(len(v) for v in texts(pools, BASE).values())
        for k in PER_PROMPT:
            rng = np.random.default_rng([seed, k, len(rows)])
            runs = [
                one_verdict(*resample(pools, target, k, rng), B=B, seed=seed + 3 * i)
                for i in range(resamples)
            ]
            hits = sum(r["p"] < ALPHA for r in runs)
            labels = Counter(r["label"] for r in runs)
            median_run = sorted(runs, key=lambda r: r["mmd2"])[len(runs) // 2]
            rows.append(
                {
                    "comparison": name,
                    "target": target,
                    "k": k,
                    "n": k * len(pools["prompts"]),
                    "tests": resamples,
                    "rejects": hits / resamples,
                    "ci": wilson(hits, resamples),
                    "labels": dict(labels),
                    "median_mmd2": statistics.median(r["mmd2"] for r in runs),
                    "median_q95": statistics.median(r["q95"] for r in runs),
                    "bvb_rejects_05": sum(r["bvb_p"] < ALPHA for r in runs) / resamples,
                    "bvb_rejects_01": sum(r["bvb_p"] < 0.01 for r in runs) / resamples,
                    "overlap": [k / pool_n, k / base_n],  # share two resamples have in common
                    "example": median_run["sentence"],
                    "median_detectable_80": statistics.median(
                        [x["detectable_80"] for x in runs if x["detectable_80"] is not None]
                        or [math.nan]
                    ),
                }
            )
            print(
                f"{name:22} n={k * 25:3} rejects {hits / resamples:.2f} {dict(labels)}", flush=True
            )
    return rows


def whole_pool_rows(pools: dict, B: int, seed: int) -> list[dict]:
    """Every sample at once: the best effect-size estimate these pools allow."""
    base = texts(pools, BASE)
    rng = np.random.default_rng(seed)
    rows = []
    order = {k: rng.permutation(len(v)) for k, v in base.items()}
    first = {k: [base[k][j] for j in o[: len(o) // 2]] for k, o in order.items()}
    second = {k: [base[k][j] for j in o[len(o) // 2 :]] for k, o in order.items()}
    by_time = {
        k: [s["text"] for s in sorted(v, key=lambda s: s["t"])]
        for k, v in pools["targets"][BASE]["samples"].items()
    }
    early = {k: v[: len(v) // 2] for k, v in by_time.items()}
    late = {k: v[len(v) // 2 :] for k, v in by_time.items()}
    cases = [
        ("f16 vs f16, random halves", first, second),
        ("f16 vs f16, early vs late half", late, early),
    ]
    cases += [
        (f"{name.split(' vs ')[0]} vs f16, whole pools", texts(pools, t), base)
        for name, (t, _) in COMPARISONS.items()
        if t != BASE
    ]
    for name, a, b in cases:
        r = mmd_test(a, b, B=B, seed=seed)
        rows.append(
            {
                "comparison": name,
                "n": list(r.n_per_tier),
                "mmd2": r.statistic,
                "p": r.p_value,
                "q95": r.critical_value(ALPHA),
            }
        )
        print(f"{name:34} MMD² {r.statistic:.5f} p {r.p_value:.3g} n {r.n_per_tier}", flush=True)
    return rows


LADDER_RUNGS = {
    "a_vs_a": BASE,
    "q8_0": "smollm2-q8",
    "q4_0": "smollm2-q4",
    "different_model": "gemma-270m",
}


def ladder_replay(pools: dict, resamples: int, seed: int) -> dict[str, Any]:
    """``measure_ladder`` replayed on the pools: 10 per prompt per tier, every rung against
    the same base batch 0 (as the command does), the A-vs-A rung against base batch 1. Shows
    how far one ladder measurement moves and how much its rungs move together."""
    rng = np.random.default_rng([seed, 77])
    base = texts(pools, BASE)
    values: dict[str, list[float]] = {k: [] for k in LADDER_RUNGS}
    for _ in range(resamples):
        b0, b1 = draws(base, [10, 10], rng)
        for rung, target in LADDER_RUNGS.items():
            tier = b1 if target == BASE else draws(texts(pools, target), [10], rng)[0]
            values[rung].append(mmd_test(tier, b0, B=1).statistic)
    shipped = {g["key"]: g["mmd2"] for g in REFERENCE_LADDER["rungs"]}
    ordered = sum(
        values["a_vs_a"][i] < values["q8_0"][i] < values["q4_0"][i] < values["different_model"][i]
        for i in range(resamples)
    )
    return {
        "resamples": resamples,
        "quantiles": {
            k: [float(q) for q in np.quantile(v, [0.1, 0.5, 0.9])] for k, v in values.items()
        },
        "corr_a_vs_a_q8": float(np.corrcoef(values["a_vs_a"], values["q8_0"])[0, 1]),
        "ordered": ordered / resamples,
        "shipped_below": {
            k: float(np.mean(np.asarray(v) < shipped[k])) for k, v in values.items() if k in shipped
        },
    }


def sequential_rows(pools: dict, resamples: int, seed: int) -> list[dict]:
    """The betting test pair by pair in a shuffled plan order (as an audit sends them), k = 10
    per prompt, stopping at the first crossing of 1/α."""
    rows = []
    for name, (target, _) in COMPARISONS.items():
        rng = np.random.default_rng([seed, 99, len(rows)])
        stops = []
        for _ in range(resamples):
            fast, base0, _b1 = resample(pools, target, 10, rng)
            order = [(k, j) for k in fast for j in range(min(len(fast[k]), len(base0[k])))]
            test = BettingTest(alpha=ALPHA, L=DEFAULT_L)
            for i in rng.permutation(len(order)):
                key, j = order[i]
                if test.update(key, [fast[key][j]], [base0[key][j]]):
                    break
            stops.append(test.result().stopped_at_pair)
        hit = [s for s in stops if s is not None]
        rows.append(
            {
                "comparison": name,
                "tests": resamples,
                "pairs": len(order),
                **{f"within_{n}": sum(s <= n for s in hit) / resamples for n in (50, 125, 250)},
                "median_stop": statistics.median(hit) if hit else None,
                "stop_q": [float(q) for q in np.quantile(hit, [0.1, 0.9])] if hit else None,
            }
        )
        print(f"seq {name:22} {rows[-1]}", flush=True)
    return rows


def timing(pools: dict, repeats: int = 10) -> dict[str, Any]:
    """One verdict at the design size: 25 prompts × 10 per tier, L = 1,000, B = 1,000."""
    fast, b0, b1 = resample(pools, "smollm2-q4", 10, np.random.default_rng(7))

    def clock(fn) -> list[float]:
        fn()
        out = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
        return out

    mmd = clock(lambda: mmd_test(fast, b0, B=1000))
    full = clock(lambda: one_verdict(fast, b0, b1, B=1000, seed=0))
    chars = [len(t) for v in fast.values() for t in v]
    return {
        "mmd": mmd,
        "verdict": full,
        "repeats": repeats,
        "median_chars": statistics.median(chars),
        "max_chars": max(chars),
    }


def analyse(args: argparse.Namespace) -> None:
    pools = json.loads(args.pools.read_text())
    started, load_start = time.monotonic(), loadavg()
    result = {
        "date": dt.date.today().isoformat(),
        "loadavg_start": load_start,
        "n_prompts": len(pools["prompts"]),
        "resamples": args.resamples,
        "B": args.B,
        "seed": args.seed,
        "pool_sizes": {
            t: sorted(Counter(len(v) for v in e["samples"].values()).items())
            for t, e in pools["targets"].items()
        },
        "failed": {t: len(e["failed"]) for t, e in pools["targets"].items()},
        "retried": {
            t: sum(s["retried"] for v in e["samples"].values() for s in v)
            for t, e in pools["targets"].items()
        },
        "mean_chars": {
            t: statistics.mean(len(s["text"]) for v in e["samples"].values() for s in v)
            for t, e in pools["targets"].items()
        },
        "runs": pools["runs"],
        "timing": timing(pools, args.timing_repeats),
        "whole": whole_pool_rows(pools, args.B, args.seed),
        "power": power_rows(pools, args.resamples, args.B, args.seed),
        "sequential": sequential_rows(pools, args.seq_resamples, args.seed),
        "ladder_replay": ladder_replay(pools, args.resamples, args.seed),
        "ladder_runs": {
            f.stem: json.loads(f.read_text())
            for f in sorted(args.pools.with_name("ladders").glob("*.json"))
        },
    }
    result |= {
        "seconds": round(time.monotonic() - started),
        "loadavg_end": loadavg(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpu": cpu_model(),
        "ladder": REFERENCE_LADDER,
    }
    out = args.pools.with_name("results.json")
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    if args.write_docs:
        write_section(SECTION, render(result))
        print(f"wrote {SECTION} in docs/benchmarks.md")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# --- 3. the docs section ---------------------------------------------------------------------

PAPER = (
    "Gao, Liang & Guestrin (ICLR 2025) report a median power of 77.4% across their "
    "substitutions (quantization, watermarking, finetuning of Llama models) with about 10 "
    "samples per prompt, i.e. about 250 samples per tier"
)


def ms(xs: list[float]) -> str:
    lo, hi = min(xs) * 1e3, max(xs) * 1e3
    return f"{statistics.median(xs) * 1e3:.0f} ms (min {lo:.0f}, max {hi:.0f}; n = {len(xs)})"


def rate(row: dict) -> str:
    lo, hi = row["ci"]
    return f"{row['rejects']:.2f} [{lo:.2f}, {hi:.2f}]"


def cell(rows: list[dict], name: str, n: int) -> dict:
    return next(r for r in rows if r["comparison"] == name and r["n"] == n)


def detectability(name: str, rows: list[dict], whole: dict, q95_250: float) -> str:
    """One plain sentence: from which n the substitution is caught, or what catching it costs.

    Rough sample size: at fixed prompts the null's 95% quantile of the unbiased MMD² falls as
    1/n (a degenerate U-statistic: its spread is O(1/k) per prompt), so an effect δ reaches a
    250-per-tier run's quantile q at n ≈ 250·q/δ, where power is about 50%. When the whole
    pools do not reject, δ is bounded by max(statistic, 0) + their own 95% null quantile (the
    statistic's spread near the null is the null's), a rough upper bound.
    """
    by_n = {r["n"]: r["rejects"] for r in rows if r["comparison"] == name}
    caught = [n for n, p in sorted(by_n.items()) if p >= 0.95]
    if caught:
        return (
            f"caught: flagged in ≥ 95% of resampled runs from n = {caught[0]} per tier "
            f"({', '.join(f'{by_n[n]:.0%} at {n}' for n in sorted(by_n))})"
        )
    pools = (
        f"whole pools ({whole['n'][0]} vs {whole['n'][1]}): MMD² {whole['mmd2']:.4f}, "
        f"p = {whole['p']:.2g}"
    )
    if whole["p"] < ALPHA:
        n_half = 250 * q95_250 / whole["mmd2"]
        return (
            f"flagged in {by_n[250]:.0%} of resampled runs at 250 per tier; {pools}: a "
            f"real difference that needs about {n_half:,.0f} per tier for 50% power"
        )
    bound = max(whole["mmd2"], 0.0) + whole["q95"]
    return (
        f"NOT detectable at these costs: flagged in {by_n[250]:.0%} of resampled runs at "
        f"250 per tier, i.e. at the false-alarm rate; {pools}, no difference found. The "
        f"pools bound its MMD² below about {bound:.4f}; even an effect that large would "
        f"need about {250 * q95_250 / bound:,.0f} per tier for a 50% chance, and the best "
        "estimate is zero"
    )


def ladder_runs(runs: dict[str, dict]) -> list[str]:
    """Every ``measure_ladder`` output kept in ``validation/ladders/``: rung (p) per run."""
    if not runs:
        return []
    keys = list(LADDER_RUNGS)
    rows = []
    for name, lad in runs.items():
        by = {g["key"]: g for g in lad["rungs"]}
        rows.append(
            f"| {name} | "
            + " | ".join(f"{by[k]['mmd2']:.4f} (p = {by[k]['p_value']:.2g})" for k in keys)
            + f" | {lad.get('failed_requests') or 'none'} |"
        )
    shipped = [g["mmd2"] for g in REFERENCE_LADDER["rungs"]]
    mark = [name for name, lad in runs.items() if [g["mmd2"] for g in lad["rungs"]] == shipped]
    alarms = [
        f"{name} (A-vs-A p = {lad_p:.2g})"
        for name, lad in runs.items()
        if (lad_p := next(g["p_value"] for g in lad["rungs"] if g["key"] == "a_vs_a")) < ALPHA
    ]
    return [
        "Each `measure_ladder` run made for this section (copies in `validation/ladders/`; "
        f"shipped: {', '.join(mark) or 'none of them'}):",
        "",
        "| run | " + " | ".join(keys) + " | failed requests |",
        "|---|" + "---|" * (len(keys) + 1),
        *rows,
        "",
        *(
            [
                f"A-vs-A rejected at α in: {', '.join(alarms)}: the base tier against an "
                "independent batch of itself, a false alarm of the ladder's own noise floor (at "
                "most 5% of honest runs; the whole-pool and early-vs-late tests above found no "
                "such difference). A ladder whose A-vs-A rung rejects should be measured again.",
                "",
            ]
            if alarms
            else []
        ),
    ]


def calib(power: list[dict], n: int, level: str) -> float:
    """Mean base-stability rejection rate over the comparisons at n per tier."""
    return statistics.mean(x[f"bvb_rejects_{level}"] for x in power if x["n"] == n)


def majority(row: dict) -> str:
    label, count = max(row["labels"].items(), key=lambda kv: kv[1])
    return f"{LABEL_WORDS[label]} ({count} of {row['tests']})"


def render(r: dict) -> str:
    power, whole, seq, tm = r["power"], r["whole"], r["sequential"], r["timing"]
    names, sizes, run = list(COMPARISONS), sorted({row["n"] for row in power}), r["runs"][-1]
    ladder, replay = r["ladder"], r["ladder_replay"]
    q95_250 = cell(power, names[0], 250)["median_q95"]
    whole_by = {w["comparison"]: w for w in whole}
    aa_alarms = {n: cell(power, names[0], n) for n in sizes}
    seq_by = {x["comparison"]: x for x in seq}
    pools = ", ".join(
        f"{t} {'/'.join(str(n) for n, _ in r['pool_sizes'][t])} per prompt "
        f"({r['failed'][t]} failed, {r['retried'][t]} retried, mean {r['mean_chars'][t]:.0f} "
        "characters)"
        for t in QUOTAS
        if t in r["pool_sizes"]
    )
    L = [
        SECTION,
        "",
        "Does the verdict find what the local llama.cpp vendor is known to serve? Commands "
        "(the lock keeps other engine benchmarks off the 2 cores while servers run):",
        "",
        "```bash",
        "export TIERWATCH_VAR_DIR=/tmp/tw-ladder   # a private database for the ladder",
        ".venv/bin/python manage.py migrate",
        ".venv/bin/python manage.py local_vendor up --targets smollm2-f16 smollm2-q8 "
        "smollm2-q4 gemma-270m",
        "flock /tmp/tierwatch-engine.lock .venv/bin/python manage.py measure_ladder "
        "--prompts 25 --samples 10",
        ".venv/bin/python manage.py local_vendor down --targets smollm2-f16 smollm2-q8 "
        "smollm2-q4 gemma-270m",
        "flock /tmp/tierwatch-engine.lock .venv/bin/python benchmarks/verdict_validation.py "
        "collect",
        "flock /tmp/tierwatch-engine.lock .venv/bin/python benchmarks/verdict_validation.py "
        "analyse --write-docs",
        "```",
        "",
        f"Machine: {run['nproc']} cores ({r['cpu']}), shared with other work; llama.cpp of "
        f"llama-cpp-python {run['llama_cpp']}, one `llama-server` per target (1 thread, 1 "
        f"slot); Python {r['python']}, numpy {r['numpy']}. Pool collection: {run['started']} "
        f"UTC, {run['seconds']:.0f} s for {run['requests']:,} requests ({run['concurrency']} "
        f"in flight, the base server 2, the others 1), load average (1/5/15 min) "
        f"{fmt_load(run['loadavg_start'])} at the start, {fmt_load(run['loadavg_end'])} at the "
        f"end. Analysis: {r['date']}, {r['seconds']} s, load {fmt_load(r['loadavg_start'])} → "
        f"{fmt_load(r['loadavg_end'])}.",
        "",
        f"Pools: temperature 1, max_tokens 50, the {r['n_prompts']} audit prompts "
        f"`measure_ladder` uses; {pools}. Kept in `$TIERWATCH_CACHE/validation/pools.json` "
        "(not in the repo), the figures in `results.json` beside it (`... docs` rewrites this "
        "section from it).",
        "",
        "**Method and its limits.** Each resample is one audit run as the product builds it "
        "(`compute_verdict`): k samples per prompt of the fast tier and two base batches of "
        "k, `mmd_test` fast against base batch 0 and base batch 1 against batch 0 (the base "
        f"tier's stability, reported, never a label), each with B = {r['B']:,}, then "
        "`labels.judge` with the shipped ladder as context. Draws from one pool are "
        "disjoint within a resample (a per-prompt permutation cut into chunks; A-vs-A takes "
        "fast and both base batches from the f16 pool). Resamples are **not independent "
        "runs**: two resamples share k/m of their samples on average (m = pool per prompt; "
        "last column below). Given the pools, resamples are independent draws, so the "
        "bracketed 95% Wilson intervals hold for the rate *on these pools*; they do not cover "
        "the variation from one collection to the next, which dominates where k/m is near 1 "
        '(there the rate is close to "did this one pool reject"). A split of one pool is '
        "exchangeable by construction and the permutation test is exact given the union of "
        "the two draws, so the A-vs-A rate is ≤ α in expectation whatever the engine does: it "
        "checks the implementation; what speaks for the engine is the split of the f16 "
        "pool by time (early vs late), the speculative-decoding server (another process with "
        "the same weights) and the ladder's independent base batches.",
        "",
        "### False alarms and power (MMD fast vs base, p < 0.05)",
        "",
        "| comparison | known answer | "
        + " | ".join(f"n = {n} per tier" for n in sizes)
        + " | share two resamples have in common at 250 (fast / base) |",
        "|---|---|" + "---|" * len(sizes) + "---|",
        *(
            f"| {name} | {COMPARISONS[name][1]} | "
            + " | ".join(rate(cell(power, name, n)) for n in sizes)
            + " | "
            + " / ".join(f"{x:.2f}" for x in cell(power, name, 250)["overlap"])
            + " |"
            for name in names
        ),
        "",
        f"{r['resamples']} resamples per cell (n per tier = {r['n_prompts']} prompts × 2, 5, "
        f"10), α = {ALPHA}. Rows 1-2 are nulls (false-alarm rate, goal ≤ α), rows 3-5 power "
        "(goal for the different model: ≥ 95%). A-vs-A above α is consistent with chance (its "
        "expected rate is ≤ α by construction, see the method): "
        + "; ".join(
            f"P(≥ {round(x['rejects'] * x['tests'])} of {x['tests']} | rate α) = "
            f"{binom.sf(round(x['rejects'] * x['tests']) - 1, x['tests'], ALPHA):.2f}"
            for x in aa_alarms.values()
            if x["rejects"] > ALPHA
        )
        + ". The base-stability tests inside the same "
        "resamples (two disjoint f16 batches; mean over the five rows) reject at "
        + "; ".join(
            f"{calib(power, n, '05'):.3f} (α = 0.05) and {calib(power, n, '01'):.3f} "
            f"(α = 0.01) at n = {n}"
            for n in sizes
        )
        + ".",
        "",
        f"Beside the paper: {PAPER}. Here, at 250 per tier, the median over the three "
        "substitutions (Q8_0, Q4_0, a different model) is "
        f"{statistics.median(cell(power, n_, 250)['rejects'] for n_ in names[2:]):.0%}: "
        + ", ".join(
            f"{n_.split(' vs ')[0]} {cell(power, n_, 250)['rejects']:.1%}" for n_ in names[2:]
        )
        + " (a median of three says little: one substitution is invisible, two are caught "
        "every time). Their models were billions of parameters, ours 135M/270M, on 25 short "
        "prompts (answers of about 150 characters); the figures are of one kind, not one "
        "experiment.",
        "",
        "### Whole pools: the effect sizes behind the power",
        "",
        "| comparison | n (a / b) | MMD² | p | 95% null quantile at this n |",
        "|---|---|---|---|---|",
        *(
            f"| {w['comparison']} | {w['n'][0]} / {w['n'][1]} | {w['mmd2']:.5f} | {w['p']:.3g} "
            f"| {w['q95']:.5f} |"
            for w in whole
        ),
        "",
        f"Median 95% null quantile of one 250-per-tier run: {q95_250:.5f} (A-vs-A resamples).",
        "",
        "### Which substitutions can and cannot be detected, at which cost",
        "",
        *(
            f"- **{name}** ({COMPARISONS[name][1]}): "
            + detectability(name, power, whole_by[f"{name}, whole pools"], q95_250)
            + "."
            for name in names[2:]
        ),
        f"- **no substitution** (A-vs-A; speculative decoding): flagged in "
        f"{aa_alarms[250]['rejects']:.1%} and {cell(power, names[1], 250)['rejects']:.1%} of "
        f"resampled runs at 250 per tier (α = {ALPHA:.0%}); speculative decoding looks "
        "identical, as it should (whole pools p = "
        f"{whole_by['spec vs f16, whole pools']['p']:.2f}); the f16 server early vs late: "
        f"p = {whole_by['f16 vs f16, early vs late half']['p']:.2f}.",
        "",
        "### The shipped reference ladder (`manage.py measure_ladder`)",
        "",
        f"Shipped: {ladder.get('note', '')}; failed requests: "
        f"{ladder.get('failed_requests') or 'none'}.",
        "",
        "| rung | MMD² | p | n (tier / base) | 95% null quantile | replayed on the pools: "
        "10% / 50% / 90% |",
        "|---|---|---|---|---|---|",
        *(
            f"| {g['label']} | {g['mmd2']:.4f} | {g.get('p_value', float('nan')):.3g} | "
            f"{'/'.join(map(str, g.get('n_per_tier', [])))} | "
            f"{g.get('null_q95', float('nan')):.4f} | "
            + " / ".join(f"{q:.4f}" for q in replay["quantiles"][g["key"]])
            + " |"
            for g in ladder["rungs"]
        ),
        "",
        *ladder_runs(r.get("ladder_runs", {})),
        f"Replay: `measure_ladder`'s design (each rung one draw of 10 per prompt against the "
        f"same base batch 0) repeated {replay['resamples']} times on the pools. The rungs move "
        f"together (correlation of the A-vs-A and Q8_0 rungs {replay['corr_a_vs_a_q8']:.2f}: "
        "they share base batch 0), and the order A-vs-A < Q8_0 < Q4_0 < different holds in "
        f"{replay['ordered']:.0%} of replays. Where the shipped rungs fall among the replays "
        "(share of replays below them): "
        + ", ".join(f"{k} {v:.0%}" for k, v in replay["shipped_below"].items())
        + ". Whole-pool distances for comparison: "
        + ", ".join(
            f"{k} {whole_by[k + ', whole pools']['mmd2']:.4f}"
            for k in ("q8 vs f16", "q4 vs f16", "gemma vs f16")
        )
        + ".",
        "",
        "### What `judge` says (label counts over the resampled runs)",
        "",
        "| comparison | n per tier | " + " | ".join(LABEL_WORDS[x] for x in LABELS) + " |",
        "|---|---|" + "---|" * len(LABELS),
        *(
            f"| {name} | {n} | "
            + " | ".join(str(cell(power, name, n)["labels"].get(x, 0)) for x in LABELS)
            + " |"
            for name in names
            for n in sizes
        ),
        "",
        "At 50 per tier (2 per prompt) every run is inconclusive by design (`judge` needs 5 "
        'texts of a prompt per tier); otherwise "inconclusive" means more than a tenth of the '
        "prompts had fewer than 2 non-empty texts. The run with the median statistic at 250 "
        "per tier reads:",
        "",
        *(f'- {name}: "{cell(power, name, 250)["example"]}"' for name in names),
        "",
        "The most frequent label at 250 per tier: "
        + ", ".join(f"{n_} → {majority(cell(power, n_, 250))}" for n_ in names)
        + ".",
        "",
        'What a "no detectable difference" promises: the MMD² the run would catch with 80% '
        "power (median over the resampled runs of each cell), beside the whole-pool distances "
        "of the substitutions:",
        "",
        "| comparison | " + " | ".join(f"n = {n} per tier" for n in sizes) + " |",
        "|---|" + "---|" * len(sizes),
        *(
            f"| {n_} | "
            + " | ".join(f"{cell(power, n_, n)['median_detectable_80']:.4f}" for n in sizes)
            + " |"
            for n_ in names
        ),
        "",
        "Whole-pool distances: "
        + ", ".join(
            f"{k} {whole_by[k + ', whole pools']['mmd2']:.4f}"
            for k in ("q8 vs f16", "q4 vs f16", "gemma vs f16")
        )
        + ".",
        "",
        "### Sequential betting test vs the fixed test",
        "",
        "Pairs in a shuffled plan order (one fast and one base sample of one prompt per pair, "
        f"10 per prompt, 250 pairs), {seq[0]['tests']} resamples each; stop at the first "
        "wealth ≥ 1/α.",
        "",
        "| comparison | sequential: rejected within 50 / 125 / 250 pairs | median stop of "
        "rejecting runs (10%–90%) | fixed test at n = 50 / 125 / 250 |",
        "|---|---|---|---|",
        *(
            f"| {s['comparison']} | {s['within_50']:.2f} / {s['within_125']:.2f} / "
            f"{s['within_250']:.2f} | "
            + (
                f"{s['median_stop']:.0f} ({s['stop_q'][0]:.0f}–{s['stop_q'][1]:.0f})"
                if s["median_stop"]
                else "–"
            )
            + " | "
            + " / ".join(f"{cell(power, s['comparison'], n)['rejects']:.2f}" for n in sizes)
            + " |"
            for s in seq
        ),
        "",
        f"Different model: the sequential test stopped within 50 pairs in "
        f"{seq_by['gemma vs f16']['within_50']:.0%} of runs (median stop "
        f"{seq_by['gemma vs f16']['median_stop'] or float('nan'):.0f} pairs: the witness of "
        "a prompt is learnt from its own earlier pairs), where the fixed test at 50 per tier "
        f"rejects {cell(power, 'gemma vs f16', 50)['rejects']:.0%}. Q4_0: "
        f"{seq_by['q4 vs f16']['within_125']:.0%} within 125 pairs and "
        f"{seq_by['q4 vs f16']['within_250']:.0%} within 250, against the fixed test's "
        f"{cell(power, 'q4 vs f16', 125)['rejects']:.0%} and "
        f"{cell(power, 'q4 vs f16', 250)['rejects']:.0%}. The issue's goal (the fixed test's "
        "power at half the queries) is not met on these engines; the fixed test stays the "
        "verdict, the betting test an early stop that may look after every pair.",
        "",
        f"### Cost of one verdict ({r['n_prompts']} prompts × 10 per tier, L = 1,000, B = 1,000)",
        "",
        f"- `mmd_test` fast vs base: {ms(tm['mmd'])}",
        "- the whole verdict (fast vs base, base stability, `judge` with its prompt "
        "bootstrap): "
        f"{ms(tm['verdict'])} (goal ≤ 1 s)",
        "",
        f"The texts are short (median {tm['median_chars']:.0f} characters, max "
        f"{tm['max_chars']}) but NUL-padded to L = 1,000, so the work is that of 1,000-character "
        "texts.",
        "",
    ]
    return "\n".join(L)


def fmt_load(xs: list[float]) -> str:
    return " / ".join(f"{x:.1f}" for x in xs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="step", required=True)
    c = sub.add_parser("collect", help="sample the pools from the local vendor")
    c.add_argument("--prompts", type=int, default=25)
    c.add_argument("--quota", nargs="*", help="target=samples per prompt (overrides)")
    c.add_argument("--budget-s", type=float, default=720.0, help="stop sending after this")
    c.add_argument("--concurrency", type=int, default=3, help="requests in flight in total")
    a = sub.add_parser("analyse", help="resampled tests from the saved pools")
    a.add_argument("--resamples", type=int, default=200)
    a.add_argument("--seq-resamples", type=int, default=100)
    a.add_argument("--B", type=int, default=1000)
    a.add_argument("--timing-repeats", type=int, default=10, help="clocked verdicts")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--write-docs", action="store_true")
    d = sub.add_parser("docs", help="rewrite the docs section from the saved results")
    for p in (c, a, d):
        p.add_argument("--pools", type=Path, default=pool_dir() / "pools.json")
    args = parser.parse_args(argv)
    if args.step == "collect":
        collect(args)
    elif args.step == "analyse":
        analyse(args)
    else:
        write_section(SECTION, render(json.loads(args.pools.with_name("results.json").read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
