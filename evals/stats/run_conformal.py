"""A tripwire run's evidence with the *run* as the exchangeable unit: a conformal rank among
the reference runs, and a tolerance bet on how far beyond them it moved.

Why the run: a serving stack's numerics move with the hour (batch sizes, kernels picked per
shape, a new node), the same for every query of one run. A test that exchanges single
requests (``evals.stats.tripwire.window_test``, ``evals.stats.border.window_test``) calls each
such hour-level move a change: 55–77 false alarms per tier per quarter under bf16-like hourly
numerics, and a real vendor's border answers (B3IT's recording of Together) fired ten days
before its real swap. What is exchangeable under "nothing changed" is the runs.

**Rank bet** (conformal prediction, Vovk, Gammerman & Shafer, *Algorithmic Learning in a
Random World*, 2005, ch. 2 and 7): each of the ``n`` = R + 1 runs (R frozen reference runs and
the current one) gets a score, its distance to the pool of the other ``n − 1``; the current
run's conformal p is #{runs scoring ≥ it} / n, uniform on {1/n, …, 1} when the runs are
exchangeable, whatever their distribution. It becomes an e-value by betting on the top
ranks: e = Σ_m w_m · n/m · 1[rank ≤ m] (``RANK_BETS``), whose mean under the null is Σ w_m = 1.

**Tolerance bet**: the rank cannot say *how much* further the run moved; at n = 25 it is worth
at most ``rank_e(1/n)`` a run. The tolerance τ = ``INFLATE`` × the largest score of a
reference run; when the current run's score exceeds τ, the request-level permutation p of the
current window against the pooled reference (the old test, which also guards against a
run that is only noisier) is the bet's p, else p = 1. The bet's validity rests on a stated
assumption, measured rather than proved: an unchanged tier's run seldom moves more than
``INFLATE`` times the farthest of its R reference runs (``benchmarks/tripwire_numerics.py``:
Gaussian and t3 hour-level numerics).

The run's e-value is the average of the two (an average of e-values is an e-value); it goes
into the tier's e-CUSUM detector (``evals.stats.eprocess``) at the threshold for the
tripwire's own cadence. A run with no queries answered brings no evidence (``e`` None).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from evals.stats import eprocess

RANK_BETS = ((1, 0.5), (2, 0.3), (4, 0.2))  # (top m ranks, weight): the weights sum to 1
INFLATE = 1.5  # τ = this × the reference runs' largest score (benchmarks/tripwire_numerics.py)
MIN_REFERENCE_RUNS = 7  # a week of daily runs: fewer leave the rank bet worth < 8 a run
MAX_REFERENCE_RUNS = 24  # a day of hourly runs: the hour-level numerics a day holds
DAY_S = 86400


def reference_runs(every_s: float) -> int:
    """Runs frozen as a tier's reference at one tripwire run every ``every_s`` seconds: a day
    of runs, at least ``MIN_REFERENCE_RUNS`` (daily runs: a week) and at most
    ``MAX_REFERENCE_RUNS`` (hourly: 24; faster cadences keep 24, a shorter stretch of time)."""
    return max(MIN_REFERENCE_RUNS, min(MAX_REFERENCE_RUNS, math.ceil(DAY_S / max(every_s, 1))))


def rank_p(scores: Sequence[float], current: int = -1) -> float:
    """Conformal p of ``scores[current]`` among all ``scores``: #{s ≥ it} / n."""
    if not scores:
        raise ValueError("rank_p needs at least one score")
    s = scores[current]
    return sum(1 for x in scores if x >= s - 1e-12) / len(scores)


def rank_e(p: float, n: int) -> float:
    """The rank bet's e-value for a conformal p among ``n`` runs (module docstring)."""
    rank = round(p * n)
    return sum(w * n / m for m, w in RANK_BETS if rank <= m)


def tolerance(reference_scores: Sequence[float]) -> float:
    """τ: ``INFLATE`` × the largest reference run's score (each against the others)."""
    return INFLATE * max(reference_scores)


@dataclass(frozen=True)
class RunTest:
    """One run against its tier's reference runs."""

    statistic: float  # the current run's distance to the pooled reference runs
    rank_p: float  # conformal p among the n runs
    n_runs: int  # reference runs + 1
    tolerance: float  # τ of the tolerance bet
    tolerance_p: float  # the request-level p when the statistic exceeds τ, else 1
    e_value: float  # ½ rank bet + ½ tolerance bet

    @property
    def p_value(self) -> float:
        """One p for the page: Bonferroni of the two bets' p-values."""
        return min(1.0, 2 * min(self.rank_p, self.tolerance_p))


def combine(
    scores: Sequence[float],
    reference_scores: Sequence[float],
    statistic: float,
    window_p: Callable[[], float],
) -> RunTest:
    """The run's test from the n runs' scores (the current run last), the reference runs'
    scores among themselves (for τ), the current run's distance to the pooled reference and
    the request-level p of its window against that pool (asked only past τ: it permutes)."""
    p = rank_p(scores)
    tau = tolerance(reference_scores)
    tol_p = window_p() if statistic > tau else 1.0
    tol_e = sum(eprocess.TRIPWIRE.components(tol_p)) / len(eprocess.TRIPWIRE.grid)
    e = 0.5 * rank_e(p, len(scores)) + 0.5 * tol_e
    return RunTest(statistic, p, len(scores), tau, tol_p, e)


def loo_distances(sums: np.ndarray, counts: np.ndarray, *, tv: bool) -> np.ndarray:
    """For one prompt, each run's distance to the pool of the other runs: ``sums`` (runs ×
    tokens) the sum of each run's rows (logprob vectors, or answer counts), ``counts`` its
    rows. ``tv``: ½ Σ |share − share of the others| (border answers), else the mean over
    tokens of |mean − mean of the others| (logprobs), the distances of
    ``evals.stats.border.tv`` and ``evals.stats.tripwire.distance`` without re-pooling."""
    others = (sums.sum(0) - sums) / (counts.sum() - counts)[:, None]
    gap = np.abs(sums / counts[:, None] - others)
    out: np.ndarray = 0.5 * gap.sum(1) if tv else gap.mean(1)
    return out


def scores(per_prompt: Sequence[tuple[np.ndarray, np.ndarray]], *, tv: bool) -> np.ndarray:
    """Each run's score: the mean over prompts of :func:`loo_distances`."""
    out: np.ndarray = np.mean([loo_distances(s, n, tv=tv) for s, n in per_prompt], axis=0)
    return out


def test_runs(
    per_prompt: Sequence[tuple[np.ndarray, np.ndarray]],
    window_p: Callable[[], float],
    *,
    tv: bool,
) -> RunTest:
    """The run's test from per-prompt (sums, counts) of the reference runs then the current
    run (last): its score among all, τ from the reference runs among themselves."""
    everyone = scores(per_prompt, tv=tv)
    reference = scores([(s[:-1], n[:-1]) for s, n in per_prompt], tv=tv)
    return combine(list(everyone), list(reference), float(everyone[-1]), window_p)
