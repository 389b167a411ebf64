"""Is the base tier stable over time? Its batch now against its batch in an earlier run.

The calibration that can fail (see ``evals.plan.AUDIT_TIERS`` for why the in-plan second
base batch went): two base batches from *different time windows* are exchangeable only when
the base tier did not change in between, so the MMD test between them has power against a
change of the base tier itself (a redeployment, a new kernel, a quantized fallback at peak
hours). Its result is reported beside the verdict (``evals.stats.labels.judge``'s
``base_stability``), never as the verdict's label: fast-vs-base compares tiers measured in the
same minutes, whatever base did last week.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evals.stats.mmd import DEFAULT_B, DEFAULT_L, MMDResult, mmd_test


def base_stability(
    base_now: Mapping[Any, Sequence[str]],
    base_earlier: Mapping[Any, Sequence[str]],
    *,
    L: int = DEFAULT_L,
    B: int = DEFAULT_B,
    seed: int = 0,
) -> MMDResult:
    """MMD test of this run's base texts against an earlier run's, on the prompts both have
    (texts per prompt key, as for :func:`evals.stats.mmd.mmd_test`; normalised the same
    way). Use runs far enough apart to be different time windows (e.g. the baseline's)."""
    common = set(base_now) & set(base_earlier)
    return mmd_test({k: base_now[k] for k in common}, {k: base_earlier[k] for k in common},
                    L=L, B=B, seed=seed)  # fmt: skip
