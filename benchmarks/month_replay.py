"""The month replay: false alarms per pair per quarter, all four monitors together, and
detection times, under the noise a real vendor has, against the pair's one budget.

**The monitor is the product's.** :class:`Pair` folds each simulated hour as
``monitor.derived.evidence.after_run``, ``monitor.derived.loss_detectors.after_run`` and
``monitor.derived.tripwire.after_run`` do, with the same functions and thresholds:

- drift: a probe → ``error_budget.freeze`` (calibrating until it can; newest
  ``MIN_BASELINE_RUNS`` runs) then ``cusum.update``;
- the audit verdict: ``eprocess.update`` at ``error_budget.audit_threshold`` (an inconclusive
  audit with tier-specific failures is not folded: ``error_budget.foldable``; its failure-rate
  test into a detector of its own), with the calibration guard (``eprocess.calibrated_p``
  against the newest base-vs-earlier-base p-values; ``--no-guard`` turns it off);
- capability loss: each probe's paired cases per category → ``capability_loss.update``;
- tripwires, one per tier, hourly: ``REFERENCE_RUNS`` runs frozen as the tier's reference,
  then each run's p → ``eprocess.update`` with the tripwires' calibrator
  (``eprocess.TRIPWIRE``) at the tripwires' threshold (half their share per tier);

an alarm before the switch is acknowledged at once, restarting what is in alarm (a tripwire
collects a new reference). The database path is cross-checked at small n by
``tests/benchmarks/test_month_replay.py`` and ``tests/monitor/test_drift_evidence_path.py``.

**A month** is 48 baseline probes, then 720 hours with one probe, one audit and one tripwire
run per tier each (tripwires start ``REFERENCE_RUNS`` hours before, to have a reference).
Probes: TTFT P50 per tier = prefill (fast 200 ms, base 400 ms) × exp(load + own noise), one
*shared* load (both tiers on one vendor) and the temperature-0 similarity 0.9 + N(0, 0.01²).
Audit p: a permutation p of B = 1,000 (uniform on {1/1001, …, 1}) under the null; after a
switch, z = Φ⁻¹(1 − p) shifted by δ with P(p < 0.05) = the stated rejection rate
(δ = 1.12 for 30 %, 0.36 for 10 %). Each audit from the second day on also brings the base
tier's stability p (its batch against an audit's a day earlier), uniform under the null.
Capability: ``CATEGORIES`` categories of ``CASES`` cases, each answered twice per tier per
probe, a case's pass probability drawn once a month (the same on both tiers under the null).
Tripwire p: the window test's statistic over ``TRIPWIRE_DIMS`` (prompt, token) coordinates,
each the run's mean minus the reference's, standardised: z = √0.2 R + √0.8 E_t with R the
reference's own error (the same for every run until the next reference: the frozen-reference
caveat of docs/measures.md; its share of the variance is (1/n) / (1 + 1/n) with n reference
runs of as many queries as a run: 0.2 at the 4 runs before this change, 0.04 at 24) and E_t
the run's; statistic mean |z|, p its permutation p against the null of
mean |N(0, 1)| (B = 9,999). Scenarios (``SCENARIOS``; the issue's, then ours):

- ``ar1``: load AR(1) φ = 0.5, sd 0.15; own noise N(0, 0.1²).
- ``heavy``: as ``ar1`` with t₃ innovations and t₃ own noise (log-t₃ latencies).
- ``weekday`` / ``weekday peak``: + business hours (9–17, Mon–Fri) load of log 1.3 (×1.8),
  the baseline frozen over a weekend.
- ``incident ×2`` / ``×3``: ``ar1`` plus both tiers slowed ×2 (×3) for 6 h once a month.
- ``outage``: ``ar1`` with one hour in the baseline's where every request failed (no probe
  values; the audit inconclusive; no tripwire run).
- ``5xx bursts``: ``ar1`` plus 4 bursts a month of 1–3 h where the fast tier's requests fail
  (its TTFT missing; the audit inconclusive with a p that rejects 46 % of the time, and a
  failure-rate test that does reject: a true finding, counted apart; the fast tier's
  tripwire run skipped).
- ``cut answers``: 10 % of audits where tier-specific failures cut long answers: inconclusive,
  p rejecting 46 % of the time (the issue's measured figure), failure rate fast 25 % vs 0 %.
- ``miscalibrated p``: 10 % of the null audit p-values moved to U(0, 0.01), on every
  comparison the audit's test makes (fast vs base and base vs earlier base: the test is
  anti-conservative on this vendor).
- ``miscal. fast only`` (ours): the same 10 % on fast vs base only (base vs earlier base
  valid): what no guard built on the base tier can tell from a change of the fast tier.
- ``own pool`` (ours): the fast tier on a pool of its own — an extra AR(1) load φ = 0.8,
  sd 0.08, on the fast tier only, which the ratio does not cancel.
- ``diurnal drift`` (ours): the daily cycle's amplitude grows from 0 to ±0.2 over the month
  on both tiers (seasonal traffic), beyond anything in the baseline.
- ``tripwire hour noise`` (ours): each tripwire run's logprobs move together by an extra
  N(0, 0.3²) per coordinate (the server's state that hour: batch sizes, kernels), which the
  within-run permutation does not see.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse  # noqa: E402
import functools  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import numpy as np  # noqa: E402
from scipy.stats import chi2, fisher_exact, norm  # noqa: E402

from evals.stats import capability_loss, cusum, eprocess, error_budget  # noqa: E402
from evals.stats.capability_paired import CaseCounts  # noqa: E402
from evals.stats.tripwire import DEFAULT_PERMUTATIONS  # noqa: E402

SECTION = "## Month replay: one error budget per pair under real noise"
HOURS, SWITCH, PRE = 720, 360, 48
EVERY_S = 3600
B = 1000
FAST_MS, BASE_MS = 200.0, 400.0
SHIFT = {r: float(norm.isf(0.05) - norm.isf(int(r[:-1]) / 100)) for r in ("30%", "10%")}
CUT_SHIFT = float(norm.isf(0.05) - norm.isf(0.46))  # cut answers: identical models reject 46 %
STABILITY_GAP = 24  # hours: the audit's base batch against an audit's at least a day earlier
CATEGORIES, CASES, ANSWERS = 4, 2, 2  # capability: categories × cases a probe, answers a tier
TRIPWIRE_DIMS = 20  # 4 prompts × top-5 tokens
REFERENCE_RUNS = error_budget.TRIPWIRE_REFERENCE_RUNS  # monitor.derived.tripwire's
REFERENCE_SHARE = (1 / REFERENCE_RUNS) / (1 + 1 / REFERENCE_RUNS)  # the reference's variance part
TRIPWIRE_SHIFT = {"Q8_0-like": 3.0, "subtle": 0.5}  # per coordinate, in run-noise sd
TRIPWIRE_THRESHOLD = eprocess.threshold_for(
    error_budget.runs_per_quarter(EVERY_S), error_budget.tripwire_share_per_tier()
)  # monitor.derived.tripwire.threshold()
MONITORS = ("drift", "verdict", "tripwires", "capability")


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
    miscal_stability: bool = True  # the miscalibration also hits base vs earlier base
    own_pool: bool = False
    diurnal: bool = False
    hour_noise: float = 0.0  # tripwire: per-run shared sd the permutation does not see


SCENARIOS = [
    Scenario("ar1"), Scenario("heavy", load_df=3), Scenario("weekday", weekday=math.log(1.3)),
    Scenario("weekday peak", weekday=math.log(1.8)), Scenario("incident ×2", incident=2.0),
    Scenario("incident ×3", incident=3.0), Scenario("outage", outage=True),
    Scenario("5xx bursts", bursts=4), Scenario("cut answers", cut=0.1),
    Scenario("miscalibrated p", miscal=0.1),
    Scenario("miscal. fast only", miscal=0.1, miscal_stability=False),
    Scenario("own pool", own_pool=True), Scenario("diurnal drift", diurnal=True),
    Scenario("tripwire hour noise", hour_noise=0.3),
]  # fmt: skip


def _noise(rng: np.random.Generator, df: float | None, size: int | None = None) -> np.ndarray:
    if df is None:
        return rng.standard_normal(size)
    return rng.standard_t(df, size) / math.sqrt(df / (df - 2))  # unit variance


def _audit_p(z: float) -> float:
    p = math.ceil(0.5 * math.erfc(z / math.sqrt(2)) * (B + 1)) / (B + 1)  # Φ(−z), discretised
    return max(p, 1 / (B + 1))


def hours_of(sc: Scenario, rng: np.random.Generator, switch: str | None) -> list[dict]:
    """PRE + HOURS simulated hours: each {probe: values, audit: (label, p, failed fast, base),
    stability: p or None, cases: {category: [CaseCounts]}, hour, down: tiers without a
    tripwire run} (module docstring)."""
    n = PRE + HOURS
    start_wd = 5 if sc.weekday else int(rng.integers(0, 7))  # baseline over a weekend
    load, own_load = 0.0, 0.0
    eps = _noise(rng, sc.load_df, n)
    incident_at = int(rng.integers(PRE, PRE + HOURS - 6))
    bursts = {int(t) + k for t in rng.integers(PRE, PRE + HOURS, sc.bursts)
              for k in range(int(rng.integers(1, 4)))}  # fmt: skip
    outage_at = int(rng.integers(5, PRE - 5))
    pass_p = rng.uniform(0.2, 0.9, (CATEGORIES, CASES))
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
        z, zs = rng.standard_normal(), rng.standard_normal()
        label, failed = "no_detectable_difference", (0, 0)
        if after and switch in SHIFT:
            z += SHIFT[switch]
        elif sc.miscal and rng.random() < sc.miscal:
            z = float(norm.isf(rng.random() * 0.01))
        if sc.miscal and sc.miscal_stability and rng.random() < sc.miscal:
            zs = float(norm.isf(rng.random() * 0.01))
        whole = sc.outage and t == outage_at
        if whole or t in bursts or (sc.cut and rng.random() < sc.cut):
            label = "inconclusive"
            failed = (250, 250) if whole else (60, 0)
            z = rng.standard_normal() + (0 if whole else CUT_SHIFT)
            for key in probe if whole else ("ttft_p50:fast", "ttft_ratio:fast_vs_base"):
                probe[key] = None if (whole or t in bursts) else probe[key]
        draws = rng.random((CATEGORIES, CASES, 2, ANSWERS)) < pass_p[:, :, None, None]
        cases = {
            f"c{k}": [CaseCounts(f"c{k}", ANSWERS, int(draws[k, j, 0].sum()), ANSWERS,
                                 int(draws[k, j, 1].sum())) for j in range(CASES)]
            for k in range(CATEGORIES)
        }  # fmt: skip
        out.append({
            "probe": probe, "audit": (label, _audit_p(z), failed), "hour": hour,
            "stability": _audit_p(zs) if t >= PRE + STABILITY_GAP and not whole else None,
            "cases": {} if whole else cases,
            "down": ("fast", "base") if whole else (("fast",) if t in bursts else ()),
        })  # fmt: skip
    return out


@functools.cache
def fisher_p(failed: tuple[int, int]) -> float:
    if failed == (0, 0):
        return 1.0
    f, b = failed
    return float(fisher_exact([[f, 250 - f], [b, 250 - b]]).pvalue)


@functools.cache
def _tripwire_null() -> np.ndarray:
    """Sorted null draws of the tripwire statistic mean |z| over ``TRIPWIRE_DIMS``."""
    rng = np.random.default_rng(12345)
    return np.sort(np.abs(rng.standard_normal((200_000, TRIPWIRE_DIMS))).mean(1))


def tripwire_p(z: np.ndarray) -> float:
    """The permutation p of one run's standardised coordinates (module docstring)."""
    null = _tripwire_null()
    tail = 1 - np.searchsorted(null, float(np.abs(z).mean())) / len(null)
    return (1 + round(tail * DEFAULT_PERMUTATIONS)) / (DEFAULT_PERMUTATIONS + 1)


