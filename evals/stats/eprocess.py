"""Evidence that accumulates across audits: e-values, an e-detector, and e-BH across pairs.

A test at α = 0.05 after every hourly audit raises ~36 false alarms a month per pair. Here each
audit contributes one **e-value** (a nonnegative statistic with E[e] ≤ 1 when the tiers do not
differ), and the pair's state carries two running products across audits:

- ``evalue`` — the product of the e-values since the state was (re)started. Under H0 it is a
  test supermartingale, so it is an *e-process*: P(sup_t evalue_t ≥ 1/α) ≤ α (Ville 1939),
  valid at any stopping time. It is what the overview feeds to e-BH across pairs.
- ``detector`` — the e-CUSUM detector of Shin, Ramdas & Rinaldo, "E-detectors: a
  nonparametric framework for sequential change detection", NEJSDS 2023, §3:
      M_t = max(M_{t−1}, 1) · e_t,     alarm when M_t ≥ c.
  M_t ≤ SR_t (the e-Shiryaev–Roberts detector, SR_t = (SR_{t−1} + 1) · e_t, with E_∞ SR_t = t),
  so the average run length to a false alarm is at least c (their Thm 3.3). The product
  ``evalue`` alone would be a poor detector: under H0 the log of the product drifts down
  (E log e < 0) without bound, and after months of honest audits a real change would first
  have to climb back from 10⁻⁵⁰. The max with 1 forgets the good news, not the bad.

**The error budget.** Alarms on an honest pair, restarted after each acknowledgement, form a
renewal process with mean gap ≥ c, so the long-run rate of false alarms is ≤ 1/c per audit and
the expected number in a period of N audits is ≤ N/c (renewal-reward theorem). Choosing
c = N / budget gives ``budget`` false alarms per period: at hourly audits a quarter is 2,160
audits, and the default budget of 0.5 per quarter gives c = 4,320 (α_period = 1/c).
Measured by ``benchmarks/monitoring_month.py``.

**The e-value of one audit.** The run's own MMD permutation p-value p (valid: a fresh sample
each audit, so conditionally on the past it is super-uniform under H0) is turned into e-values
by **shift calibrators** (:func:`shift_e`): with z = Φ⁻¹(1 − max(p, ``P_FLOOR``)),
e_δ(p) = exp(δ z − A(δ)), A(δ) = log E exp(δ z) under a uniform p, so E e_δ(U) = 1, and e_δ
decreases in p, so E e_δ ≤ 1 for any super-uniform p (a valid calibrator: Vovk & Wang,
"E-values: calibration, combination and applications", Ann. Stat. 2021, §2). e_δ is the
likelihood ratio of a shift δ of the normal score (log-optimal when z moves by δ), so a
moderate change — z shifted by 1.1 (30 % of audits rejecting at 0.05) or 0.36 (10 %) —
grows the evidence by δ²/2 per audit, where the older calibrator (1 − p + p ln p)/(p (ln p)²)
was capped at e(1/1001) ≈ 20.8 and needed 23 h (median) for 30 % and mostly missed 10 %
within 15 days. p is clipped to [0.01, 0.99]: the floor bounds one audit's e-value (a
permutation p is at best 1/(B + 1)), so no single audit and no spike of tiny p-values buys an
alarm alone; the ceiling keeps a p of 1 from multiplying the e-process by 0 for good.
**One calibrator per monitor** (:class:`Calibrator`): the floor is where a monitor's p stops
being trusted. Audits: 0.01 (``VERDICT``): far above the audit's permutation resolution
(1/1001), so a spike of tiny p-values buys no more than a p of 0.01. Tripwires: 1/(9,999 + 1)
(``TRIPWIRE``), their permutation test's own resolution: a switched model drives every run's p
to that floor, each run then brings e ≈ 66 and three runs reach the tripwires' threshold (with
the audits' floor a run brought ≈ 7 and it took four).
**The detector is a mixture** over ``GRID`` (Shin, Ramdas & Rinaldo 2023, §3.2): one e-CUSUM
M_t^δ per δ, alarm when their average reaches c. The average of e-Shiryaev–Roberts processes
has E_∞ = t too, so ARL ≥ c holds for the mixture (their Thm 3.3), and the grid spares the
choice of δ (the cost: log(len(GRID)) of evidence). An audit may also bring its own e-value
(e.g. the final wealth of the within-run betting test of :mod:`evals.stats.sequential`); several
e-values of one audit are averaged (an average of e-values is an e-value, whatever their
dependence). A per-run p-value therefore stays as evidence, but never alarms on its own.

**The calibration guard.** A calibrator is valid only if the audit's p is super-uniform when the
tiers do not differ. When the vendor's serving makes the audit's test itself anti-conservative
(10 % of honest audits with p < 0.01 reject at 0.05 in 14.5 % of audits, more than a real change
that rejects in 10 %), no calibrator of the p alone can catch the one and ignore the other. The
audits already measure the test's null on this vendor: the base tier's batch against its batch
in an audit a day earlier (``base_stability``), one model compared with itself across time
windows. The pair keeps the newest ``CALIBRATION_WINDOW`` of those p-values and checks them for
an excess of small ones (a binomial test at 0.01 and 0.05, :func:`null_miscalibrated`). While
they look uniform (and before a pair has any: its first day of audits, whose tests then stand
alone) the audit's own p is folded. When they do not, and while there are fewer than
``MIN_CALIBRATION`` of them to check, the p folded is the larger of the test's p and its
*conformal* p among them (:func:`calibrated_p`: the rank of p among the base tier's own
p-values; Vovk, Gammerman & Shafer, "Algorithmic Learning in a Random World", 2005, ch. 2). If
the test is valid, the first is; if the test is miscalibrated alike on both comparisons, the
second is (the fast-vs-base p is then exchangeable with the base-vs-base ones); the maximum of
two p-values is valid when either is, so the guard never makes a valid p invalid, whichever way
the check goes. The conformal p always, instead of only after the check, would cost half the
evidence a 10 % change brings per audit (the window's own noise at 168 p-values), hence the
check. What it cannot do: a miscalibration of the fast-vs-base comparison alone is, to any test,
a difference of the fast tier. The window is shared by consecutive audits (like the tripwires'
frozen reference), so the p-values it gives are each valid but not independent: measured by
``benchmarks/month_replay.py``.

The state is a frozen dataclass with ``to_json``/``from_json``: store it with the pair, call
:func:`update` once per finished audit, and :func:`acknowledge` when a person accepts a change
and re-baselines.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

AUDITS_PER_QUARTER_HOURLY = 24 * 90
DEFAULT_BUDGET = 0.5  # expected false alarms per pair per period
CALIBRATION_WINDOW = 168  # base-vs-earlier-base p-values kept as the pair's null (a week)
MIN_CALIBRATION = 72  # fewer: only the conformal p (too few to check: a pair's first days)
CHECK_LEVELS = (0.01, 0.05)  # where the base tier's p-values are checked for an excess
CHECK_ALPHA = 0.01  # a false check costs little: the conformal p, near the test's own
GRID = (0.25, 0.5, 1.0, 2.0)  # shifts δ of the normal score the mixture detector bets on
P_FLOOR = 0.01  # a p below this counts as this, above 1 − this as that (bounds e both ways)
TRIPWIRE_P_FLOOR = 1 / 10_000  # the tripwires' permutation resolution (9,999 permutations)


@functools.lru_cache(maxsize=64)
def _log_norm(delta: float, p_floor: float = P_FLOOR) -> float:
    """A(δ) = log E exp(δ clip(Z, ±z_cap)), Z ~ N(0, 1): e^{−δ c} Φ(−c) + e^{δ²/2}
    (Φ(c − δ) − Φ(−c − δ)) + e^{δ c} (1 − Φ(c)), c = z_cap = Φ⁻¹(1 − p_floor) (the normal's
    moment generating function, clipped at both ends)."""
    from scipy.stats import norm  # at use: evals/stats/__init__.py says why

    c = float(norm.isf(p_floor))
    inside = float(norm.cdf(c - delta) - norm.cdf(-c - delta))
    return math.log(math.exp(-delta * c) * float(norm.cdf(-c))
                    + math.exp(delta * delta / 2) * inside
                    + math.exp(delta * c) * float(norm.sf(c)))  # fmt: skip


def shift_e(p: float, delta: float, p_floor: float = P_FLOOR) -> float:
    """The shift calibrator e_δ(p) = exp(δ clip(Φ⁻¹(1 − p), ±z_cap) − A(δ)) (module docstring):
    E e_δ(U) = 1 for a uniform p, ≤ 1 for a super-uniform one."""
    if not 0.0 < p <= 1.0:
        raise ValueError(f"p-value must be in (0, 1], got {p}")
    from scipy.special import ndtri

    z = -float(ndtri(min(max(p, p_floor), 1 - p_floor)))  # Φ⁻¹(1 − p), clipped
    return math.exp(delta * z - _log_norm(delta, p_floor))


@dataclass(frozen=True)
class Calibrator:
    """How one monitor turns a p into e-values: one shift calibrator per δ of ``grid``, p
    clipped to [p_floor, 1 − p_floor] (module docstring, "One calibrator per monitor")."""

    p_floor: float = P_FLOOR
    grid: tuple[float, ...] = GRID

    def components(self, p: float) -> tuple[float, ...]:
        return tuple(shift_e(p, d, self.p_floor) for d in self.grid)


VERDICT = Calibrator()
TRIPWIRE = Calibrator(TRIPWIRE_P_FLOOR)


def p_to_e(p: float) -> float:
    """Mixture calibrator (Vovk & Wang 2021): e(p) = (1 − p + p ln p) / (p (ln p)²), with
    e(1) = 0.5 by continuity (the limit as p → 1) and E e(U) = 1 for U uniform."""
    if not 0.0 < p <= 1.0:
        raise ValueError(f"p-value must be in (0, 1], got {p}")
    if p > 1.0 - 1e-9:
        return 0.5
    lp = math.log(p)
    return (1.0 - p + p * lp) / (p * lp * lp)


def threshold_for(audits_per_period: float, budget: float = DEFAULT_BUDGET) -> float:
    """The detector threshold c = N / budget (module docstring): expected false alarms per
    period ≤ ``budget`` at ``audits_per_period`` audits a period."""
    if audits_per_period <= 0 or budget <= 0:
        raise ValueError("audits_per_period and budget must be positive")
    return max(1.0, audits_per_period / budget)


@dataclass(frozen=True)
class AuditEvidence:
    """What one finished audit brings: its MMD p-value and/or its own e-value."""

    p_value: float | None
    e_value: float | None = None
    run_id: int | None = None
    calibrator: Calibrator = VERDICT

    def components(self) -> tuple[float, ...] | None:
        """One e-value per δ of ``GRID``: e_δ(p), averaged with the audit's own e-value when
        it brings one (an average of e-values is an e-value); None without evidence."""
        own = self.e_value
        if own is not None and (own < 0 or not math.isfinite(own)):
            raise ValueError(f"e-value must be finite and ≥ 0, got {own}")
        if self.p_value is None:
            return None if own is None else (own,) * len(self.calibrator.grid)
        parts = self.calibrator.components(self.p_value)
        return parts if own is None else tuple((e + own) / 2 for e in parts)

    def e(self) -> float | None:
        """The audit's e-value for the product ``evalue``: the average over ``GRID``."""
        parts = self.components()
        return sum(parts) / len(parts) if parts else None


