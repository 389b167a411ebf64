"""Did a tier change? Online one-sided CUSUM of each series against a frozen, stored baseline.

For monitoring over months (it replaced a CUSUM track recomputed from history at every run,
whose baseline slid and whose hysteresis meant nothing): the baseline is computed once from
the runs a person chose (:meth:`Baseline.from_runs`), stored, and never slides; the CUSUM
state is stored and updated run by run (:func:`update`), never recomputed from history, so
its memory and hysteresis mean what they say.

**Inputs, transformed so the in-control series is roughly symmetric** (``TRANSFORMS``):
latencies as log(ms) (TTFT is lognormal-ish: on the raw scale one slow run is a 4-sd event),
an MMD p-value as the normal score Φ⁻¹(1 − p) (exactly N(0, 1) under H0), similarities as is.

**Robust standardisation under real noise**: u = clip((y − median − hour offset) / s₀, ±``Z_CLIP``)
with s₀ = 1.4826 · MAD of the baseline's transformed values (Rousseeuw & Croux 1993: one odd
baseline run does not move them), clipped so one heavy-tailed run (log-t₃ latencies) adds at
most ``Z_CLIP`` to a sum (Huber's ψ, Huber 1964). A CUSUM adds values up, so what sets its
false-alarm rate is the *long-run* variance of u, σ²_LR = Σ_k γ(k), not its variance: it is
estimated directly by overlapping batch means, σ²_LR ≈ b · mean of (batch mean)² over all
n − b + 1 windows of b runs (Meketon & Schmeiser 1984; Flegal & Jones, Ann. Stat. 2010:
about 1.5 times the degrees of freedom of non-overlapping batches), floored at var(u), and
z = u / σ_LR. It replaced
an AR(1) factor √((1 + φ)/(1 − φ)) on the MAD, which under-stated σ²_LR for a shared AR(1)
load plus per-run noise (φ of 48 runs is biased low) and raised 0.28–1.01 false alarms a month
against a 0.17 budget (docs/benchmarks.md). **The tier series is a ratio**, log TTFT_fast −
log TTFT_base (``evals.stats.error_budget.SERIES``): load, weekly patterns and incidents that
hit both tiers cancel there; each tier's own series is kept as *context* (its own sums, never
an alarm) so that both tiers slowing together is named "both tiers slowed: vendor incident".
**No baseline from runs that cannot make one** (:func:`refusal`): a level shift between the
two halves of the runs, or a lag-1 autocorrelation at its clip ``MAX_PHI``; the caller waits
for the next runs. Time of day: when the
baseline spans ``MIN_DAY_RUNS`` runs over at least 12 hours of the day, a one-harmonic daily
cycle is fitted and subtracted (a slow evening is the normal evening, not drift).

**One-sided CUSUM** (Page 1954): S_t = min(cap, max(0, S_{t−1} + z_t − k)), alarm when S_t > h.
k = 0.5 is tuned to a 1-scale shift. h is set for a target in-control average run length
(ARL0) by Siegmund's approximation for N(0, 1) increments (Siegmund, "Sequential Analysis",
1985, p. 27; Montgomery, "Introduction to Statistical Quality Control", §9.1.7):
    ARL0 ≈ (exp(2 k b) − 2 k b − 1) / (2 k²),   b = h + 1.166.
With a baseline of n runs, h is raised so that the ARL0 holds *on average over baselines*
(:func:`h_for_arl` with ``n_baseline`` and the number of batches): estimated centre and
scale shorten the run length.
An MMD p-value series needs no estimate: its null is N(0, 1) exactly (centre 0, scale 1).
**One decision per pair**: a pair's m series share its false-alarm budget by a Bonferroni split
of the rate, each series gets ARL0 = m · ARL_pair, and the pair alarms when any series does.
ARL_pair = audits per quarter / budget (the same budget as :mod:`evals.stats.eprocess`).
Measured with estimated baselines, AR(1) noise and a daily cycle in
``benchmarks/monitoring_month.py`` (docs/benchmarks.md), which is where the figures are.

After an alarm the state stays alarmed until a person acknowledges the change and sets a new
baseline (:func:`reset`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

K = 0.5
SIEGMUND = 1.166
MIN_DAY_RUNS = 48  # two days of hourly runs before a daily cycle is fitted
MIN_BASELINE_RUNS = 48  # two days of hourly runs
TRIM = 2.5
MAX_PHI = 0.9
MAX_MISSING = 4  # values a series may miss among the baseline's runs (an outage hour)
Z_CLIP = 6.0  # one run moves a sum by at most this many robust sd
BATCH = 4  # runs per batch of the long-run variance's batch means
SHIFT_SD = 4.0  # halves of the baseline further apart than this (in sd of the gap): refused
CAP_H = 2.0  # sums capped at 2h: a long drift clears within (2h − 0)/k runs once it ends


def _log(x: float) -> float:
    if not x > 0:
        raise ValueError(f"log transform needs a positive value, got {x}")
    return math.log(x)


def _normal_score(p: float) -> float:
    if not 0 <= p <= 1:
        raise ValueError(f"p-value must be in [0, 1], got {p}")
    from scipy.stats import norm

    return float(norm.isf(min(max(p, 1e-12), 1.0 - 1e-12)))


def _mad(resid: np.ndarray) -> float:
    """The robust sd: the median absolute deviation scaled to a normal's sd."""
    from scipy.stats import median_abs_deviation

    return float(median_abs_deviation(resid, scale="normal"))


