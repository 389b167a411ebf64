"""Did a tier change? Online one-sided CUSUM of each series against a frozen, stored baseline.

For monitoring over months (it replaced a CUSUM track recomputed from history at every run,
whose baseline slid and whose hysteresis meant nothing): the baseline is computed once from
the runs a person chose (:meth:`Baseline.from_runs`), stored, and never slides; the CUSUM
state is stored and updated run by run (:func:`update`), never recomputed from history, so
its memory and hysteresis mean what they say.

**Inputs, transformed so the in-control series is roughly symmetric** (``TRANSFORMS``):
latencies as log(ms) (TTFT is lognormal-ish: on the raw scale one slow run is a 4-sd event),
an MMD p-value as the normal score Φ⁻¹(1 − p) (exactly N(0, 1) under H0), similarities as is.

**Robust standardisation**: z = direction · (y − median − hour offset) / scale, with the
median and scale = 1.4826 · MAD of the baseline's transformed values (Rousseeuw & Croux 1993:
one odd baseline run does not move them), times the AR(1) factor √((1 + φ)/(1 − φ)), φ the
baseline's lag-1 autocorrelation clipped to [0, 0.9]: a CUSUM adds z up, and the sum of an
AR(1) series has that many times the spread of independent values (the long-run variance,
e.g. Box, Jenkins & Reinsel, "Time Series Analysis", §2.1.5). Time of day: when the
baseline spans ``MIN_DAY_RUNS`` runs over at least 12 hours of the day, a one-harmonic daily
cycle is fitted and subtracted (a slow evening is the normal evening, not drift).

**One-sided CUSUM** (Page 1954): S_t = min(cap, max(0, S_{t−1} + z_t − k)), alarm when S_t > h.
k = 0.5 is tuned to a 1-scale shift. h is set for a target in-control average run length
(ARL0) by Siegmund's approximation for N(0, 1) increments (Siegmund, "Sequential Analysis",
1985, p. 27; Montgomery, "Introduction to Statistical Quality Control", §9.1.7):
    ARL0 ≈ (exp(2 k b) − 2 k b − 1) / (2 k²),   b = h + 1.166.
With a baseline of n runs, h is raised so that the ARL0 holds *on average over baselines*
(:func:`h_for_arl` with ``n_baseline`` and the baseline's largest φ): estimated centre and
scale shorten the run length, the more so on autocorrelated series.
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

import numpy as np
from scipy.optimize import brentq
from scipy.stats import median_abs_deviation, norm

K = 0.5
SIEGMUND = 1.166
MIN_DAY_RUNS = 48  # two days of hourly runs before a daily cycle is fitted
MIN_BASELINE_RUNS = 48  # two days of hourly runs
TRIM = 2.5
MAX_PHI = 0.9
CAP_H = 2.0  # sums capped at 2h: a long drift clears within (2h − 0)/k runs once it ends


def _log(x: float) -> float:
    if not x > 0:
        raise ValueError(f"log transform needs a positive value, got {x}")
    return math.log(x)


def _normal_score(p: float) -> float:
    if not 0 <= p <= 1:
        raise ValueError(f"p-value must be in [0, 1], got {p}")
    return float(norm.isf(min(max(p, 1e-12), 1.0 - 1e-12)))


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


def h_for_arl(arl: float, k: float = K, n_baseline: int | None = None, phi: float = 0.0
              ) -> float:  # fmt: skip
    """The h whose in-control ARL0 is ``arl``. With ``n_baseline``, the ARL is the one
    expected over baselines of that many runs: the false-alarm rate 1/ARL averaged over the
    sampling error of the baseline's median and scale (a baseline that happens to sit low
    makes every later run look high; Jones, Champ & Rigdon, Technometrics 2004, showed how
    far that shortens the run length); ``phi`` is the baseline's lag-1 autocorrelation (the
    largest of its series'). Without ``n_baseline``, the known-parameter value."""
    if arl <= 1:
        raise ValueError("target ARL must exceed 1")
    if n_baseline is None:
        shift, sd = np.zeros(1), np.ones(1)
    else:
        shift, sd = _error_draws(n_baseline, phi)

    def gap(h: float) -> float:
        return math.log(float(np.mean(1.0 / np.maximum(siegmund_arl(h, k, shift, sd), 1.0))))

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
    scale: float  # robust sd × AR(1) factor
    phi: float
    n: int
    hour_offsets: tuple[float, ...] | None = None  # 24 values, or None


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

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Baseline:
        d = json.loads(text)
        series = tuple(
            SeriesBaseline(**{**s, "hour_offsets": tuple(s["hour_offsets"])
                              if s["hour_offsets"] is not None else None})
            for s in d.pop("series")
        )  # fmt: skip
        return cls(series=series, **{**d, "run_ids": tuple(d["run_ids"])})

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
    ) -> Baseline:
        """Freeze a baseline from its runs (oldest first; each run maps series name → value,
        None when missing). ``hours`` (0–23, one per run) enables the time-of-day offsets.
        ``min_scale`` floors the scale in transformed units (a constant baseline would make
        any change infinitely surprising)."""
        series = []
        for spec in specs:
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
                series.append(SeriesBaseline(spec.name, spec.transform, spec.direction, 0.0,
                                             1.0, 0.0, len(y), None))  # fmt: skip
                continue
            offsets = _hour_offsets(y, [h for _, h in pts]) if hours is not None else None
            resid = y - (
                np.array([offsets[h] for _, h in pts if h is not None]) if offsets else 0.0
            )
            center = float(np.median(resid))
            mad = float(median_abs_deviation(resid, scale="normal"))
            # φ from values clipped at 3 robust sd: one wild run must not hide the correlation
            phi = _lag1(np.clip(resid, center - 3 * mad, center + 3 * mad))
            scale = max(mad, min_scale) * math.sqrt((1 + phi) / (1 - phi))
            series.append(SeriesBaseline(spec.name, spec.transform, spec.direction, center,
                                         scale, phi, len(y), offsets))  # fmt: skip
        n_min = min(s.n for s in series)
        h = h_for_arl(arl_pair * len(series), k, n_min, max(s.phi for s in series))
        return cls(tuple(series), h, k, arl_pair, tuple(run_ids), set_by, set_at)


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


