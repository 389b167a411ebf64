"""The month replay: false alarms per pair per quarter (all monitors together) and detection
times, under the noise a real vendor has, against the pair's budget.

**The monitor is the product's.** :class:`Pair` folds each simulated hour as
``monitor.derived.evidence.after_run`` does, with the same functions: a probe →
``error_budget.freeze`` (calibrating until it can; newest ``MIN_BASELINE_RUNS`` runs) then
``cusum.update``; an audit → ``eprocess.update`` at ``error_budget.audit_threshold`` (not
folded when the audit is inconclusive; its failure-rate test into a detector of its own);
an alarm before the switch is acknowledged at once, resetting what is in alarm. The database
path is cross-checked at small n by ``tests/monitor/test_drift_evidence_path.py``.

``--code DIR`` runs the same months against another checkout of ``evals/`` (e.g. the code
before this change, ``git archive a741dc1 | tar -x -C DIR``): the "before" figures. When that
code has no ``error_budget.SHARES`` the pair folds as it did then (every audit's p, no rate
detector, acknowledging resets everything).

**A month** is 48 baseline probes, then 720 hours with one probe and one audit each.
Probes: TTFT P50 per tier = prefill (fast 200 ms, base 400 ms) × exp(load + own noise), one
*shared* load (both tiers on one vendor) and the temperature-0 similarity 0.9 + N(0, 0.01²).
Audit p: a permutation p of B = 1,000 (uniform on {1/1001, …, 1}) under the null; after a
switch, z = Φ⁻¹(1 − p) shifted by δ with P(p < 0.05) = the stated rejection rate
(δ = 1.12 for 30 %, 0.36 for 10 %). Scenarios (``SCENARIOS``; the issue's, then ours):

- ``ar1``: load AR(1) φ = 0.5, sd 0.15; own noise N(0, 0.1²).
- ``heavy``: as ``ar1`` with t₃ innovations and t₃ own noise (log-t₃ latencies).
- ``weekday`` / ``weekday peak``: + business hours (9–17, Mon–Fri) load of log 1.3 (×1.8),
  the baseline frozen over a weekend.
- ``incident ×2`` / ``×3``: ``ar1`` plus both tiers slowed ×2 (×3) for 6 h once a month.
- ``outage``: ``ar1`` with one probe and one audit in the baseline's hours where every request
  failed (no values; the audit inconclusive).
- ``5xx bursts``: ``ar1`` plus 4 bursts a month of 1–3 h where the fast tier's requests fail
  (its TTFT missing; the audit inconclusive with a p that rejects 46 % of the time, and a
  failure-rate test that does reject: a true finding, counted apart).
- ``cut answers``: 10 % of audits where tier-specific failures cut long answers: inconclusive,
  p rejecting 46 % of the time (the issue's measured figure), failure rate fast 25 % vs 0 %.
- ``miscalibrated p``: 10 % of the null audit p-values moved to U(0, 0.01).
- ``own pool`` (ours): the fast tier on a pool of its own — an extra AR(1) load φ = 0.8,
  sd 0.08, on the fast tier only, which the ratio does not cancel.
- ``diurnal drift`` (ours): the daily cycle's amplitude grows from 0 to ±0.2 over the month
  on both tiers (seasonal traffic), beyond anything in the baseline.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if "--code" in sys.argv:  # the code under test, before anything imports evals
    sys.path.insert(0, str(Path(sys.argv[sys.argv.index("--code") + 1]).resolve()))
sys.path.insert(1 if "--code" in sys.argv else 0, str(ROOT))

import argparse  # noqa: E402
import functools  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import numpy as np  # noqa: E402
from scipy.stats import chi2, fisher_exact, norm  # noqa: E402

from evals.stats import cusum, eprocess, error_budget  # noqa: E402

SECTION = "## Month replay: one error budget per pair under real noise"
HOURS, SWITCH, PRE = 720, 360, 48
EVERY_S = 3600
B = 1000
NEW = hasattr(error_budget, "SHARES")
FAST_MS, BASE_MS = 200.0, 400.0
SHIFT = {r: float(norm.isf(0.05) - norm.isf(int(r[:-1]) / 100)) for r in ("30%", "10%")}
CUT_SHIFT = float(norm.isf(0.05) - norm.isf(0.46))  # cut answers: identical models reject 46 %


@dataclass
class Scenario:
    name: str
    load_df: float | None = None  # t innovations (None: normal)
    weekday: float = 0.0  # business-hours log load
    incident: float = 1.0  # both tiers × this for 6 h
    outage: bool = False
    bursts: int = 0
    cut: float = 0.0  # share of audits cut by tier-specific failures
    miscal: float = 0.0
    own_pool: bool = False
    diurnal: bool = False


SCENARIOS = [
    Scenario("ar1"), Scenario("heavy", load_df=3), Scenario("weekday", weekday=math.log(1.3)),
    Scenario("weekday peak", weekday=math.log(1.8)), Scenario("incident ×2", incident=2.0),
    Scenario("incident ×3", incident=3.0), Scenario("outage", outage=True),
    Scenario("5xx bursts", bursts=4), Scenario("cut answers", cut=0.1),
    Scenario("miscalibrated p", miscal=0.1), Scenario("own pool", own_pool=True),
    Scenario("diurnal drift", diurnal=True),
]  # fmt: skip


def _noise(rng: np.random.Generator, df: float | None, size: int | None = None) -> np.ndarray:
    if df is None:
        return rng.standard_normal(size)
    return rng.standard_t(df, size) / math.sqrt(df / (df - 2))  # unit variance


def hours_of(sc: Scenario, rng: np.random.Generator, switch: str | None) -> list[dict]:
    """PRE + HOURS simulated hours: each {probe: values, audit: (label, p, failed fast, base),
    hour, truth} (module docstring)."""
    n = PRE + HOURS
    start_wd = 5 if sc.weekday else int(rng.integers(0, 7))  # baseline over a weekend
    load, own_load = 0.0, 0.0
    eps = _noise(rng, sc.load_df, n)
    incident_at = int(rng.integers(PRE, PRE + HOURS - 6))
    bursts = {int(t) + k for t in rng.integers(PRE, PRE + HOURS, sc.bursts)
              for k in range(int(rng.integers(1, 4)))}  # fmt: skip
    outage_at = int(rng.integers(5, PRE - 5))
    out = []
    for t in range(n):
        load = 0.5 * load + eps[t] * math.sqrt(1 - 0.25)
        own_load = 0.8 * own_load + rng.standard_normal() * math.sqrt(1 - 0.64)
        hour, day = t % 24, (start_wd + t // 24) % 7
        shared = 0.15 * load + 0.045 * math.sin(2 * math.pi * hour / 24)
        if sc.diurnal:
            shared += 0.2 * max(0, t - PRE) / HOURS * math.sin(2 * math.pi * hour / 24)
        if sc.weekday and day < 5 and 9 <= hour < 17:
            shared += sc.weekday
        if incident_at <= t < incident_at + 6:
            shared += math.log(sc.incident)
        after = switch is not None and t >= PRE + SWITCH
        f_own, b_own = 0.1 * _noise(rng, sc.load_df, 2)
        fast = FAST_MS * math.exp(shared + f_own + (0.08 * own_load if sc.own_pool else 0))
        fast *= 1.5 if after and switch == "ttft ×1.5" else 1.0
        base = BASE_MS * math.exp(shared + b_own)
        probe = {"ttft_p50:fast": fast, "ttft_p50:base": base,
                 "ttft_ratio:fast_vs_base": fast / base,
                 "similarity:fast_vs_base": 0.9 + 0.01 * rng.standard_normal()}  # fmt: skip
        z = rng.standard_normal()
        label, failed = "no_detectable_difference", (0, 0)
        if after and switch in SHIFT:
            z += SHIFT[switch]
        elif sc.miscal and rng.random() < sc.miscal:
            z = float(norm.isf(rng.random() * 0.01))
        if (sc.outage and t == outage_at) or t in bursts or (sc.cut and rng.random() < sc.cut):
            whole = sc.outage and t == outage_at
            label = "inconclusive"
            failed = (250, 250) if whole else (60, 0)
            z = rng.standard_normal() + (0 if whole else CUT_SHIFT)
            for key in probe if whole else ("ttft_p50:fast", "ttft_ratio:fast_vs_base"):
                probe[key] = None if (whole or t in bursts) else probe[key]
        p = math.ceil(float(norm.sf(z)) * (B + 1)) / (B + 1)
        out.append({"probe": probe, "audit": (label, max(p, 1 / (B + 1)), failed), "hour": hour})
    return out


@functools.cache
def fisher_p(failed: tuple[int, int]) -> float:
    if failed == (0, 0):
        return 1.0
    f, b = failed
    return float(fisher_exact([[f, 250 - f], [b, 250 - b]]).pvalue)


@dataclass
class Pair:
    """One pair's stored state, folded hour by hour as ``evidence.after_run`` does."""

    evidence: eprocess.EProcessState = field(default_factory=eprocess.EProcessState)
    failures: eprocess.EProcessState = field(default_factory=eprocess.EProcessState)
    window: list = field(default_factory=list)
    baseline: cusum.Baseline | None = None
    state: cusum.CusumState | None = None
    frozen_at: int | None = None

    def probe(self, values: dict, hour: int, t: int) -> bool:
        if self.baseline is None:
            self.window = (self.window + [(values, hour)])[-PRE:]
            if len(self.window) == PRE and (NEW or self.frozen_at is None):
                values, hours = [v for v, _ in self.window], [h for _, h in self.window]
                self.baseline = error_budget.freeze(values, hours, EVERY_S)
                if self.baseline is not None:
                    self.state, self.frozen_at = cusum.start(self.baseline), t
                elif not NEW:
                    self.frozen_at = -1  # the old product retried the same 48 runs forever
            return False
        assert self.state is not None
        self.state, alarm = cusum.update(self.state, self.baseline, values, hour=hour)
        return alarm.new_alarm

    def audit(self, label: str, p: float, failed: tuple[int, int]) -> tuple[bool, bool]:
        folded = p if (not NEW or label != "inconclusive") else None
        c = error_budget.audit_threshold(EVERY_S)
        evidence = eprocess.AuditEvidence(folded)
        self.evidence, d = eprocess.update(self.evidence, evidence, threshold=c)
        if not NEW:
            return d.new_alarm, False
        self.failures, f = eprocess.update(
            self.failures, eprocess.AuditEvidence(max(fisher_p(failed), 1e-12)),
            threshold=error_budget.audit_threshold(EVERY_S, "failed requests"),
        )  # fmt: skip
        return d.new_alarm, f.new_alarm

    def acknowledge(self, drift: bool, verdict: bool) -> None:
        if verdict or not NEW:
            self.evidence = eprocess.acknowledge(self.evidence)
            self.failures = eprocess.EProcessState()
        if drift or not NEW:
            self.window, self.baseline, self.state = [], None, None
            self.frozen_at = None


