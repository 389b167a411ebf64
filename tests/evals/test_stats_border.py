"""The border-input tripwire's pieces (B3IT): candidates, border criterion, balance, total
variation and the within-input permutation p, on synthetic answer counts."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from evals.records import TimingRecord
from evals.stats import border


def draw(rng, shares, n):
    """``n`` answers per input, input i answering "A" with probability ``shares[i]``."""
    return {
        f"p{i}": Counter(rng.choice(["A", "B"], size=n, p=[q, 1 - q])) for i, q in enumerate(shares)
    }


SHARES = [0.2, 0.35, 0.5, 0.65, 0.8] * 4  # 20 border inputs, as the paper keeps


def test_total_variation_of_known_distributions():
    assert border.tv({"A": 1}, {"A": 5}) == 0.0
    assert border.tv({"A": 1}, {"B": 3}) == 1.0
    assert border.tv({"A": 3, "B": 1}, {"A": 1, "B": 1}) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="answers in both"):
        border.tv({}, {"A": 1})


def test_border_criterion_and_balance_after_the_reference():
    assert not border.is_border({"A": 3}) and border.is_border({"A": 2, "B": 1})
    assert not border.is_border({"A": 2, "": 1})  # an empty answer is not a second token
    assert border.balance({"A": 8, "B": 2}) == 0.25 and border.balance({"A": 3}) == 0.0
    ref = {"x": {"A": 9, "B": 1}, "y": {"A": 5, "B": 5}, "z": {"A": 10}, "w": {"A": 6, "B": 4}}
    assert border.select(ref, keep=2) == ["y", "w"]
    assert border.select(ref, keep=10) == ["y", "w", "x"]  # one answer only: never kept


def test_candidates_are_seeded_distinct_and_bounded():
    a, b = border.candidates(300, seed=1), border.candidates(300, seed=2)
    assert a == border.candidates(300, seed=1) and a != b and len(set(a)) == 300
    with pytest.raises(ValueError, match="at most"):
        border.candidates(10_000)


def test_discovery_requests_at_the_papers_sizes_and_the_defaults():
    assert border.discovery_requests(5000, 3, 50, 100) == 20_000  # the paper's
    assert border.discovery_requests() == 300 * 3 + 30 * 30


def test_answer_keeps_a_token_and_drops_failures_and_empties():
    ok = TimingRecord(ok=True, text=" I")
    assert border.answer(ok) == " I"
    assert border.answer(TimingRecord(ok=False, text="x")) is None
    assert border.answer(TimingRecord(ok=True, text="")) is None
    got = border.distributions([("a", " I"), ("a", None), ("a", "Hi"), ("b", None)])
    assert got == {"a": Counter({" I": 1, "Hi": 1})}


def test_null_rejects_at_most_at_the_stated_rate():
    rng = np.random.default_rng(3)
    ps = [
        border.window_test(
            draw(rng, SHARES, 30), draw(rng, SHARES, 10), permutations=199, seed=i
        ).p_value
        for i in range(200)
    ]
    rate = np.mean(np.array(ps) <= 0.05)
    assert rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 200)


def test_a_moved_near_tie_is_seen_in_one_run():
    """Each input's odds moved by 1 in logit (the simulated vendor's quantized variant)."""
    rng = np.random.default_rng(4)
    logit = np.log(np.array(SHARES) / (1 - np.array(SHARES)))
    moved = 1 / (1 + np.exp(-(logit + np.where(np.arange(20) % 2, 1.0, -1.0))))
    test = border.window_test(draw(rng, SHARES, 30), draw(rng, moved, 10), permutations=999)
    assert test.p_value <= 0.01 and test.n_inputs == 20
    assert set(test.per_input) == {f"p{i}" for i in range(20)}


def test_inputs_without_answers_in_both_are_an_error_that_says_so():
    with pytest.raises(ValueError, match="no border input has answers in both"):
        border.window_test({"a": {"A": 3}}, {"b": {"A": 3}})
    with pytest.raises(ValueError, match="permutations"):
        border.window_test({"a": {"A": 3}}, {"a": {"A": 3}}, permutations=0)


def test_cross_distance_on_inputs_in_common_only():
    a = {"x": {"A": 1, "B": 1}, "y": {"A": 2}}
    b = {"x": {"A": 2}, "z": {"A": 2}}
    assert border.cross_distance(a, b) == pytest.approx(0.5)
    assert border.cross_distance(a, {"q": {"A": 1}}) is None