@dataclass(frozen=True)
class EProcessState:
    """A pair's evidence across audits since its last acknowledgement."""

    evalue: float = 1.0  # product of e-values: the e-process (for e-BH, anytime-valid)
    detector: float = 1.0  # e-CUSUM statistic M_t
    audits: int = 0  # audits counted since the last acknowledgement
    alarmed: bool = False  # stays True until acknowledged
    alarm_audit: int | None = None  # which audit (1-based, since acknowledgement) alarmed
    last_run_id: int | None = None
    detectors: tuple[float, ...] = ()  # M_t^δ per δ of GRID; ``detector`` is their average

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> EProcessState:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> EProcessState:
        """From a stored dict; keys this version does not know are left out."""
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        if isinstance(known.get("detectors"), list):
            known["detectors"] = tuple(known["detectors"])  # type: ignore[arg-type]
        return cls(**known)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Decision:
    alarm: bool  # the detector is (or has been, since acknowledgement) at or above threshold
    new_alarm: bool  # this audit raised it
    e_value: float | None  # this audit's contribution (None: no evidence, nothing changed)
    detector: float
    threshold: float
    sentence: str


def update(
    state: EProcessState, evidence: AuditEvidence, *, threshold: float
) -> tuple[EProcessState, Decision]:
    """Fold one audit into the state. An audit without evidence (no p, no e) changes nothing.
    Once alarmed, the state keeps accumulating but stays alarmed until :func:`acknowledge`."""
    parts = evidence.components()
    e = sum(parts) / len(parts) if parts else None
    if parts is None or e is None:
        new = state
    else:
        old = (
            state.detectors
            if len(state.detectors) == len(parts)
            else (state.detector,) * len(parts)
        )  # a state stored before the mixture: each component starts where it stood
        detectors = tuple(max(m, 1.0) * x for m, x in zip(old, parts, strict=True))
        detector = sum(detectors) / len(detectors)
        audits = state.audits + 1
        fired = not state.alarmed and detector >= threshold
        new = replace(
            state, evalue=state.evalue * e, detector=detector, detectors=detectors,
            audits=audits,
            alarmed=state.alarmed or fired,
            alarm_audit=audits if fired else state.alarm_audit,
            last_run_id=evidence.run_id if evidence.run_id is not None else state.last_run_id,
        )  # fmt: skip
    fired = new.alarmed and not state.alarmed
    if new.alarmed:
        words = f"evidence across audits: outputs differ (detector {new.detector:.3g} ≥ "
        words += f"{threshold:.0f}, since audit {new.alarm_audit} after acknowledgement)"
    else:
        words = f"evidence across audits below the alarm level ({new.detector:.3g} < "
        words += f"{threshold:.0f}, {new.audits} audits)"
    return new, Decision(new.alarmed, fired, e, new.detector, threshold, words)


