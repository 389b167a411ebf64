"""Is the fast tier losing a category? Decided with error control across every run that checks.

The window test of :mod:`evals.stats.capability_paired` runs after every probe; at one probe an
hour that is 720 looks a month at the same, overlapping data, and nothing bounds how often one
of them reports a loss that is not there. Its p-values cannot simply be calibrated into
e-values and multiplied (as :mod:`evals.stats.eprocess` does for the verdict): windows overlap,
so consecutive p-values are not valid given the past. And one run's own p-value is useless at
a budget: with one or two cases per category per run the permutation p is 1 almost always.

**One run's e-value, per category: a bet on its own cases.** For each case both tiers answered
in the run, s = k_b/n_b − k_f/n_f ∈ [−1, 1] (positive: the fast tier did worse). Under the
null of :mod:`evals.stats.capability_paired` (within a case, both tiers pass with the same
probability), given the case's total passes the fast tier's count is hypergeometric, so
E[s | margins] = 0, independently across cases and of every earlier run. Hence, for a fixed
λ ∈ [0, 1), e_λ = Π_cases (1 + λ s) is ≥ 0 with E[e_λ | past] = 1: an e-value per run
(testing by betting, Shafer 2021 JRSS-A; Waudby-Smith & Ramdas 2024 JRSS-B). One-sided on
purpose: routing asks "does fast lose?", and a bet only on losses spends nothing on gains.
A case where both tiers pass (or both fail) every answer has s = 0 and moves nothing.

**Across runs: a mixture e-CUSUM detector per category** (Shin, Ramdas & Rinaldo 2023,
"E-detectors", §3 and §4 on mixtures): for each λ in ``LAMBDAS``,
M_λ,t = max(M_λ,t−1, 1) · e_λ,t, and the category alarms ("loss detected") when the mean over
λ of M_λ,t reaches c. Each M_λ ≤ SR_λ (e-Shiryaev–Roberts, E_∞ SR_λ,t = t), so the mean is
≤ the mean of the SR_λ, whose expectation under no loss is still t: the average run length to a
false alarm is ≥ c, and alarms restarted after each acknowledgement come at most 1/c per run in
the long run (the renewal argument of :mod:`evals.stats.eprocess`). The grid of λ covers drops
from a few points (small λ) to a collapse (large λ) without choosing one in advance.

**The error budget, per category.** A pair's budget B of false loss reports per period is split
evenly over its K categories (Bonferroni, the first step of Holm: a detection over time has no
single moment at which to order the categories' evidence, so the step-down does not apply):
c = runs per period · K / B, i.e. ≤ B/K expected false loss reports per category per period and
≤ B over the pair. The window p-values stay on the page as evidence; they decide nothing.

The state is a frozen dataclass stored per category; :func:`update` once per finished run,
:func:`acknowledge` when a person accepts the loss (evidence starts again from 1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from evals.stats.capability_paired import CaseCounts

LAMBDAS = (0.1, 0.25, 0.5, 0.75)  # betting fractions of the mixture (each < 1: e ≥ 0)
CAP = 1e300  # a detector far past any threshold stays finite (stored as JSON)


def loss_scores(cases: Iterable[CaseCounts]) -> list[float]:
    """s per case answered by both tiers (module docstring); positive = fast did worse."""
    return [c.pass_base / c.n_base - c.pass_fast / c.n_fast for c in cases if c.n_fast and c.n_base]


def run_evalues(scores: Iterable[float]) -> tuple[float, ...]:
    """e_λ of one run for every λ of ``LAMBDAS``."""
    out = [1.0] * len(LAMBDAS)
    for s in scores:
        if not -1.0 <= s <= 1.0:
            raise ValueError(f"score must be in [-1, 1], got {s}")
        out = [e * (1.0 + lam * s) for e, lam in zip(out, LAMBDAS, strict=True)]
    return tuple(out)


def threshold_for(runs_per_period: float, categories: int, budget: float) -> float:
    """c = runs per period · K / B (module docstring)."""
    if runs_per_period <= 0 or categories <= 0 or budget <= 0:
        raise ValueError("runs_per_period, categories and budget must be positive")
    return max(1.0, runs_per_period * categories / budget)


@dataclass(frozen=True)
class LossState:
    """One category's evidence of a loss since its last acknowledgement."""

    detectors: tuple[float, ...] = field(default_factory=lambda: (1.0,) * len(LAMBDAS))
    runs: int = 0  # runs that brought a paired case of the category
    cases: int = 0  # paired cases folded in
    alarmed: bool = False  # stays True until acknowledged
    alarm_run: int | None = None  # the run id that raised it

    @property
    def detector(self) -> float:
        return sum(self.detectors) / len(self.detectors)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LossState:
        return cls(**{**data, "detectors": tuple(data.get("detectors", (1.0,) * len(LAMBDAS)))})


def update(
    state: LossState, cases: Iterable[CaseCounts], *, threshold: float, run_id: int | None = None
) -> LossState:
    """Fold one run's paired cases of the category in. No paired case: nothing changes. Once
    alarmed, the state stays alarmed (and keeps accumulating) until :func:`acknowledge`."""
    scores = loss_scores(cases)
    if not scores:
        return state
    detectors = tuple(
        min(CAP, max(m, 1.0) * e) for m, e in zip(state.detectors, run_evalues(scores), strict=True)
    )
    new = replace(state, detectors=detectors, runs=state.runs + 1, cases=state.cases + len(scores))
    if not state.alarmed and new.detector >= threshold:
        new = replace(new, alarmed=True, alarm_run=run_id)
    return new


def acknowledge(state: LossState) -> LossState:
    return LossState()
