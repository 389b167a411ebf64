"""A month of hourly runs, many times, at the product's settings: false alarms per pair per
month and time to detection.

**The monitor is the product's.** Every setting comes from :mod:`evals.stats.error_budget`, the
module ``monitor.derived.evidence`` calls: the budget, the three probe series (``SERIES``),
the baseline frozen from the first ``MIN_BASELINE_RUNS`` (48) probes by ``freeze`` (h from
``cusum.h_for_arl`` for 3 series, a 48-run baseline and hourly probes), the e-detector
threshold ``audit_threshold`` at hourly audits (c = 4,320). :class:`Monitor` folds runs as
``monitoring.after_run`` does (audit → ``eprocess.update`` with the audit's MMD p; probe →
calibrating until the baseline is frozen, then ``cusum.update`` with the run's hour of day),
and :meth:`Monitor.acknowledge` is ``monitoring.acknowledge``: both restart and a new baseline
is collected from the next 48 probes. The database path itself is exercised at month scale
by ``tests/monitor/test_monitoring_path.py``; this script is about the rate over many months.

What is simulated, plainly:
- **Audit p-values**: the product's MMD test (``evals.stats.mmd.mmd_test``, L = 1,000,
  B = 1,000) on 10 texts per prompt per tier of the ``audit`` suite's 25 prompts. Running
  720 × months tests would take hours on two shared cores, so each model's temperature-1 texts
  are generated once into a pool (the simulated vendor's own generator,
  ``evals.vendors.simulated.compose``, cut to ``max_tokens``), a *bank* of audits per
  comparison draws from the pools (disjoint draws within one pool, so base vs base is a null
  by construction), and each simulated hour draws one audit's p from its bank with
  replacement. Audits drawn from one pool share texts, so the figures describe these pools;
  and resampling a bank of B audits resolves the lower tail the e-detector reacts to only to
  1/B (a bank's smallest p is drawn with probability 1/B whatever its value). Under the null
  the p of each audit is super-uniform whatever the pool, so the exactly uniform p is run as
  well (the worst case a valid p allows). Comparisons: ``null``
  demo-base vs demo-base, ``numerics`` demo-fast vs demo-base (same weights, its serving
  stack's logit noise), ``distilled`` demo-distilled vs demo-base (a different model).
- **Probe values** (the drift series): both tiers' TTFT P50 lognormal around the tier's
  prefill time (``TIERS[...].prefill_ms``, sd 0.1 in log) under one shared AR(1) load
  (φ = 0.5, sd 0.15 in log) with a daily cycle (±30% of the load's sd), as a busy vendor has;
  the temperature-0 similarity is 0.9 + N(0, 0.01²) per run (the simulated vendor's own is a
  constant 1.0, which would make the null trivially quiet).
- **Months**: the baseline's 48 probes run in the two days before the month; then 720 hours,
  a probe and an audit each hour. On an honest month every alarm is false; a person
  acknowledges it at once, so every further alarm in the month counts again.
- **Switch**: at hour 360 the fast tier becomes the distilled model (its TTFT scales by
  the ratio of prefill times, 10/20, and its similarity by the simulated vendor's measured
  temperature-0 similarity of distilled vs base over base vs base on the ``smoke`` suite) or
  the demo-fast numerics (p from its bank; latency and similarity unchanged). Time to
  detection is the number of hourly runs after the switch up to and including the one that
  alarms (hours); alarms after the switch are not acknowledged; none by the month's end is
  "missed".

``--pools PATH`` replays instead the real-engine pools of ``benchmarks/verdict_validation.py
collect`` (llama.cpp; default ``$TIERWATCH_CACHE/validation/pools.json``): audit banks
f16 vs f16 (the null), q4 vs f16 and gemma vs f16; months as above with the switch to q4 or
gemma at hour 360. The pools hold temperature-1 texts only (no TTFT, no temperature-0
similarity), so only the verdict side (the e-detector) is replayed there.

Run: ``.venv/bin/python benchmarks/monitoring_month.py --months 100 --write-docs`` and
``.venv/bin/python benchmarks/monitoring_month.py --pools --months 100 --write-docs``.
"""