def acknowledge(state: EProcessState) -> EProcessState:
    """A person accepted the change (and re-baselined): evidence starts again from 1."""
    return EProcessState(last_run_id=state.last_run_id)


def null_miscalibrated(null_ps: Sequence[float]) -> bool:
    """Whether the base tier's own p-values reject too often to be uniform: at q in
    ``CHECK_LEVELS``, #{p ≤ q} is improbable for n uniform p-values, P(Bin(n, q) ≥ count)
    < ``CHECK_ALPHA`` (a one-sided binomial test)."""
    n = len(null_ps)
    return any(_tail(sum(1 for p in null_ps if p <= q), n, q) < CHECK_ALPHA for q in CHECK_LEVELS)


@functools.lru_cache(maxsize=4096)
def _tail(count: int, n: int, q: float) -> float:
    """P(Bin(n, q) ≥ count)."""
    from scipy.stats import binom

    return float(binom.sf(count - 1, n, q))


def calibrated_p(p: float, null_ps: Sequence[float]) -> float:
    """The audit's p checked against the pair's own null (module docstring, "The calibration
    guard"): the test's own p while the base tier's p-values look uniform
    (:func:`null_miscalibrated`) or before there is any, else — and while there are fewer
    than ``MIN_CALIBRATION`` of them — max(p, (1 + #{q ∈ null_ps : q ≤ p}) / (|null_ps| + 1)),
    the larger of the test's p and its conformal p among them. Either way valid when the
    test's p is; the second also when the tiers' p and the base tier's are exchangeable (a
    test miscalibrated alike on both): the maximum of two p-values is valid when either is."""
    if not null_ps or (len(null_ps) >= MIN_CALIBRATION and not null_miscalibrated(null_ps)):
        return p
    rank = sum(1 for q in null_ps if q <= p)
    return max(p, (1 + rank) / (len(null_ps) + 1))


def e_bh(e_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """e-BH across pairs (Wang & Ramdas, "False discovery rate control with e-values",
    JRSS-B 2022): with e_(1) ≥ … ≥ e_(m), reject the k* largest, k* = max{k : e_(k) ≥ m/(α k)}.
    Controls the FDR at α under any dependence between pairs. Feed each pair's ``evalue``
    (the detector is not an e-value). Returned in input order."""
    e = np.asarray(e_values, dtype=float)
    m = e.size
    if m == 0:
        return []
    order = np.argsort(-e, kind="stable")
    k = np.arange(1, m + 1)
    ok = e[order] >= m / (alpha * k)
    out = np.zeros(m, dtype=bool)
    if ok.any():
        kstar = int(k[ok].max())
        out[order[:kstar]] = True
    return out.tolist()
