"""A month of hourly runs, many times: false alarms per pair per month and time to detection.

What is simulated, plainly:
- **Texts** come from the simulated vendor's own generator (``evals.vendors.simulated.compose``, the
  text its server streams), on the ``audit`` suite's 25 prompts, 10 samples per prompt per tier
  at temperature 1, cut to the case's ``max_tokens``. Each audit is the product's MMD test
  (``evals.stats.mmd.mmd_test``, L = 1,000, B = 1,000). Running 720 × months tests would take
  hours on two shared cores, so each model's texts are generated once into a pool (40 per
  prompt), a *bank* of audits per comparison draws 10 per prompt per tier from the pools
  (disjoint draws within one pool), and each simulated hour draws one audit's p-value from
  its bank with replacement. Limits: audits drawn from one pool share texts, so the figures
  describe these pools (as in ``benchmarks/verdict_validation.py``); under the null the
  p-value of each audit is uniform by construction whatever the pool. Comparisons:
  ``null`` demo-base vs demo-base (the tiers are one model: any alarm is false),
  ``numerics`` demo-fast vs demo-base (same weights, its own serving stack's logit noise:
  outputs do differ a little), ``distilled`` demo-distilled vs demo-base (a different model).
- **Latency per run** (the drift inputs): a tier's TTFT P50 is lognormal around the demo tier's
  prefill time with AR(1) load (φ = 0.5) shared by both tiers and a daily cycle (±30% of the
  noise sd), as a busy vendor has; the temperature-0 similarity per run is noise around 0.9.
- **Monitoring**: the verdict side is :mod:`evals.stats.eprocess` (e-detector, threshold for
  ≤ 0.5 expected false alarms per pair per quarter at hourly audits); drift is
  :mod:`evals.stats.cusum` on four series (TTFT fast and base as log, similarity, the audit's
  MMD p as a normal score) against a baseline frozen from the week before the month (168
  runs). After an alarm a person acknowledges it at once (state restarted, same baseline), so
  every further alarm in the month counts again.
- **Switch**: at hour 360 the fast tier becomes the distilled model (or the numerics tier);
  time to detection is hours from the switch to the first alarm after it (∞ if none by the
  month's end: counted as "missed").

Run: ``.venv/bin/python benchmarks/monitoring_month.py --months 60 --write-docs``
"""

from __future__ import annotations

import argparse
import math
import platform
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import scipy  # noqa: E402
from scipy.stats import chi2  # noqa: E402

from benchmarks.docs_section import write_section  # noqa: E402
from evals.stats import cusum, eprocess  # noqa: E402
from evals.stats.mmd import mmd_test  # noqa: E402
from evals.suites import get_suite  # noqa: E402
from evals.tokens import token_pieces  # noqa: E402
from evals.vendors.simulated import TIERS, compose  # noqa: E402

SECTION = "## Monitoring over a month (error budget)"
HOURS, SWITCH, BASELINE_RUNS = 720, 360, 168
PER_PROMPT = 10
BANK_TIERS = {"null": "demo-base", "numerics": "demo-fast", "distilled": "demo-distilled"}
SPECS = (
    cusum.SeriesSpec("ttft_fast", "log", 1), cusum.SeriesSpec("ttft_base", "log", 1),
    cusum.SeriesSpec("similarity", "identity", -1), cusum.SeriesSpec("mmd_p", "p_normal", 1),
)  # fmt: skip
ARL_PAIR = eprocess.AUDITS_PER_QUARTER_HOURLY / eprocess.DEFAULT_BUDGET
THRESHOLD = eprocess.threshold_for(eprocess.AUDITS_PER_QUARTER_HOURLY)


def samples(model: str, cases: list, rng: random.Random, n: int) -> dict[str, list[str]]:
    tier = TIERS[model]
    out = {}
    for case in cases:
        texts = []
        for _ in range(n):
            text = compose(tier, case.messages, 1.0, rng)
            texts.append("".join(token_pieces(text)[: case.max_tokens]))
        out[case.key] = texts
    return out


def pools(seed: int, per_prompt: int) -> dict[str, dict[str, list[str]]]:
    """``per_prompt`` texts per audit prompt from each simulated model (generated once)."""
    cases = list(get_suite("audit").cases)[:25]
    rng = random.Random(seed)
    models = sorted(set(BANK_TIERS.values()))
    return {m: samples(m, cases, rng, per_prompt) for m in models}