from __future__ import annotations

import argparse
import json
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
from evals.similarity import compare_pairs  # noqa: E402
from evals.stats import cusum, eprocess, error_budget  # noqa: E402
from evals.stats.mmd import mmd_test  # noqa: E402
from evals.suites import get_suite  # noqa: E402
from evals.tokens import token_pieces  # noqa: E402
from evals.vendors.simulated import TIERS, compose  # noqa: E402

SECTION = "## Monitoring over a month (error budget)"
POOLS_SECTION = "## Monitoring over a month: real-engine pools replayed"
HOURS, SWITCH = 720, 360
EVERY_S = error_budget.HOURLY_S
PRE = error_budget.MIN_BASELINE_RUNS  # the baseline's probes, before the month
PER_PROMPT = 10
SIM_BASE = "demo-base"
SIM_FAST = "demo-fast"  # the fast tier's serving stack (its latency) in an honest month
SIM_SWITCH = {"numerics": "demo-fast", "distilled": "demo-distilled"}
POOL_TARGETS = {"base": "smollm2-f16", "q4": "smollm2-q4", "different model": "gemma-270m"}


# --- the product's monitoring of one pair ----------------------------------------------------


class Monitor:
    """One pair's stored state, folded run by run as ``monitoring.after_run`` does."""

    def __init__(self) -> None:
        self.evidence = eprocess.EProcessState()
        self.threshold = error_budget.audit_threshold(EVERY_S)
        self.frozen_h: list[float] = []  # h of each baseline frozen
        self.acknowledge()

    def acknowledge(self) -> None:
        """``monitoring.acknowledge``: evidence restarts, a new baseline is collected."""
        self.evidence = eprocess.acknowledge(self.evidence)
        self.calibrating: list[tuple[dict, int]] = []
        self.baseline: cusum.Baseline | None = None
        self.cusum: cusum.CusumState | None = None

    def audit(self, p: float) -> bool:
        self.evidence, decision = eprocess.update(
            self.evidence, eprocess.AuditEvidence(p_value=p), threshold=self.threshold
        )
        return decision.new_alarm

    def probe(self, values: dict[str, float], hour: int) -> bool:
        if self.baseline is None:
            self.calibrating.append((values, hour))
            if len(self.calibrating) >= error_budget.MIN_BASELINE_RUNS:
                self.baseline = error_budget.freeze(
                    [v for v, _ in self.calibrating], [h for _, h in self.calibrating], EVERY_S
                )
                self.cusum = cusum.start(self.baseline) if self.baseline else None
                self.frozen_h += [self.baseline.h] if self.baseline else []
            return False
        self.cusum, alarm = cusum.update(self.cusum, self.baseline, values, hour=hour)
        return alarm.new_alarm


def one_month(audit_p: np.ndarray, probes: list[dict] | None) -> dict[str, list]:
    """Alarm hours of one month: ``audit_p`` (HOURS values), ``probes`` (PRE + HOURS runs, or
    None: verdict only), and the h of each baseline frozen. Alarms before the switch hour are
    acknowledged at once."""
    m = Monitor()
    if probes is not None:
        for t in range(PRE):
            m.probe(probes[t], hour=t % 24)
    out: dict[str, list] = {"verdict": [], "drift": [], "h": m.frozen_h}
    for i in range(HOURS):
        drift = probes is not None and m.probe(probes[PRE + i], hour=(PRE + i) % 24)
        verdict = m.audit(float(audit_p[i]))
        if drift:
            out["drift"].append(i)
        if verdict:
            out["verdict"].append(i)
        if (drift or verdict) and i < SWITCH:
            m.acknowledge()
    return out


# --- inputs: pools, banks of audit p-values, probe values ------------------------------------


