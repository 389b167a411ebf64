"""evals.stats.multiple: Holm and Benjamini–Hochberg, against hand computations."""

import pytest

from evals.stats.multiple import benjamini_hochberg, holm

P = [0.01, 0.04, 0.03, 0.005]


def test_it_adjusts_by_holm_in_input_order():
    # sorted 0.005, 0.01, 0.03, 0.04 × 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 → running max
    assert holm(P) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]) == []


def test_it_adjusts_by_benjamini_hochberg_in_input_order():
    # m·p/rank: 0.02, 0.02, 0.04, 0.04 → running min from the top
    assert benjamini_hochberg(P) == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert benjamini_hochberg([0.01, 0.02, 0.9]) == pytest.approx([0.03, 0.03, 0.9])
    assert benjamini_hochberg([]) == []