def bank(kind: str, size: int, pool: dict, seed: int) -> np.ndarray:
    """``size`` audit p-values of ``kind`` (module docstring): each audit draws 10 texts per
    prompt per tier from the pools, disjoint within one pool (so base-vs-base is a null by
    construction), and runs the product's MMD test on them."""
    rng = np.random.default_rng(seed)
    ps = []
    for i in range(size):
        fast, base = {}, {}
        for key, base_texts in pool["demo-base"].items():
            order = rng.permutation(len(base_texts))
            base[key] = [base_texts[j] for j in order[:PER_PROMPT]]
            if kind == "null":
                fast[key] = [base_texts[j] for j in order[PER_PROMPT : 2 * PER_PROMPT]]
            else:
                own = pool[BANK_TIERS[kind]][key]
                fast[key] = [own[j] for j in rng.permutation(len(own))[:PER_PROMPT]]
        ps.append(mmd_test(fast, base, seed=seed + i).p_value)
    return np.array(ps)


def latency_runs(rng: np.random.Generator, n: int, fast_median: float) -> list[dict]:
    """TTFT P50 per run, both tiers under one AR(1) load with a daily cycle."""
    phi, load, out = 0.5, 0.0, []
    for t in range(n):
        load = phi * load + rng.normal() * math.sqrt(1 - phi * phi)
        day = 0.3 * math.sin(2 * math.pi * (t % 24) / 24)
        own = rng.normal(size=3)
        out.append({
            "ttft_fast": fast_median * math.exp(0.15 * (load + day) + 0.1 * own[0]),
            "ttft_base": 40.0 * math.exp(0.15 * (load + day) + 0.1 * own[1]),
            "similarity": 0.9 + 0.01 * own[2],
        })  # fmt: skip
    return out


def one_month(month: int, banks: dict, switch_to: str | None) -> dict:
    """Alarms of one simulated month (switch_to None: the null all month)."""
    rng = np.random.default_rng(1000 + month)
    runs = latency_runs(rng, BASELINE_RUNS + HOURS, 20.0)
    p_null = rng.choice(banks["null"], BASELINE_RUNS + HOURS)
    for t, r in enumerate(runs):
        r["mmd_p"] = float(p_null[t])
    if switch_to:
        ps = rng.choice(banks[switch_to], HOURS - SWITCH)
        for i, t in enumerate(range(BASELINE_RUNS + SWITCH, BASELINE_RUNS + HOURS)):
            runs[t]["mmd_p"] = float(ps[i])
            if switch_to == "distilled":  # its prefill is half the fast tier's
                runs[t]["ttft_fast"] *= 0.5
    hours = [t % 24 for t in range(len(runs))]
    base = cusum.Baseline.from_runs(SPECS, runs[:BASELINE_RUNS], arl_pair=ARL_PAIR,
                                    hours=hours[:BASELINE_RUNS])  # fmt: skip
    e_state, c_state = eprocess.EProcessState(), cusum.start(base)
    e_alarms, c_alarms = [], []
    for i in range(HOURS):
        t = BASELINE_RUNS + i
        e_state, dec = eprocess.update(
            e_state, eprocess.AuditEvidence(runs[t]["mmd_p"]), threshold=THRESHOLD
        )
        if dec.new_alarm:
            e_alarms.append(i)
            e_state = eprocess.acknowledge(e_state)
        c_state, al = cusum.update(c_state, base, runs[t], hour=hours[t])
        if al.new_alarm:
            c_alarms.append(i)
            c_state = cusum.reset(base)
    return {"verdict": e_alarms, "drift": c_alarms, "h": base.h}


def poisson_ci(count: int, months: int) -> tuple[float, float]:
    """Exact (Garwood) 95% interval for a Poisson rate per month."""
    low = chi2.ppf(0.025, 2 * count) / 2 if count else 0.0
    return low / months, chi2.ppf(0.975, 2 * count + 2) / 2 / months


def rate_line(name: str, alarms: list[list[int]], months: int) -> str:
    total = sum(len(a) for a in alarms)
    lo, hi = poisson_ci(total, months)
    share = sum(1 for a in alarms if a) / months
    return (f"| {name} | {total / months:.3f} [{lo:.3f}, {hi:.3f}] | {3 * total / months:.2f} | "
            f"{share:.0%} |")  # fmt: skip


