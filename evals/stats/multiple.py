"""Adjusted p-values for testing many metrics at once, returned in input order.

Holm controls the family-wise error rate (any false alarm); Benjamini–Hochberg controls the
false discovery rate (the share of false alarms among alarms) and flags more when many metrics
really moved. An adjusted p-value is compared with α directly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm 1979 step-down: with p_(1) ≤ … ≤ p_(m),
    p̃_(j) = max_{i ≤ j} min(1, (m − i + 1) · p_(i)). (scipy has no Holm; statsmodels'
    ``multipletests(method="holm")`` computes the same.)"""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(stepped)
    return adjusted.tolist()


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini & Hochberg 1995 step-up, p̃_(j) = min_{i ≥ j} min(1, m · p_(i) / i), as
    computed by ``scipy.stats.false_discovery_control(method="bh")``."""
    p = np.asarray(p_values, dtype=float)
    if p.size == 0:
        return []
    from scipy.stats import false_discovery_control

    return [float(x) for x in np.asarray(false_discovery_control(p, method="bh"))]