def samples(model: str, cases: list, rng: random.Random, n: int, temperature: float = 1.0
            ) -> dict[str, list[str]]:  # fmt: skip
    tier = TIERS[model]
    return {c.key: ["".join(token_pieces(compose(tier, c.messages, temperature, rng))
                            [: c.max_tokens]) for _ in range(n)] for c in cases}  # fmt: skip


def sim_pools(seed: int, per_prompt: int) -> dict[str, dict[str, list[str]]]:
    """``per_prompt`` texts per audit prompt from each simulated model (generated once)."""
    cases = list(get_suite("audit").cases)[:25]
    rng = random.Random(seed)
    models = sorted({SIM_BASE, *SIM_SWITCH.values()})
    return {m: samples(m, cases, rng, per_prompt) for m in models}


def bank(pool: dict, fast: str, base: str, size: int, seed: int) -> np.ndarray:
    """``size`` audit p-values of ``fast`` vs ``base``: each audit draws ``PER_PROMPT`` texts
    per prompt per tier, disjoint within one pool (fast = base: a null by construction)."""
    rng = np.random.default_rng(seed)
    ps = []
    for i in range(size):
        f, b = {}, {}
        for key, base_texts in pool[base].items():
            order = rng.permutation(len(base_texts))
            b[key] = [base_texts[j] for j in order[:PER_PROMPT]]
            if fast == base:
                f[key] = [base_texts[j] for j in order[PER_PROMPT : 2 * PER_PROMPT]]
            else:
                own = pool[fast].get(key, [])
                f[key] = [own[j] for j in rng.permutation(len(own))[:PER_PROMPT]]
        f = {k: v for k, v in f.items() if len(v) >= 2 and len(b[k]) >= 2}
        ps.append(mmd_test(f, {k: b[k] for k in f}, seed=seed + i).p_value)
    return np.array(ps)


def similarity_ratio(model: str) -> float:
    """Temperature-0 similarity of ``model`` vs base over base vs base, ``smoke`` suite."""
    cases = list(get_suite("smoke").cases)

    def mean(m: str) -> float:
        a = samples(m, cases, random.Random(0), 1, 0.0)
        b = samples(SIM_BASE, cases, random.Random(1), 1, 0.0)
        return compare_pairs([(a[c.key][0], b[c.key][0]) for c in cases])["mean_ratio"]

    return mean(model) / mean(SIM_BASE)


def probe_values(rng: np.random.Generator, switch_to: str | None, sim_ratio: float
                 ) -> list[dict[str, float]]:  # fmt: skip
    """PRE + HOURS probes (module docstring); after the switch the fast tier is ``switch_to``."""
    phi, load, out = 0.5, 0.0, []
    fast_ms, base_ms = TIERS[SIM_FAST].prefill_ms, TIERS[SIM_BASE].prefill_ms
    for t in range(PRE + HOURS):
        load = phi * load + rng.normal() * math.sqrt(1 - phi * phi)
        day = 0.3 * math.sin(2 * math.pi * (t % 24) / 24)
        own = rng.normal(size=3)
        after = switch_to is not None and t >= PRE + SWITCH
        fast = TIERS[switch_to].prefill_ms if after else fast_ms
        f = fast * math.exp(0.15 * (load + day) + 0.1 * own[0])
        b = base_ms * math.exp(0.15 * (load + day) + 0.1 * own[1])
        out.append({
            "ttft_p50:fast": f, "ttft_p50:base": b, "ttft_ratio:fast_vs_base": f / b,
            "similarity:fast_vs_base": (0.9 + 0.01 * own[2]) * (sim_ratio if after else 1.0),
        })  # fmt: skip
    return out


def months(n: int, null: np.ndarray, after: np.ndarray | None, *, seed: int,
           switch_to: str | None = None, drift: bool = True, sim_ratio: float = 1.0
           ) -> list[dict[str, list]]:  # fmt: skip
    """``n`` months: audit p from ``null`` (and from ``after`` from the switch hour on)."""
    out = []
    for m in range(n):
        rng = np.random.default_rng(seed + m)
        p = rng.choice(null, HOURS)
        if after is not None:
            p[SWITCH:] = rng.choice(after, HOURS - SWITCH)
        probes = probe_values(rng, switch_to, sim_ratio) if drift else None
        out.append(one_month(p, probes))
    return out