def detection_line(name: str, alarms: list[list[int]], months: int) -> str:
    delays = [next((i - SWITCH for i in a if i >= SWITCH), math.inf) for a in alarms]
    hit = [d for d in delays if math.isfinite(d)]
    if not hit:
        return f"| {name} | missed in all {months} months | | |"
    q = np.percentile(hit, [50, 90]) if hit else [math.nan] * 2
    early = sum(1 for a in alarms if any(i < SWITCH for i in a))
    return (f"| {name} | {q[0]:.0f} h | {q[1]:.0f} h | {months - len(hit)} of {months} missed; "
            f"{early} months had a false alarm before the switch |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--months", type=int, default=60)
    ap.add_argument("--bank", type=int, default=200)
    ap.add_argument("--pool", type=int, default=40)
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    t0 = time.monotonic()
    pool = pools(seed=17, per_prompt=args.pool)
    banks = {k: bank(k, args.bank, pool, seed=17 * (i + 1)) for i, k in enumerate(BANK_TIERS)}
    bank_s = time.monotonic() - t0
    null = [one_month(m, banks, None) for m in range(args.months)]
    # The worst case a valid p-value allows: exactly uniform (the bank's p is conservative
    # where texts repeat, since ties make the permutation p discrete).
    uniform = {**banks, "null": np.arange(1, 1002) / 1001}
    null_u = [one_month(m, uniform, None) for m in range(args.months)]
    switches = {k: [one_month(m, banks, k) for m in range(args.months)]
                for k in ("numerics", "distilled")}  # fmt: skip
    n = args.months
    rej = {k: float(np.mean(v < 0.05)) for k, v in banks.items()}
    lines = [
        SECTION, "",
        f"Measured with `.venv/bin/python benchmarks/monitoring_month.py --months {n} "
        f"--bank {args.bank} --pool {args.pool} --write-docs` (Python "
        f"{platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"2 shared cores; pools of {args.pool} texts per prompt per model and banks of "
        f"{args.bank} audits per comparison took {bank_s:.0f} s, the whole script "
        f"{time.monotonic() - t0:.0f} s). How the month is simulated is the script's docstring: "
        "audits are the product's MMD test on the simulated vendor's texts (25 prompts × 10 "
        "per tier), drawn from a bank per comparison; latencies are AR(1) with a daily cycle.",
        "",
        f"Per-audit rejection at p < 0.05 in the banks: null {rej['null']:.1%}, numerics "
        f"(demo-fast vs demo-base) {rej['numerics']:.1%}, distilled {rej['distilled']:.1%}. "
        f"A per-run test at α = 0.05 every hour would raise ≈ {0.05 * HOURS:.0f} false alarms "
        "a month; the per-run p stays as evidence only.",
        "",
        f"Budget: ≤ {eprocess.DEFAULT_BUDGET} expected false alarms per pair per quarter at "
        f"hourly cadence: e-detector threshold c = {THRESHOLD:.0f}; drift per-pair ARL0 = "
        f"{ARL_PAIR:.0f} runs split over {len(SPECS)} series, h = {null[0]['h']:.2f} after a "
        f"{BASELINE_RUNS}-run baseline (k = {cusum.K}). Goal: ≤ 1 per pair per quarter "
        "(0.33 a month).",
        "",
        f"### False alarms per pair per month ({n} null months of {HOURS} hourly runs; exact "
        "Poisson 95% interval)",
        "",
        "| monitor | false alarms / month [95% CI] | per quarter | months with ≥ 1 |",
        "|---|---|---|---|",
        rate_line("verdict (e-detector)", [m["verdict"] for m in null], n),
        rate_line("drift (CUSUM, 4 series, one decision)", [m["drift"] for m in null], n),
        rate_line("verdict, audit p exactly uniform", [m["verdict"] for m in null_u], n),
        rate_line("drift, audit p exactly uniform", [m["drift"] for m in null_u], n),
        "",
        f"### Time to detection after a switch at hour {SWITCH}",
        "",
        "| switch → monitor | median | 90th percentile | notes |",
        "|---|---|---|---|",
        detection_line("distilled → verdict", [m["verdict"] for m in switches["distilled"]], n),
        detection_line("distilled → drift", [m["drift"] for m in switches["distilled"]], n),
        detection_line("numerics (demo-fast) → verdict",
                       [m["verdict"] for m in switches["numerics"]], n),
        detection_line("numerics (demo-fast) → drift", [m["drift"] for m in switches["numerics"]],
                       n),
        "",
        "Real-engine pools (llama.cpp f16 vs f16, f16 → q4, f16 → gemma) were not replayed: no "
        "pools were on this machine (`benchmarks/verdict_validation.py collect` makes them).",
        "",
    ]  # fmt: skip
    text = "\n".join(lines)
    print(text)
    if args.write_docs:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