TRANSFORMS = {"log": _log, "p_normal": _normal_score, "identity": float}


def siegmund_arl(
    h: float, k: float = K, shift: float | np.ndarray = 0.0, sd: float | np.ndarray = 1.0
) -> np.ndarray:
    """ARL of a one-sided CUSUM (reference k, threshold h) of N(shift, sd²) values, by
    Siegmund's approximation with Δ = (shift − k)/sd and b = h/sd + 1.166 (module docstring;
    in control, shift = 0 and sd = 1). Vectorised over ``shift`` and ``sd``."""
    d = (np.asarray(shift, dtype=float) - k) / sd
    b = h / np.asarray(sd, dtype=float) + SIEGMUND
    d = np.where(np.abs(d) < 1e-9, 1e-9, d)
    with np.errstate(over="ignore"):  # inf ARL: no false alarm at all
        return np.asarray((np.exp(-2 * d * b) + 2 * d * b - 1) / (2 * d * d))


def _batch_draws(n: int, dof: float, draws: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """Draws of (z's mean, z's sd) in control when the centre is the median of n runs and
    σ_LR comes from ``batches`` batch means: var(median) ≈ (π/2)·σ²_LR/n, so (π/2)/n in z
    units; σ̂²_LR/σ²_LR ~ χ²(d)/d with d = :func:`batch_dof`. Both trimmed to their
    central 98.8 % (the ±2.5 sd of a normal): the rare worst baseline would otherwise set h
    for everyone. Fixed seed: h is a function of (n, d)."""
    from scipy.stats import chi2

    rng = np.random.default_rng(12345)
    m = max(dof, 1.0)
    u = np.clip(rng.standard_normal(draws), -TRIM, TRIM)
    lo, hi = chi2.ppf([0.006, 0.994], m)
    ratio = np.sqrt(np.clip(rng.chisquare(m, draws), lo, hi) / m)
    centre = u * math.sqrt(math.pi / 2 / n)
    return -centre / ratio, 1 / ratio


def _error_draws(n: int, phi: float = 0.0, draws: int = 4000) -> tuple[np.ndarray, np.ndarray]:
    """Draws of (z's mean, z's sd) in control when the median and the MAD scale come from n
    baseline runs with lag-1 autocorrelation φ: var(median) ≈ (π/2)·σ²/n, times (1+φ)/(1−φ)
    for AR(1) data, the same factor the scale is inflated by, so in z units it is (π/2)/n;
    var(MAD/σ) ≈ 1.36/n for independent runs (its efficiency is 37%: Rousseeuw & Croux 1993),
    times (1+φ²)/(1−φ²) for AR(1) data (Bartlett's variance of a sample variance, e.g. Priestley,
    "Spectral Analysis and Time Series", 1981, §5.3). Without that factor h was too low for
    autocorrelated series: at φ = 0.5 a latency series raised about twice its share of false
    alarms (``benchmarks/monitoring_month.py``). Both normal and clipped at ±2.5 sd: the rare
    worse baseline would otherwise set h for everyone (its spread is on the page). Fixed seed:
    h is a function of (n, φ)."""
    rng = np.random.default_rng(12345)
    u, v = np.clip(rng.standard_normal((2, draws)), -TRIM, TRIM)
    centre = u * math.sqrt(math.pi / 2 / n)
    ratio = np.maximum(0.3, 1 + v * math.sqrt(1.36 * (1 + phi * phi) / (1 - phi * phi) / n))
    return -centre / ratio, 1 / ratio


def h_for_arl(arl: float, k: float = K, n_baseline: int | None = None, phi: float = 0.0,
              batches: bool | None = None) -> float:  # fmt: skip
    """The h whose in-control ARL0 is ``arl``. With ``n_baseline``, the ARL is the one
    expected over baselines of that many runs: the false-alarm rate 1/ARL averaged over the
    sampling error of the baseline's median and scale (a baseline that happens to sit low
    makes every later run look high; Jones, Champ & Rigdon, Technometrics 2004, showed how
    far that shortens the run length); ``phi`` is the baseline's lag-1 autocorrelation (the
    largest of its series'; the AR(1)-factor baselines stored before the batch means).
    ``batches`` True: the scale is σ_LR from overlapping batch means (:func:`_batch_draws`).
    Without ``n_baseline``, the known-parameter value."""
    if arl <= 1:
        raise ValueError("target ARL must exceed 1")
    if n_baseline is None:
        shift, sd = np.zeros(1), np.ones(1)
    elif batches is not None:
        shift, sd = _batch_draws(n_baseline, batch_dof(n_baseline))
    else:
        shift, sd = _error_draws(n_baseline, phi)

    def gap(h: float) -> float:
        return math.log(float(np.mean(1.0 / np.maximum(siegmund_arl(h, k, shift, sd), 1.0))))

    from scipy.optimize import brentq

    return float(brentq(lambda h: gap(h) + math.log(arl), 0.0, 200.0))


@dataclass(frozen=True)
class SeriesSpec:
    """One monitored statistic of a pair: its name in ``run_values``, transform, and
    which way is bad (+1: an increase of the transformed value, −1: a decrease)."""

    name: str
    transform: str = "identity"
    direction: int = 1


@dataclass(frozen=True)
class SeriesBaseline:
    name: str
    transform: str
    direction: int
    center: float
    scale: float  # robust sd s₀ (stored before the batch means: × the AR(1) factor)
    phi: float
    n: int
    hour_offsets: tuple[float, ...] | None = None  # 24 values, or None
    lrv: float = 1.0  # long-run variance of the clipped u (1: a baseline stored before it)
    clip: float | None = None  # Z_CLIP (None: a baseline stored before the clipping)

    def z(self, y: float) -> float:
        """The standardised value of a transformed (and hour-corrected) ``y``."""
        u = self.direction * (y - self.center) / self.scale
        if self.clip is not None:
            u = min(max(u, -self.clip), self.clip)
        return u / math.sqrt(self.lrv)


@dataclass(frozen=True)
class Baseline:
    """The frozen statistics of a pair's baseline runs (store as a row: ``to_json``)."""

    series: tuple[SeriesBaseline, ...]
    h: float
    k: float
    arl_pair: float
    run_ids: tuple[int, ...] = ()
    set_by: str = ""
    set_at: str = ""
    context: tuple[SeriesBaseline, ...] = ()  # each tier's own series: naming, never alarms

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Baseline:
        d = json.loads(text)

        def one(s: dict[str, Any]) -> SeriesBaseline:
            hours = s["hour_offsets"]
            return SeriesBaseline(**{**s, "hour_offsets": tuple(hours) if hours else None})

        series = tuple(one(s) for s in d.pop("series"))
        context = tuple(one(s) for s in d.pop("context", []))
        return cls(series=series, context=context, **{**d, "run_ids": tuple(d["run_ids"])})

    @classmethod
    def from_runs(
        cls,
        specs: Sequence[SeriesSpec],
        runs: Sequence[Mapping[str, float | None]],
        *,
        arl_pair: float,
        hours: Sequence[int] | None = None,
        k: float = K,
        min_runs: int = MIN_BASELINE_RUNS,
        min_scale: float = 1e-6,
        run_ids: Sequence[int] = (),
        set_by: str = "",
        set_at: str = "",
        context: Sequence[SeriesSpec] = (),
    ) -> Baseline:
        """Freeze a baseline from its runs (oldest first; each run maps series name → value,
        None when missing). ``hours`` (0–23, one per run) enables the time-of-day offsets.
        ``min_scale`` floors the scale in transformed units (a constant baseline would make
        any change infinitely surprising)."""

        def fit(spec: SeriesSpec) -> SeriesBaseline:
            if spec.transform not in TRANSFORMS or spec.direction not in (1, -1):
                raise ValueError(f"series {spec.name}: bad transform or direction")
            f = TRANSFORMS[spec.transform]
            pts = [(f(v), None if hours is None else hours[i])
                   for i, r in enumerate(runs) if (v := r.get(spec.name)) is not None]  # fmt: skip
            if len(pts) < min_runs:
                raise ValueError(
                    f"series {spec.name}: {len(pts)} baseline runs with a value, need {min_runs}"
                )
            y = np.array([v for v, _ in pts])
            if spec.transform == "p_normal":  # the null is known exactly: N(0, 1), independent
                return SeriesBaseline(spec.name, spec.transform, spec.direction, 0.0, 1.0, 0.0,
                                      len(y), None)  # fmt: skip
            offsets = _hour_offsets(y, [h for _, h in pts]) if hours is not None else None
            resid = y - (
                np.array([offsets[h] for _, h in pts if h is not None]) if offsets else 0.0
            )
            center = float(np.median(resid))
            s0 = max(_mad(resid), min_scale)
            u = np.clip((resid - center) / s0, -Z_CLIP, Z_CLIP)
            return SeriesBaseline(spec.name, spec.transform, spec.direction, center, s0,
                                  _lag1(u), len(y), offsets, long_run_variance(u),
                                  Z_CLIP)  # fmt: skip

        series = [fit(spec) for spec in specs]
        n_min = min(s.n for s in series)
        h = h_for_arl(arl_pair * len(series), k, n_min, batches=True)
        return cls(tuple(series), h, k, arl_pair, tuple(run_ids), set_by, set_at,
                   tuple(fit(spec) for spec in context))  # fmt: skip


def long_run_variance(u: np.ndarray, batch: int = BATCH) -> float:
    """σ²_LR of ``u`` by overlapping batch means (module docstring), floored at var(u): a
    negative autocorrelation estimated from a few batches is not trusted to shrink h."""
    n = len(u)
    var = float(np.var(u, ddof=1)) if n > 1 else 1.0
    if n < 2 * batch:
        return max(var, 1e-12)
    means = np.convolve(u, np.ones(batch) / batch, mode="valid")  # the n − b + 1 windows
    obm = n * batch * float(np.sum((means - u.mean()) ** 2)) / ((n - batch) * (n - batch + 1))
    return max(obm, var, 1e-12)


def batch_dof(n: int, batch: int = BATCH) -> float:
    """Degrees of freedom of the overlapping batch means' σ²_LR: 1.5 (n/b − 1) (Meketon &
    Schmeiser 1984)."""
    return 1.5 * (n / batch - 1)


def refusal(specs: Sequence[SeriesSpec], runs: Sequence[Mapping[str, float | None]]) -> str | None:
    """Why these runs cannot make a baseline, or None: a level shift (the medians of the two
    halves further apart than ``SHIFT_SD`` sd of their difference, σ_LR · √(π/2 · 4/n)), or a
    lag-1 autocorrelation at its clip ``MAX_PHI`` (the series is not stationary enough for
    any scale estimated from 48 runs to hold). Either way the next runs are tried."""
    for spec in specs:
        if spec.transform == "p_normal":
            continue
        f = TRANSFORMS[spec.transform]
        y = np.array([f(v) for r in runs if (v := r.get(spec.name)) is not None])
        if len(y) < 2 * BATCH:
            continue
        half = len(y) // 2
        a, b = float(np.median(y[:half])), float(np.median(y[half:]))
        resid = y - np.where(np.arange(len(y)) < half, a, b)  # the shift itself is no noise
        s0 = max(_mad(resid), 1e-6)
        u = np.clip(resid / s0, -Z_CLIP, Z_CLIP)
        gap = abs(b - a) / s0
        sd = math.sqrt(long_run_variance(u) * math.pi / 2 * 4 / len(y))
        if gap > SHIFT_SD * sd:
            return (f"a level shift inside the baseline's runs ({spec.name}: the two halves "
                    f"differ by {gap / sd:.1f} sd)")  # fmt: skip
        if _lag1(u, clip=False) >= MAX_PHI:
            return (f"{spec.name}: lag-1 autocorrelation at its clip {MAX_PHI} (not stationary "
                    "enough for a baseline)")  # fmt: skip
    return None


def _hour_offsets(y: np.ndarray, hours: Sequence[int | None]) -> tuple[float, ...] | None:
    """The daily cycle as one harmonic, y ≈ c + a·sin(2πh/24) + b·cos(2πh/24), fitted by
    least squares: two parameters, where 24 hourly medians from a few runs each would add
    more noise than they remove. None below ``MIN_DAY_RUNS`` runs or 12 distinct hours."""
    hrs = np.array(hours, dtype=float)
    if len(y) < MIN_DAY_RUNS or len(set(hours)) < 12:
        return None
    w = 2 * np.pi * hrs / 24
    X = np.column_stack([np.ones_like(w), np.sin(w), np.cos(w)])
    _, a, b = np.linalg.lstsq(X, y, rcond=None)[0]
    return tuple(float(a * math.sin(2 * math.pi * h / 24) + b * math.cos(2 * math.pi * h / 24))
                 for h in range(24))  # fmt: skip


def _lag1(x: np.ndarray, clip: bool = True) -> float:
    d = x - x.mean()
    denom = float(d @ d)
    phi = float(d[1:] @ d[:-1]) / denom if denom > 0 else 0.0
    return min(max(phi, 0.0), MAX_PHI) if clip else phi


@dataclass(frozen=True)
class CusumState:
    """Per-series sums, in the baseline's series order (store as JSON with the pair)."""

    sums: tuple[float, ...]
    runs: int = 0
    alarmed: bool = False
    alarm_series: str | None = None
    alarm_run: int | None = None
    context: tuple[float, ...] = ()  # sums of the baseline's context series (each tier's own)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CusumState:
        d = json.loads(text)
        return cls(**{**d, "sums": tuple(d["sums"]), "context": tuple(d.get("context", ()))})


def start(baseline: Baseline) -> CusumState:
    return CusumState(sums=(0.0,) * len(baseline.series), context=(0.0,) * len(baseline.context))


def reset(baseline: Baseline) -> CusumState:
    """After a person acknowledged a change and set ``baseline`` (the new one)."""
    return start(baseline)


@dataclass(frozen=True)
class DriftAlarm:
    alarm: bool  # the pair is in alarm (raised now or earlier, not yet acknowledged)
    new_alarm: bool
    z: dict[str, float | None]  # this run's standardised values
    sums: dict[str, float]
    h: float
    context: dict[str, float] | None = None  # each tier's own sums (never an alarm)
    incident: bool = False  # every context series above h: both tiers slowed together


def update(
    state: CusumState,
    baseline: Baseline,
    run_values: Mapping[str, float | None],
    *,
    hour: int | None = None,
) -> tuple[CusumState, DriftAlarm]:
    """Fold one run into the state. A series missing from ``run_values`` (or None) keeps its
    sum. ``hour`` (0–23) is needed only when the baseline has time-of-day offsets."""
    if len(state.sums) != len(baseline.series):
        raise ValueError("state and baseline have different series")
    cap = CAP_H * baseline.h

    def fold(series: Sequence[SeriesBaseline], old: Sequence[float]) -> list[float]:
        out = list(old) if len(old) == len(series) else [0.0] * len(series)
        for i, s in enumerate(series):
            value = run_values.get(s.name)
            if value is None:
                zs.setdefault(s.name, None)
                continue
            y = TRANSFORMS[s.transform](value)
            if s.hour_offsets is not None:
                if hour is None:
                    raise ValueError(f"series {s.name}: the baseline needs the run's hour of day")
                y -= s.hour_offsets[hour]
            z = s.z(y)
            zs[s.name] = z
            out[i] = min(cap, max(0.0, out[i] + z - baseline.k))
        return out

    zs: dict[str, float | None] = {}
    sums = fold(baseline.series, state.sums)
    context = fold(baseline.context, state.context)
    first = next((s.name for s, v in zip(baseline.series, sums, strict=True)
                  if v > baseline.h), None)  # fmt: skip
    fired = first is not None and not state.alarmed
    new = replace(
        state, sums=tuple(sums), runs=state.runs + 1, alarmed=state.alarmed or fired,
        alarm_series=first if fired else state.alarm_series,
        alarm_run=state.runs + 1 if fired else state.alarm_run, context=tuple(context),
    )  # fmt: skip
    named = {s.name: v for s, v in zip(baseline.series, sums, strict=True)}
    own = {s.name: v for s, v in zip(baseline.context, context, strict=True)}
    incident = len(own) >= 2 and all(v > baseline.h for v in own.values())
    return new, DriftAlarm(new.alarmed, fired, zs, named, baseline.h, own or None, incident)