@dataclass
class Tripwire:
    """One tier's tripwire (``monitor.derived.tripwire._tier_after``): a reference of
    ``REFERENCE_RUNS`` runs, then each run's p into the tier's e-detector."""

    rng: np.random.Generator
    hour_noise: float
    runs: int = 0
    reference: np.ndarray = field(default_factory=lambda: np.zeros(TRIPWIRE_DIMS))
    state: eprocess.EProcessState = field(default_factory=eprocess.EProcessState)

    def run(self, shift: float) -> bool:
        noise = self.rng.standard_normal(TRIPWIRE_DIMS)
        self.runs += 1
        if self.runs == 1:
            self.reference = self.rng.standard_normal(TRIPWIRE_DIMS)
        if self.runs <= REFERENCE_RUNS:
            return False
        z = math.sqrt(REFERENCE_SHARE) * self.reference + math.sqrt(1 - REFERENCE_SHARE) * noise
        z = z + shift + self.hour_noise * self.rng.standard_normal(TRIPWIRE_DIMS)
        evidence = eprocess.AuditEvidence(tripwire_p(z), calibrator=eprocess.TRIPWIRE)
        self.state, d = eprocess.update(self.state, evidence, threshold=TRIPWIRE_THRESHOLD)
        return d.new_alarm

    def acknowledge(self) -> None:
        self.runs, self.state = 0, eprocess.EProcessState()


