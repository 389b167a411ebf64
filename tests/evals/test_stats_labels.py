"""evals.stats.labels (and the text preparation it relies on): labels that claim only what the
run's own tests show; formatting is not a model difference; any Unicode survives."""

import unicodedata

import numpy as np

from evals.stats.capability import paired_table
from evals.stats.labels import TierCounts, judge, ladder_context, rate_test
from evals.stats.ladder import REFERENCE_LADDER
from evals.stats.mmd import encode, mmd_test
from tests.evals.synthetic import tiers


def null_tiers(seed=3, prompts=25, k=6):
    """Two tiers drawn from one distribution, with accented letters and a final space."""
    a, b = tiers(seed, (0.3, 0.3), prompts=prompts, k=k, length=60)
    accent = {p: [t.replace("e", "é") for t in v] for p, v in a.items()}
    return accent, {p: [t.replace("e", "é") for t in v] for p, v in b.items()}


def reformat(texts, how):
    return {p: [how(t) for t in v] for p, v in texts.items()}


def counts(n=150, failed=0, empty=0):
    return TierCounts(requests=n, failed=failed, empty=empty)


FORMATS = {
    "leading space": lambda t: " " + t,
    "trailing newline": lambda t: t + "\n",
    "NFD accents": lambda t: unicodedata.normalize("NFD", t),
}


def test_formatting_differences_do_not_reach_the_test():
    fast, base = null_tiers()
    plain = mmd_test(fast, base, B=300)
    for name, how in FORMATS.items():
        formatted = mmd_test(reformat(fast, how), base, B=300)
        assert formatted.p_value == plain.p_value, name
        raw = mmd_test(reformat(fast, how), base, B=300, normalise=False)
        assert raw.p_value < 0.01, f"{name}: the case must be detectable without normalising"
    v = judge(fast_vs_base=mmd_test(reformat(fast, FORMATS["leading space"]), base, B=300),
              tiers={"fast": counts(), "base": counts()})  # fmt: skip
    assert plain.p_value > 0.05 and v.label == "no_detectable_difference"


def test_one_character_answers_a_vs_b_are_outputs_differ_not_a_cause():
    fast = {p: ["A"] * 6 for p in range(25)}
    base = {p: ["B"] * 6 for p in range(25)}
    v = judge(fast_vs_base=mmd_test(fast, base, B=300), tiers={"fast": counts(), "base": counts()})
    assert v.label == "outputs_differ"
    assert v.sentence == "outputs differ (p = 0.0033; n = 150 per tier; MMD² 0.002 [0.002, 0.002])"
    assert "numerics" not in v.sentence and "model" not in v.sentence


def test_empty_answers_are_a_rate_of_their_own_counted_in_the_sentence():
    fast, base = null_tiers(k=8)
    fast = {p: (["", "  "] + v[2:]) if p < 12 else v for p, v in fast.items()}
    result = mmd_test(fast, base, B=300)
    assert result.n_empty == (24, 0)
    v = judge(fast_vs_base=result, tiers={"fast": counts(200, empty=24), "base": counts(200)})
    assert v.label == "no_detectable_difference"
    assert "empty answers fast 24/200 vs base 0/200 (Fisher p < 0.001)" in v.sentence


def test_no_difference_states_the_effect_caught_with_80_percent_power():
    fast, base = null_tiers()
    result = mmd_test(fast, base, B=300)
    v = judge(fast_vs_base=result, tiers={"fast": counts(), "base": counts()})
    assert v.effect.detectable_80 > v.effect.critical_value
    assert f"80% power only above MMD² {v.effect.detectable_80:.2g}" in v.sentence
    assert v.effect.low < result.statistic < v.effect.high


def test_capability_counts_only_from_the_run_itself():
    fast, base = null_tiers()
    result = mmd_test(fast, base, B=300)
    table = paired_table({i: i < 20 for i in range(60)}, {i: i < 45 for i in range(60)})
    own = judge(fast_vs_base=result, capability=table)
    assert own.label == "capability_difference"
    assert own.sentence.startswith("capability difference (unit tests pass@1 \u221242 points")
    stale = judge(fast_vs_base=result, capability=table, capability_from_run=False)
    assert stale.label == "no_detectable_difference"
    assert any("earlier run (not counted)" in c for c in stale.context)


def test_it_is_inconclusive_when_prompts_are_lost_or_requests_fail():
    fast, base = null_tiers(prompts=30)
    lost = {p: (v if p >= 5 else v[:1]) for p, v in fast.items()}
    v = judge(fast_vs_base=mmd_test(lost, base, B=100))
    assert v.label == "inconclusive" and "5 of 30 prompts lost" in v.sentence
    v = judge(fast_vs_base=mmd_test(fast, base, B=100),
              tiers={"fast": counts(failed=40), "base": counts()})  # fmt: skip
    assert v.sentence.startswith("inconclusive (40/150 fast requests failed, limit 20%")
    assert "failed requests fast 40/150 vs base 0/150" in v.sentence


def test_the_ladder_is_context_only_on_the_same_suite_and_l_and_only_significant_rungs():
    words = ladder_context(REFERENCE_LADDER, suite="audit", L=1000)
    assert "a 4-bit quantization" in words and "a different model" in words
    assert "8-bit" not in words and "itself" not in words  # not significant when measured
    assert ladder_context(REFERENCE_LADDER, suite="coding", L=1000) == ""
    assert ladder_context(REFERENCE_LADDER, suite="audit", L=500) == ""


def test_any_unicode_survives_and_nul_is_not_padding():
    x = encode(["a\x00", "a", "\ud800b"], L=3)
    assert x[0].tolist() != x[1].tolist()
    texts = {p: ["x\ud800y", "\x00z", "plain"] for p in range(3)}
    assert mmd_test(texts, texts, B=20).statistic is not None


def test_rate_test_is_fishers_exact():
    assert rate_test("empty answers", (0, 10), (0, 10)).p_value == 1.0
    assert rate_test("empty answers", (10, 10), (0, 10)).p_value < 1e-4
    assert rate_test("x", (1, 0), (0, 5)).p_value == 1.0
    assert np.isclose(rate_test("x", (3, 10), (1, 10)).p_value, 0.5820, atol=1e-3)
