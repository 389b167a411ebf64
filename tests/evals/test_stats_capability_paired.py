"""Paired capability over a window of runs: level and power by simulation (small), Holm, the
minimum detectable drop, and the routing sentences."""

from __future__ import annotations

import numpy as np
import pytest

from evals.stats.capability_paired import (
    CaseCounts,
    PairedResult,
    accumulate,
    cases_needed,
    compare,
    min_detectable_drop,
    permutation_test,
    routing_advice,
)


def history(rng, m: int, drop: float, category: str = "c") -> list[CaseCounts]:
    """m cases with heterogeneous pass rates, each run 1-4 times per tier (unequal)."""
    out = []
    for p in rng.uniform(0.3, 0.95, m):
        nf, nb = rng.integers(1, 5), rng.integers(1, 5)
        out.append(
            CaseCounts(category, nf, rng.binomial(nf, max(0.0, p - drop)), nb, rng.binomial(nb, p))
        )
    return out


def test_it_accumulates_per_case_counts_per_tier():
    counts = accumulate(
        [
            ("a", "x", "fast", True),
            ("a", "x", "base", False),
            ("a", "x", "fast", False),
            ("b", "y", "base", True),
        ]
    )
    assert counts["a"] == CaseCounts("x", 2, 1, 1, 0)
    assert counts["b"] == CaseCounts("y", 0, 0, 1, 1)
    with pytest.raises(ValueError, match="tier"):
        accumulate([("a", "x", "slow", True)])


def test_it_holds_its_level_with_unequal_samples_per_case():
    rng = np.random.default_rng(7)
    p_values = [permutation_test(history(rng, 40, 0.0), 500, seed)[1] for seed in range(200)]
    rate = np.mean(np.array(p_values) < 0.05)
    assert rate <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / 200)  # at most α plus two standard errors


def test_it_detects_the_minimum_detectable_drop_about_80_percent_of_the_time():
    rng = np.random.default_rng(3)
    shape = history(rng, 40, 0.0)
    base = float(np.mean([c.pass_base / c.n_base for c in shape]))
    mde = min_detectable_drop(base, [c.n_fast for c in shape], [c.n_base for c in shape])
    assert mde is not None and 0.05 < mde < 0.5
    hits = [permutation_test(history(rng, 40, mde), 500, s)[1] < 0.05 for s in range(150)]
    assert 0.6 <= np.mean(hits) <= 0.97


def test_it_says_no_drop_is_detectable_when_nothing_can_be_lost():
    assert min_detectable_drop(0.0, [1, 1], [1, 1]) is None
    assert min_detectable_drop(0.5, [1], [1]) is None  # one case: not even a total loss


def test_it_adjusts_categories_with_holm_and_flags_the_one_that_loses():
    rng = np.random.default_rng(11)
    rows = (
        history(rng, 60, 0.35, "tool_calls/simple")
        + history(rng, 60, 0.0, "code")
        + history(rng, 3, 0.0, "rare")
    )
    results = {r.category: r for r in compare({str(i): c for i, c in enumerate(rows)})}
    lose, keep, rare = results["tool_calls/simple"], results["code"], results["rare"]
    assert lose.p_adjusted < 0.05 and lose.diff_points < -20
    assert keep.p_adjusted >= keep.p_value and keep.mde_points is not None
    assert rare.p_value is None and rare.mde_points is None


def result(**kw) -> PairedResult:
    base = dict(
        category="tool_calls/simple",
        n_cases=420,
        n_fast=800,
        n_base=800,
        fast_rate=0.8,
        base_rate=0.8,
        diff_points=-1.2,
        p_value=0.4,
        p_adjusted=0.8,
        mde_points=6.2,
        alpha=0.05,
    )
    return PairedResult(**{**base, **kw})


def test_route_needs_no_detected_loss_a_detectable_tolerance_and_a_small_estimate():
    assert routing_advice(result(), loss_detected=False) == (
        "route `tool_calls/simple` to the fast tier: no loss detected over 420 paired cases "
        "(-1 points, window p = 0.8 after Holm), would detect a 6-point drop at 80% power "
        "(tolerance 10)"
    )


def test_keep_on_base_comes_from_the_controlled_decision_not_the_window_p():
    assert routing_advice(result(diff_points=-14.0), loss_detected=True).startswith(
        "keep `tool_calls/simple` on base: loss detected across runs (-14 points"
    )
    # a small window p alone does not keep a category on base
    lone = routing_advice(
        result(diff_points=-14.0, p_value=0.001, p_adjusted=0.002), loss_detected=False
    )
    assert lone.startswith("undecided on `tool_calls/simple`")
    assert "the window shows a loss, not yet confirmed across runs" in lone


def test_undecided_when_the_estimate_is_near_the_tolerance():
    advice = routing_advice(result(diff_points=-6.0), loss_detected=False)
    assert advice.startswith("undecided on `tool_calls/simple` (-6 points")
    assert "near the 10-point tolerance" in advice


def test_undecided_says_how_many_more_paired_cases_a_tolerance_sized_drop_needs():
    # the demo's case: -12 points, p = 0.108, would detect a 32-point drop
    demo = result(
        category="long_tail/stacked_constraints",
        n_cases=8,
        diff_points=-12.0,
        p_value=0.108,
        p_adjusted=0.108,
        mde_points=32.0,
        cases_needed=80,
    )
    assert routing_advice(demo, loss_detected=False) == (
        "undecided on `long_tail/stacked_constraints` (-12 points, window p = 0.108): needs "
        "~72 more paired cases to detect a 10-point drop (now 8: would detect a 32-point drop)"
    )
    few = routing_advice(result(p_value=None, p_adjusted=None, n_cases=3), loss_detected=False)
    assert few.startswith("undecided") and "fewer than the 5 a test needs" in few


def test_cases_needed_is_where_the_detectable_drop_reaches_the_tolerance():
    for base_rate, n in ((0.8, 1), (0.6, 3), (0.95, 2)):
        m = cases_needed(base_rate, [n], [n], 0.10)
        assert min_detectable_drop(base_rate, [n] * m, [n] * m) <= 0.10 + 1e-9
        assert min_detectable_drop(base_rate, [n] * (m - 1), [n] * (m - 1)) > 0.10
    assert cases_needed(0.05, [1], [1], 0.10) is None  # base cannot lose 10 points