# --- figures ---------------------------------------------------------------------------------


def poisson_ci(count: int, exposure: float) -> tuple[float, float]:
    """Exact (Garwood) 95% interval for a Poisson rate per unit of ``exposure``."""
    low = chi2.ppf(0.025, 2 * count) / 2 if count else 0.0
    return low / exposure, chi2.ppf(0.975, 2 * count + 2) / 2 / exposure


def rate_line(name: str, alarms: list[list[int]]) -> str:
    n, total = len(alarms), sum(len(a) for a in alarms)
    lo, hi = poisson_ci(total, n)
    share = sum(1 for a in alarms if a) / n
    return (f"| {name} | {total} | {total / n:.3f} [{lo:.3f}, {hi:.3f}] | "
            f"{3 * total / n:.2f} [{3 * lo:.2f}, {3 * hi:.2f}] | {share:.0%} |")  # fmt: skip


RATE_HEAD = ["| monitor | false alarms | per pair per month [95% CI] | per quarter [95% CI] | "
             "months with ≥ 1 |", "|---|---|---|---|---|"]  # fmt: skip
DETECT_HEAD = [
    "| switch → monitor | median | 90th percentile | missed | notes |",
    "|---|---|---|---|---|",
]


def detection_line(name: str, alarms: list[list[int]]) -> str:
    n = len(alarms)
    delays = [next((i - SWITCH + 1 for i in a if i >= SWITCH), math.inf) for a in alarms]
    hit = [d for d in delays if math.isfinite(d)]
    early = sum(1 for a in alarms if any(i < SWITCH for i in a))
    note = f"months with a false alarm before the switch: {early}"
    if not hit:
        return f"| {name} | – | – | {n} of {n} | {note} |"
    q = np.percentile(hit, [50, 90], method="higher")
    return f"| {name} | {q[0]:.0f} h | {q[1]:.0f} h | {n - len(hit)} of {n} | {note} |"


def reading(null: list[dict], distilled: list[dict]) -> str:
    """Goals against the figures: the upper 95% bound per quarter ≤ 1, the 90th percentile of
    the time to catch a different model ≤ 3 h."""
    words = []
    for mon in ("verdict", "drift"):
        total = sum(len(m[mon]) for m in null)
        hi = 3 * poisson_ci(total, len(null))[1]
        delays = [next((i - SWITCH + 1 for i in m[mon] if i >= SWITCH), math.inf)
                  for m in distilled]  # fmt: skip
        q90 = float(np.percentile(delays, 90, method="higher"))
        words.append(
            f"{mon}: false alarms per quarter ≤ {hi:.2f} (upper 95% bound; goal ≤ 1: "
            f"{'met' if hi <= 1 else 'NOT met'}), distilled model caught within "
            f"{q90:g} h in 90% of months (goal 3 h: "
            f"{'met' if q90 <= 3 else 'NOT met'})"
        )
    return "Reading against the goals — " + "; ".join(words) + "."


def _h_words(hs: list[float]) -> str:
    if not hs:
        return "not used here (no probes)"
    q = np.percentile(hs, [50, 5, 95])
    return f"here median {q[0]:.2f} (90% of baselines {q[1]:.2f}–{q[2]:.2f}, {len(hs)} baselines)"


def header(args: argparse.Namespace, extra: str, t0: float, c0: float) -> str:
    flags = f"--months {args.months} --bank {args.bank}" + extra + " --write-docs"
    return (
        f"Measured with `.venv/bin/python benchmarks/monitoring_month.py {flags}` on "
        "AMD EPYC, 2 cores shared with other sessions (loaded), Python "
        f"{platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}: "
        f"{time.monotonic() - t0:.0f} s wall, {time.process_time() - c0:.0f} s CPU. "
        "How a month is simulated is the script's docstring."
    )