@dataclass
class Pair:
    """One pair's stored state, folded hour by hour as the product does (module docstring)."""

    guard: bool = True
    evidence: eprocess.EProcessState = field(default_factory=eprocess.EProcessState)
    failures: eprocess.EProcessState = field(default_factory=eprocess.EProcessState)
    capability: dict = field(default_factory=dict)
    window: list = field(default_factory=list)
    baseline: cusum.Baseline | None = None
    state: cusum.CusumState | None = None
    null_ps: list = field(default_factory=list)  # the newest base-vs-earlier-base p-values

    def probe(self, values: dict, hour: int, t: int) -> bool:
        if self.baseline is None:
            self.window = (self.window + [(values, hour)])[-PRE:]
            if len(self.window) == PRE:
                values, hours = [v for v, _ in self.window], [h for _, h in self.window]
                self.baseline = error_budget.freeze(values, hours, EVERY_S)
                if self.baseline is not None:
                    self.state = cusum.start(self.baseline)
            return False
        assert self.state is not None
        self.state, alarm = cusum.update(self.state, self.baseline, values, hour=hour)
        return alarm.new_alarm

    def audit(
        self, label: str, p: float, failed: tuple[int, int], stability: float | None = None
    ) -> tuple[bool, bool]:
        """(verdict alarm, failure-rate alarm) after one audit, as ``evidence._fold_audit``."""
        folded = p if error_budget.foldable(label, p, [fisher_p(failed)]) else None
        if folded is not None and self.guard:
            folded = eprocess.calibrated_p(folded, self.null_ps)
        if stability is not None:
            self.null_ps = (self.null_ps + [stability])[-eprocess.CALIBRATION_WINDOW :]
        c = error_budget.audit_threshold(EVERY_S)
        self.evidence, d = eprocess.update(self.evidence, eprocess.AuditEvidence(folded),
                                           threshold=c)  # fmt: skip
        alarm = d.new_alarm
        self.failures, f = eprocess.update(
            self.failures, eprocess.AuditEvidence(max(fisher_p(failed), 1e-12)),
            threshold=error_budget.audit_threshold(EVERY_S, "failed requests"),
        )  # fmt: skip
        return alarm, f.new_alarm

    def capability_probe(self, cases: dict) -> bool:
        """A probe's paired cases into the loss detectors, as ``loss_detectors.after_run``."""
        limit = capability_loss.threshold_for(
            error_budget.runs_per_quarter(EVERY_S), CATEGORIES, error_budget.share("capability")
        )
        fired = False
        for cat, rows in cases.items():
            old = self.capability.get(cat, capability_loss.LossState())
            new = capability_loss.update(old, rows, threshold=limit)
            fired |= new.alarmed and not old.alarmed
            self.capability[cat] = new
        return fired

    def acknowledge(self, drift: bool, verdict: bool) -> None:
        if verdict:
            self.evidence = eprocess.acknowledge(self.evidence)
            self.failures = eprocess.EProcessState()
            self.capability = {}
        if drift:
            self.window, self.baseline, self.state = [], None, None


