"""How big is the MMD² of a run, and how big must a difference be for the run to catch it?

**Interval** — the statistic is the mean over prompts of per-prompt unbiased MMD²
(:mod:`evals.stats.mmd`), so prompts are the resampling unit: a percentile bootstrap over
prompts (``scipy.stats.bootstrap``, Efron & Tibshirani 1993, §13) says how much the value would
move with another draw of prompts of the same kind. It can dip below 0 (the estimator is
unbiased, not positive).

**Detectable at 80% power** — the critical value c_α (the (1 − α) quantile of the permutation
null) is the effect the run catches only half the time. With the statistic approximately
normal around the true MMD² δ with standard error s, power(δ) = Φ((δ − c_α)/s), so 80% power
needs δ₈₀ = c_α + z₀.₈ · s (z₀.₈ = 0.8416; the usual normal-approximation power formula, e.g.
Chow, Shao & Wang, "Sample Size Calculations in Clinical Research", §3.1). s is the larger of
the null's standard deviation and the prompt-bootstrap standard error: under an alternative the
statistic varies at least as much as under the null.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evals.stats.mmd import MMDResult


@dataclass(frozen=True)
class EffectSize:
    statistic: float
    low: float | None  # percentile bootstrap over prompts
    high: float | None
    confidence: float
    detectable_80: float | None  # MMD² caught with 80% power at this run's size and α
    critical_value: float | None  # caught with ~50% power


def effect_size(
    result: MMDResult,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> EffectSize | None:
    """Interval and 80%-power effect of a run's MMD² (None when there is no statistic)."""
    from scipy.stats import bootstrap, norm

    if result.statistic is None:
        return None
    per = np.asarray(result.per_prompt, dtype=float)
    low = high = None
    se_boot = 0.0
    if per.size >= 2 and np.ptp(per) == 0:  # every prompt alike: every resample is the same
        low = high = float(per[0])
    elif per.size >= 2:
        res = bootstrap((per,), np.mean, confidence_level=confidence, n_resamples=n_resamples,
                        method="percentile", rng=np.random.default_rng(seed))  # fmt: skip
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
        se_boot = float(res.standard_error)
    crit = result.critical_value(alpha)
    detectable = None
    if crit is not None:
        se = max(float(np.std(result.null_stats, ddof=1)) if result.null_stats.size > 1 else 0.0,
                 se_boot)  # fmt: skip
        detectable = crit + float(norm.ppf(power)) * se
    return EffectSize(result.statistic, low, high, confidence, detectable, crit)
