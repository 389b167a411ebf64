"""evals.stats.capability: McNemar, the paired table, pass@k."""

from math import comb

import pytest

from evals.stats.capability import mcnemar_exact, paired_table, pass_at_k


def test_it_matches_a_hand_computed_mcnemar():
    # b = 1, c = 9: two-sided exact = 2 · P(X ≤ 1 | n = 10, ½) = 2 · (1 + 10) / 1024
    assert mcnemar_exact(1, 9) == pytest.approx(22 / 1024)
    assert mcnemar_exact(9, 1) == pytest.approx(22 / 1024)
    assert mcnemar_exact(5, 5) == pytest.approx(1.0)
    assert mcnemar_exact(0, 0) == 1.0


def test_it_builds_the_paired_table():
    fast = {"a": True, "b": False, "c": False, "d": True, "only_fast": True}
    base = {"a": True, "b": True, "c": False, "d": False, "only_base": False}
    t = paired_table(fast, base)
    assert (t.n, t.both_pass, t.fast_only, t.base_only, t.both_fail) == (4, 1, 1, 1, 1)
    assert t.diff_points == pytest.approx(0.0) and t.p_value == 1.0
    assert t.unpaired == ["only_base", "only_fast"]
    assert paired_table({}, {}).diff_points is None


def test_it_estimates_pass_at_k():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 10) == 1.0
    assert pass_at_k(10, 1, 10) == 1.0
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - comb(7, 2) / comb(10, 2))
    assert pass_at_k(200, 37, 10) == pytest.approx(1 - comb(163, 10) / comb(200, 10))
    with pytest.raises(ValueError):
        pass_at_k(5, 6, 1)
