"""The logprob tripwire's statistic and permutation p on synthetic first-token logprobs."""

from __future__ import annotations

import numpy as np
import pytest

from evals.records import TimingRecord
from evals.stats import tripwire
from evals.stats.eprocess import EProcessState, p_to_e, update

TOKENS = ("A", "B", "C", "D", "E", "F")
BASE = {"x": [-0.1, -2.5, -3.0, -4.0, -4.5, -6.0], "Hi": [-0.3, -1.5, -3.5, -4.1, -5.0, -5.5]}


def draw(rng, n, shift=0.0, noise=0.02, k=5):
    """``n`` queries per prompt: each logprob jittered by ``noise`` (the API's
    nondeterminism), the non-top tokens moved by ``shift`` (a quantization: top-1 kept)."""
    out = {}
    for prompt, lps in BASE.items():
        rows = []
        for _ in range(n):
            v = np.array(lps) + rng.normal(0, noise, len(lps))
            v[1:] += shift
            order = np.argsort(-v)[:k]
            rows.append({TOKENS[i]: float(v[i]) for i in order})
        out[prompt] = rows
    return out


def test_null_rejects_at_most_at_the_stated_rate():
    rng = np.random.default_rng(1)
    ps = [
        tripwire.window_test(draw(rng, 24), draw(rng, 6), permutations=199, seed=i).p_value
        for i in range(300)
    ]
    rate = np.mean(np.array(ps) <= 0.05)
    assert rate <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 300)  # within 3 standard errors


def test_a_small_logprob_shift_with_the_same_top_token_is_detected():
    rng = np.random.default_rng(2)
    cur = draw(rng, 6, shift=0.04)
    assert all(max(r, key=r.get) == "A" for rows in cur.values() for r in rows)
    result = tripwire.window_test(draw(rng, 24), cur, permutations=999)
    assert result.p_value <= 0.01
    assert result.statistic > 0.02


def test_evidence_across_runs_alarms_after_a_shift_and_not_before():
    rng = np.random.default_rng(3)
    reference = draw(rng, 24)
    state, threshold = EProcessState(), 1000.0
    for i in range(48):  # two days of hourly runs, nothing changed
        p = tripwire.window_test(reference, draw(rng, 6), permutations=999, seed=i).p_value
        state, decision = update(state, _evidence(p), threshold=threshold)
    assert not decision.alarm
    for i in range(3):  # the tier switched to a quantized model
        p = tripwire.window_test(reference, draw(rng, 6, shift=0.04), seed=100 + i).p_value
        state, decision = update(state, _evidence(p), threshold=threshold)
    assert decision.alarm


def _evidence(p):
    from evals.stats.eprocess import AuditEvidence

    assert p_to_e(p) > 0
    return AuditEvidence(p_value=p)


def test_missing_tokens_are_left_censored_at_the_querys_lowest_logprob():
    a = [{"A": -0.1, "B": -2.0}]
    b = [{"A": -0.1, "C": -3.0}]
    # tokens A, B, C: a has C at -2.0 (its floor), b has B at -3.0
    assert tripwire.distance(a, b) == pytest.approx((0 + 1.0 + 1.0) / 3)


def test_first_token_reads_the_top_logprobs_and_says_none_without_them():
    rec = TimingRecord(ok=True)
    assert tripwire.first_token(rec) is None  # e.g. an Anthropic endpoint
    rec.logprobs = [{"token": "A", "logprob": -0.1, "top_logprobs": [
        {"token": "A", "logprob": -0.1}, {"token": "B", "logprob": -2.2}]}]  # fmt: skip
    assert tripwire.first_token(rec) == {"A": -0.1, "B": -2.2}


def test_request_is_one_token_at_temperature_zero_with_top_logprobs():
    req = tripwire.request("x", top_k=7)
    assert (req.max_tokens, req.temperature, req.logprobs, req.top_logprobs) == (1, 0.0, True, 7)


def test_no_prompt_in_common_is_a_clear_error():
    with pytest.raises(ValueError, match="no prompt has queries in both windows"):
        tripwire.window_test({"x": [{"A": -0.1}]}, {"Hi": [{"A": -0.1}]})


def _gathered_p(reference, current, permutations, seed):
    """The permutation p computed the direct way: each permutation's rows gathered, averaged."""
    rng = np.random.default_rng(seed)
    prompts = [p for p in reference if current.get(p)]
    observed, null = 0.0, np.zeros(permutations)
    for prompt in prompts:
        tokens = tripwire._tokens(reference[prompt], current[prompt])
        pooled = np.vstack(
            [tripwire._matrix(reference[prompt], tokens), tripwire._matrix(current[prompt], tokens)]
        )
        n = len(reference[prompt])
        observed += np.abs(pooled[:n].mean(0) - pooled[n:].mean(0)).mean() / len(prompts)
        shuffled = pooled[np.argsort(rng.random((permutations, len(pooled))), axis=1)]
        null += np.abs(shuffled[:, :n].mean(1) - shuffled[:, n:].mean(1)).mean(1) / len(prompts)
    return (1 + int(np.sum(null >= observed - 1e-12))) / (permutations + 1)


@pytest.mark.parametrize("shift", [0.0, 0.01, 0.04])
def test_the_masked_permutations_give_the_p_of_the_gathered_ones(shift):
    rng = np.random.default_rng(4)
    for seed in range(5):
        reference, current = draw(rng, 24, noise=0.01), draw(rng, 6, shift=shift, noise=0.01)
        got = tripwire.window_test(
            reference, current, permutations=499, seed=seed, tolerance=0.0
        ).p_value
        assert got == _gathered_p(reference, current, 499, seed)


def test_identical_windows_give_p_one():
    """A bit-exact engine answers every query alike: nothing moved, p = 1 exactly."""
    rows = {"x": [{"A": -0.1, "B": -2.5}] * 24, "Hi": [{"A": -0.3, "C": -1.5}] * 24}
    current = {p: r[:6] for p, r in rows.items()}
    test = tripwire.window_test(rows, current, permutations=99)
    assert test.statistic < 1e-12 and test.p_value == 1.0


def test_a_serving_shift_within_the_tolerance_is_not_a_change_and_a_larger_one_is():
    """Bit-exact rows moved alike by a stack's numerics (prompt cache, batch size): without a
    tolerance the permutation test calls the smallest steady shift a change."""
    rng = np.random.default_rng(6)
    reference = {p: rows * 4 for p, rows in draw(rng, 6, noise=0.0).items()}
    numerics = {p: [{t: v + 0.005 for t, v in r.items()} for r in rows[:6]]
                for p, rows in reference.items()}  # fmt: skip
    assert (
        tripwire.window_test(reference, numerics, permutations=999, tolerance=0.0).p_value <= 0.01
    )
    within = tripwire.window_test(reference, numerics, permutations=999)  # the default
    assert within.p_value == 1.0 and within.statistic == pytest.approx(0.005)
    quantized = draw(np.random.default_rng(6), 6, shift=0.06, noise=0.0)
    beyond = tripwire.window_test(reference, quantized, permutations=999)
    assert beyond.p_value <= 0.01