def settings_line(hs: list[float]) -> str:
    b = error_budget
    return (
        f"Settings, the product's (`evals.stats.error_budget`): budget ≤ "
        f"{b.BUDGET_PER_QUARTER} expected false alarms per pair per quarter at hourly "
        f"cadence; e-detector c = {b.audit_threshold(EVERY_S):.0f} at hourly audits; drift "
        f"on {len(b.SERIES)} series ({', '.join(s.name for s in b.SERIES)}), baseline "
        f"frozen from {b.MIN_BASELINE_RUNS} hourly probes, pair ARL0 = "
        f"{b.probe_arl(EVERY_S):.0f} probes; h is set per baseline from its runs' lag-1 "
        f"autocorrelation: {cusum.h_for_arl(b.probe_arl(EVERY_S) * 3, n_baseline=PRE):.2f} "
        f"without any, {_h_words(hs)} (k = {cusum.K}). Goals: "
        "≤ 1 false alarm per pair per quarter; a different model caught within 3 h."
    )


def simulated(args: argparse.Namespace) -> str:
    t0, c0 = time.monotonic(), time.process_time()
    pool = sim_pools(seed=17, per_prompt=args.pool)
    kinds = {"null": SIM_BASE, **SIM_SWITCH}
    banks = {k: bank(pool, m, SIM_BASE, args.bank, seed=17 * (i + 1))
             for i, (k, m) in enumerate(kinds.items())}  # fmt: skip
    bank_s = time.monotonic() - t0
    uniform = np.arange(1, 1002) / 1001
    ratio = {k: similarity_ratio(m) for k, m in SIM_SWITCH.items()}
    n = args.months
    null = months(n, banks["null"], None, seed=1000)
    null_u = months(n, uniform, None, seed=1000)
    switched = {k: months(n, banks["null"], banks[k], seed=5000, switch_to=m,
                          sim_ratio=ratio[k]) for k, m in SIM_SWITCH.items()}  # fmt: skip
    rej = {k: float(np.mean(v < 0.05)) for k, v in banks.items()}
    lines = [
        SECTION, "",
        header(args, f" --pool {args.pool}", t0, c0) + f" Pools of {args.pool} texts per "
        f"prompt per model and banks of {args.bank} audits per comparison: {bank_s:.0f} s.",
        "", settings_line([h for m in null for h in m["h"]]), "",
        f"Per-audit rejection at p < 0.05 in the banks: null {rej['null']:.1%}, numerics "
        f"(demo-fast vs demo-base) {rej['numerics']:.1%}, distilled {rej['distilled']:.1%}. "
        f"A per-run test at α = 0.05 every hour would raise ≈ {0.05 * HOURS:.0f} false alarms "
        "a month; the per-run p stays as evidence only.", "",
        f"### False alarms per pair ({n} honest months of {HOURS} hourly probes and audits; "
        "exact Poisson 95% intervals)", "", *RATE_HEAD,
        rate_line("verdict (e-detector), audit p from the null bank", [m["verdict"] for m in null]),
        rate_line("verdict, audit p exactly uniform", [m["verdict"] for m in null_u]),
        rate_line(f"drift (CUSUM, {len(error_budget.SERIES)} series, one decision)",
                  [m["drift"] for m in null]),
        "", f"### Time to detection after a switch at hour {SWITCH} ({n} months each)", "",
        "Hours = hourly runs after the switch up to and including the alarming one. Temperature-0 "
        f"similarity ratio after the switch: distilled {ratio['distilled']:.2f}, numerics "
        f"{ratio['numerics']:.2f}; TTFT ratio: distilled "
        f"{TIERS['demo-distilled'].prefill_ms / TIERS[SIM_FAST].prefill_ms:.2f}, numerics 1.", "",
        *DETECT_HEAD,
        *(detection_line(f"{k} → {mon}", [m[mon] for m in switched[k]])
          for k in ("distilled", "numerics") for mon in ("verdict", "drift")),
        "", "The numerics switch leaves the drift series unchanged, so drift alarms after it "
        "are false ones. Drift misses the distilled model when its baseline is being "
        "re-collected at the switch (after a false alarm acknowledged in the two days "
        "before): the new model is frozen into the new baseline, as in the product.", "",
        reading(null, switched["distilled"]), "",
        f"Real-engine pools: see \"{POOLS_SECTION[3:]}\".", "", "",
    ]  # fmt: skip
    return "\n".join(lines)