def one_month(sc: Scenario, seed: int, switch: str | None = None) -> dict:
    rng = np.random.default_rng(seed)
    hours = hours_of(sc, rng, switch)
    pair = Pair()
    out: dict = {"drift": [], "verdict": [], "failures": [], "blind": False}
    for t, h in enumerate(hours):
        drift = pair.probe(h["probe"], h["hour"], t)
        if t < PRE:
            continue
        verdict, failures = pair.audit(*h["audit"])
        i = t - PRE
        for key, hit in (("drift", drift), ("verdict", verdict), ("failures", failures)):
            out[key] += [i] if hit else []
        if (drift or verdict or failures) and (switch is None or i < SWITCH):
            pair.acknowledge(drift, verdict or failures)
    out["blind"] = pair.baseline is None  # still collecting at the month's end
    return out


def poisson_ci(count: int, exposure: float) -> tuple[float, float]:
    low = chi2.ppf(0.025, 2 * count) / 2 if count else 0.0
    return low / exposure, chi2.ppf(0.975, 2 * count + 2) / 2 / exposure


def per_quarter(months: list[dict], keys: tuple[str, ...]) -> str:
    total = sum(len(m[k]) for m in months for k in keys)
    lo, hi = poisson_ci(total, len(months) / 3)
    return f"{3 * total / len(months):.2f} [{lo:.2f}, {hi:.2f}]"


