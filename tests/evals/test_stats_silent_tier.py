"""An audit where one tier answered nothing (all refusals, a reasoning model that spent its
tokens thinking, tool calls only) gets a verdict that says so, instead of an exception."""

from __future__ import annotations

import json

from evals.stats.labels import TierCounts, judge
from evals.stats.mmd import mmd_test


def _audit(fast_text: str, n_prompts: int = 25, per_prompt: int = 10):
    fast = {f"p{i}": [fast_text] * per_prompt for i in range(n_prompts)}
    base = {f"p{i}": [f"answer {i}.{j}" for j in range(per_prompt)] for i in range(n_prompts)}
    n = n_prompts * per_prompt
    counts = {
        "fast": TierCounts(requests=n, empty=n if not fast_text.strip() else 0),
        "base": TierCounts(requests=n),
    }
    return mmd_test(fast, base, B=50), counts


def test_an_all_empty_tier_summarises_without_a_null():
    fvb, _ = _audit("")
    assert fvb.statistic is None and fvb.n_empty == (250, 0)
    summary = fvb.to_dict()  # the verdict page's block: no quantile of an empty null
    assert summary["null_quantiles"] == {} and summary["n_empty"] == [250, 0]
    json.dumps(summary)


def test_an_all_empty_fast_tier_is_a_verdict_in_words():
    fvb, counts = _audit("   ")
    j = judge(fast_vs_base=fvb, tiers=counts)
    assert j.label == "outputs_differ"
    assert "fast tier answered nothing in 250 of 250 samples" in j.sentence
    assert "empty answers fast 250/250 vs base 0/250" in j.sentence


def test_both_tiers_silent_is_inconclusive_and_says_both():
    fast = {f"p{i}": [""] * 4 for i in range(5)}
    fvb = mmd_test(fast, fast, B=20)
    counts = {t: TierCounts(requests=20, empty=20) for t in ("fast", "base")}
    j = judge(fast_vs_base=fvb, tiers=counts)
    assert j.label == "inconclusive"
    assert "fast tier answered nothing in 20 of 20 samples" in j.sentence
    assert "base tier answered nothing in 20 of 20 samples" in j.sentence