def pool_texts(pools: dict, target: str) -> dict[str, list[str]]:
    return {k: [s["text"] for s in v] for k, v in pools["targets"][target]["samples"].items()}


def replayed(args: argparse.Namespace) -> str:
    t0, c0 = time.monotonic(), time.process_time()
    raw = json.loads(args.pools.read_text())
    names = {**POOL_TARGETS, **dict(s.split("=", 1) for s in args.target or [])}
    pool = {t: pool_texts(raw, t) for t in names.values() if t in raw["targets"]}
    base = names["base"]
    kinds = {"null": base, **{k: names[k] for k in ("q4", "different model")
                              if names[k] in pool}}  # fmt: skip
    banks = {k: bank(pool, t, base, args.bank, seed=31 * (i + 1))
             for i, (k, t) in enumerate(kinds.items())}  # fmt: skip
    n = args.months
    null = months(n, banks["null"], None, seed=1000, drift=False)
    switched = {k: months(n, banks["null"], banks[k], seed=5000, drift=False)
                for k in kinds if k != "null"}  # fmt: skip
    sizes = {t: min(len(v) for v in pool[t].values()) for t in kinds.values()}
    rej = ", ".join(f"{k} ({kinds[k]}) {float(np.mean(v < 0.05)):.1%}" for k, v in banks.items())
    goal = {"q4": 24, "different model": 3}
    flag = " --pools" + ("" if args.default_pools else f" {args.pools}")
    lines = [
        POOLS_SECTION, "",
        header(args, flag, t0, c0) + f" Pools: {len(raw['prompts'])} "
        f"prompts, per prompt at least {', '.join(f'{t} {s}' for t, s in sizes.items())} "
        f"texts (temperature 1); banks of {args.bank} audits of {PER_PROMPT} per prompt per "
        "tier per comparison.", "",
        settings_line([]),
        "", f"Per-audit rejection at p < 0.05 in the banks: {rej}. Drift is not replayed: the "
        "pools hold temperature-1 texts only (no TTFT, no temperature-0 similarity).", "",
        f"### False alarms per pair, verdict ({n} months of f16 vs f16)", "", *RATE_HEAD,
        rate_line("verdict (e-detector)", [m["verdict"] for m in null]), "",
        f"### Time to detection after a switch at hour {SWITCH} ({n} months each)", "",
        *DETECT_HEAD,
        *(detection_line(f"f16 → {kinds[k]} ({k}; goal ≤ {goal[k]} h) → verdict",
                         [m["verdict"] for m in switched[k]]) for k in switched),
        "", "",
    ]  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--months", type=int, default=100)
    ap.add_argument("--bank", type=int, default=200)
    ap.add_argument("--pool", type=int, default=40, help="simulated texts per prompt per model")
    ap.add_argument(
        "--pools",
        type=Path,
        nargs="?",
        const=None,
        default=False,
        help="replay real-engine pools (default path: verdict_validation's)",
    )
    ap.add_argument(
        "--target",
        action="append",
        help="role=target name in the pools (roles: base, q4, different model)",
    )
    ap.add_argument("--write-docs", action="store_true")
    args = ap.parse_args()
    args.default_pools = args.pools is None
    if args.pools is None:
        from evals.vendors.llamacpp import cache_dir

        args.pools = cache_dir() / "validation" / "pools.json"
    text = replayed(args) if args.pools else simulated(args)
    print(text)
    if args.write_docs:
        write_section(POOLS_SECTION if args.pools else SECTION, text)


if __name__ == "__main__":
    main()