def delays(months: list[dict], key: str) -> str:
    d = [next((i - SWITCH + 1 for i in m[key] if i >= SWITCH), math.inf) for m in months]
    hit = [x for x in d if math.isfinite(x)]
    if not hit:
        return f"– (missed {len(d)} of {len(d)})"
    q = np.percentile(d, [50, 90], method="higher")
    word = lambda x: f"{x:.0f} h" if math.isfinite(x) else "missed"  # noqa: E731
    return f"{word(q[0])}, p90 {word(q[1])}, missed {len(d) - len(hit)} of {len(d)}"


def run(months: int, scenarios: list[Scenario]) -> list[str]:
    rows = []
    for k, sc in enumerate(scenarios):
        ms = [one_month(sc, 1000 * k + m) for m in range(months)]
        blind = sum(m["blind"] for m in ms)
        rows.append(
            f"| {sc.name} | {per_quarter(ms, ('drift',))} | {per_quarter(ms, ('verdict',))} | "
            f"**{per_quarter(ms, ('drift', 'verdict'))}** | "
            f"{per_quarter(ms, ('failures',)) if NEW else '–'} | {blind} |"
        )  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def detection(months: int) -> list[str]:
    ar1 = SCENARIOS[0]
    rows = []
    for switch, key in (("30%", "verdict"), ("10%", "verdict"), ("ttft ×1.5", "drift")):
        ms = [one_month(ar1, 77_000 + m, switch) for m in range(months)]
        rows.append(f"| {switch} ({key}) | {delays(ms, key)} |")
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--months", type=int, default=150)
    ap.add_argument("--code", type=Path, help="another checkout's root (its evals/ is used)")
    ap.add_argument("--only", action="append", help="scenario names to run")
    args = ap.parse_args()
    t0, c0 = time.monotonic(), time.process_time()
    print(f"code: {args.code or '(this branch)'}; months: {args.months}", flush=True)
    picked = [s for s in SCENARIOS if not args.only or s.name in args.only]
    rows = run(args.months, picked)
    det = detection(args.months)
    code = f"--code {args.code}" if args.code else "(this branch)"
    print(f"code: {code}; months: {args.months}; NEW={NEW}; wall "
          f"{time.monotonic() - t0:.0f} s, CPU {time.process_time() - c0:.0f} s; "
          f"Python {platform.python_version()}, numpy {np.__version__}")  # fmt: skip
    print("| scenario | drift | verdict | pair total (budget 0.5) | failure-rate detector | "
          "months blind at the end |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("| switch at hour 360 (monitor) | detection: median, p90, missed |")
    print("|---|---|")
    print("\n".join(det))


if __name__ == "__main__":
    main()