def _lag1(x: np.ndarray) -> float:
    d = x - x.mean()
    denom = float(d @ d)
    phi = float(d[1:] @ d[:-1]) / denom if denom > 0 else 0.0
    return min(max(phi, 0.0), MAX_PHI)


@dataclass(frozen=True)
class CusumState:
    """Per-series sums, in the baseline's series order (store as JSON with the pair)."""

    sums: tuple[float, ...]
    runs: int = 0
    alarmed: bool = False
    alarm_series: str | None = None
    alarm_run: int | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CusumState:
        d = json.loads(text)
        return cls(**{**d, "sums": tuple(d["sums"])})


def start(baseline: Baseline) -> CusumState:
    return CusumState(sums=(0.0,) * len(baseline.series))


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
    sums = list(state.sums)
    zs: dict[str, float | None] = {}
    first: str | None = None
    for i, s in enumerate(baseline.series):
        value = run_values.get(s.name)
        if value is None:
            zs[s.name] = None
            continue
        y = TRANSFORMS[s.transform](value)
        if s.hour_offsets is not None:
            if hour is None:
                raise ValueError(f"series {s.name}: the baseline needs the run's hour of day")
            y -= s.hour_offsets[hour]
        z = s.direction * (y - s.center) / s.scale
        zs[s.name] = z
        sums[i] = min(cap, max(0.0, sums[i] + z - baseline.k))
        if sums[i] > baseline.h and first is None:
            first = s.name
    fired = first is not None and not state.alarmed
    new = replace(
        state, sums=tuple(sums), runs=state.runs + 1, alarmed=state.alarmed or fired,
        alarm_series=first if fired else state.alarm_series,
        alarm_run=state.runs + 1 if fired else state.alarm_run,
    )  # fmt: skip
    named = {s.name: v for s, v in zip(baseline.series, sums, strict=True)}
    return new, DriftAlarm(new.alarmed, fired, zs, named, baseline.h)