def one_month(sc: Scenario, seed: int, switch: str | None = None, guard: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    hours = hours_of(sc, rng, switch)
    pair = Pair(guard=guard)
    wires = {t: Tripwire(np.random.default_rng([seed, k]), sc.hour_noise)
             for k, t in enumerate(("fast", "base"))}  # fmt: skip
    out: dict = {k: [] for k in (*MONITORS, "failures", "oracle")}
    shift = TRIPWIRE_SHIFT.get(switch or "", 0.0)
    oracle, log_c = 0.0, math.log(error_budget.audit_threshold(EVERY_S))
    for t, h in enumerate(hours):
        drift = pair.probe(h["probe"], h["hour"], t)
        tripped = False
        if t >= PRE - REFERENCE_RUNS:
            for tier, wire in wires.items():
                if tier not in h["down"]:
                    after = tier == "fast" and t >= PRE + SWITCH
                    if wire.run(shift if after else 0.0) and t >= PRE:
                        tripped = True
                        if switch is None or t < PRE + SWITCH:
                            wire.acknowledge()
        if t < PRE:
            continue
        verdict, failures = pair.audit(*h["audit"], h["stability"])
        capability = pair.capability_probe(h["cases"])
        i = t - PRE
        if switch in SHIFT and i >= SWITCH:  # Page's CUSUM with the true δ: the best any p can do
            d = SHIFT[switch]
            oracle = max(0.0, oracle + d * float(norm.isf(h["audit"][1])) - d * d / 2)
            out["oracle"] += [i] if oracle >= log_c else []
        hits = {"drift": drift, "verdict": verdict, "failures": failures,
                "tripwires": tripped, "capability": capability}  # fmt: skip
        for key, hit in hits.items():
            out[key] += [i] if hit else []
        if (drift or verdict or failures or capability) and (switch is None or i < SWITCH):
            pair.acknowledge(drift, verdict or failures or capability)
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


def run(months: int, scenarios: list[Scenario], guard: bool) -> list[str]:
    rows = []
    for k, sc in enumerate(scenarios):
        seed0 = 1000 * SCENARIOS.index(sc)
        ms = [one_month(sc, seed0 + m, guard=guard) for m in range(months)]
        blind = sum(m["blind"] for m in ms)
        cells = " | ".join(per_quarter(ms, (k,)) for k in MONITORS)
        rows.append(f"| {sc.name} | {cells} | **{per_quarter(ms, MONITORS)}** | "
                    f"{per_quarter(ms, ('failures',))} | {blind} |")  # fmt: skip
        print(rows[-1], flush=True)
    return rows


DETECTIONS = (
    ("30%", "verdict"), ("10%", "verdict"), ("10%", "oracle"), ("ttft ×1.5", "drift"),
    ("Q8_0-like", "tripwires"), ("subtle", "tripwires"),
)  # fmt: skip


def detection(months: int, guard: bool, only: list[str] | None = None) -> list[str]:
    ar1 = SCENARIOS[0]
    rows, cache = [], {}
    for switch, key in DETECTIONS:
        if only and switch not in only:
            continue
        if switch not in cache:
            cache[switch] = [one_month(ar1, 77_000 + m, switch, guard) for m in range(months)]
        rows.append(f"| {switch} ({key}) | {delays(cache[switch], key)} |")
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--months", type=int, default=300)
    ap.add_argument("--detect-months", type=int, default=None, help="default: --months")
    ap.add_argument("--only", action="append", help="scenario names to run")
    ap.add_argument("--no-guard", action="store_true", help="without the calibration guard")
    ap.add_argument("--no-detection", action="store_true")
    ap.add_argument("--no-null", action="store_true", help="detection times only")
    ap.add_argument("--switch", action="append", help="switches to time (default: all)")
    ap.add_argument(
        "--reference-runs", type=int, help="tripwire reference runs (default: the product's)"
    )
    args = ap.parse_args()
    guard = not args.no_guard
    if args.reference_runs:  # the frozen reference's size (its share of every run's variance)
        global REFERENCE_RUNS, REFERENCE_SHARE
        REFERENCE_RUNS = args.reference_runs
        REFERENCE_SHARE = (1 / REFERENCE_RUNS) / (1 + 1 / REFERENCE_RUNS)
    t0, c0 = time.monotonic(), time.process_time()
    print(f"months: {args.months}; guard: {guard}", flush=True)
    picked = [s for s in SCENARIOS if not args.only or s.name in args.only]
    picked = [] if args.no_null else picked
    rows = run(args.months, picked, guard)
    det = (
        []
        if args.no_detection
        else detection(args.detect_months or args.months, guard, args.switch)
    )
    print(f"months: {args.months}; guard {guard}; tripwire reference {REFERENCE_RUNS} runs; "
          f"wall {time.monotonic() - t0:.0f} s, CPU "
          f"{time.process_time() - c0:.0f} s, load {os.getloadavg()[0]:.1f}; Python "
          f"{platform.python_version()}, numpy {np.__version__}")  # fmt: skip
    print(
        "| scenario | drift | verdict | tripwires | capability loss | **pair total** (budget "
        "0.5) | failure-rate detector | months blind at the end |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("| switch at hour 360 (monitor) | detection: median, p90, missed |")
    print("|---|---|")
    print("\n".join(det))


if __name__ == "__main__":
    main()
