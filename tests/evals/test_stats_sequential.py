"""evals.stats.sequential: the anytime-valid betting test."""

import numpy as np

from evals.stats.sequential import BettingTest, sequential_test
from tests.evals.synthetic import two_tiers


def stream(a, b):
    return [(p, a[p], b[p]) for p in a]


def test_it_rejects_clearly_different_tiers_before_the_end():
    a, b = two_tiers(0, 0.1, 0.5, prompts=10, k=10)
    res = sequential_test(stream(a, b), alpha=0.05)
    assert res.rejected
    assert res.stopped_at_pair < 100
    assert res.wealth[-1] >= 20 and (res.wealth[:-1] < 20).all()
    assert res.n_pairs == res.stopped_at_pair  # nothing consumed after the decision


def test_it_keeps_the_false_alarm_rate_under_alpha():
    alarms = [sequential_test(stream(*two_tiers(s, 0.3, 0.3, k=8))).rejected for s in range(60)]
    assert np.mean(alarms) <= 0.1


def test_it_does_not_bet_before_a_prompt_has_history():
    a, b = two_tiers(1, 0.1, 0.5, prompts=1, k=1)
    res = sequential_test(stream(a, b))
    assert res.wealth.tolist() == [1.0] and not res.rejected


def test_it_learns_a_prompt_across_batches():
    a, b = two_tiers(2, 0.05, 0.6, prompts=3, k=12)
    test = BettingTest(alpha=0.05)
    for start in range(0, 12, 3):  # round-major: three pairs of every prompt at a time
        for p in a:
            test.update(p, a[p][start : start + 3], b[p][start : start + 3])
    res = test.result()
    w = res.wealth
    assert w[3] == w[2]  # prompt 1's first pair ever: no witness, no bet
    assert w[9] != w[8]  # prompt 0's first pair of its second batch bets on batch one
    assert res.rejected
    assert test.update(0, a[0], b[0]) is True  # the decision is final
    assert test.result().n_pairs == res.n_pairs
