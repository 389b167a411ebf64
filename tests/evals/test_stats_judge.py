"""evals.stats.labels.judge: the Holm family, labels that never claim the same model, the
reasons for being inconclusive, the temperature-0 reasons and the MMD test's own p.

(Ported from the tests of the retired ``evals.stats.verdict.decide``: what they checked of
behaviour ``judge`` still has. The placeholder-ladder wording, effect grading, fast-vs-fast
and base-vs-base calibrations went with ``decide``.)"""

import numpy as np
import pytest

from evals.similarity import compare_pairs
from evals.stats.capability import paired_table
from evals.stats.labels import LABELS, TierCounts, judge
from evals.stats.mmd import MMDResult, mmd_test
from tests.evals.synthetic import result, tiers


def cases_table(n=50, base_passes=40, fast_loses=6):
    base = {i: i < base_passes for i in range(n)}
    fast = {i: i < base_passes - fast_loses for i in range(n)}
    return paired_table(fast, base)


def test_mmd_and_mcnemar_are_one_holm_family():
    table = cases_table()  # 6 cases fast fails and base passes: −12 points, McNemar p = 1/32
    v = judge(fast_vs_base=result(0.0001, 0.04, B=9999), capability=table)
    assert v.label == "capability_difference"
    # Holm over {MMD, McNemar}: 2 · 0.0001, then max(that, 1 · 1/32)
    assert v.adjusted_p_values == pytest.approx({"mmd_fast_vs_base": 0.0002, "mcnemar": 1 / 32})
    assert v.sentence.startswith(
        "capability difference (unit tests pass@1 \u221212 points; McNemar p = 0.031; 50 cases; "
        "outputs differ too, p < 0.001"
    )


def test_a_significant_capability_loss_labels_the_run_without_an_mmd_difference():
    table = cases_table(n=60, base_passes=50, fast_loses=12)
    v = judge(fast_vs_base=result(0.5, 0.0), capability=table)
    assert v.label == "capability_difference"
    assert "pass@1 \u221220 points" in v.sentence and "outputs differ too" not in v.sentence


def test_it_never_claims_the_same_model():
    labels = set()
    for p, stat in ((0.9, 0.0), (0.01, 0.002), (0.001, 0.1)):
        v = judge(fast_vs_base=result(p, stat))
        labels.add(v.label)
        assert not v.sentence.startswith("same") and "same model" not in v.sentence
    assert labels == {"no_detectable_difference", "outputs_differ"} and labels <= set(LABELS)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"fast_vs_base": result(0.3, 0.0, prompts=8)}, "n too small: 8 prompts, need 25"),
        (
            {"fast_vs_base": result(0.3, 0.0, k=3)},
            "n too small: 3 texts of a prompt on a tier, need 5",
        ),
        (
            {"tiers": {"fast": TierCounts(250, 0), "base": TierCounts(250, 60)}},
            "60/250 base requests failed, limit 20%",
        ),
        (
            {"fast_vs_base": MMDResult(None, None, np.empty(0), 0, (0, 0), 1000, 999)},
            "no prompt has 2 non-empty texts on both tiers",
        ),
    ],
)
def test_it_is_inconclusive_with_a_reason(kwargs, reason):
    v = judge(**{"fast_vs_base": result(0.001, 0.05), **kwargs})
    assert v.label == "inconclusive"
    assert v.sentence.startswith(f"inconclusive ({reason}")
    assert v.reasons[0] == reason


def test_it_reports_temperature_zero_diagnostics_against_base_vs_base():
    fb = compare_pairs([("the answer is 4", "the answer is 5")] * 3)
    bb = compare_pairs([("the answer is 4", "the answer is 4")] * 3)
    v = judge(fast_vs_base=result(0.41, 0.0), t0_fast_vs_base=fb, t0_base_vs_base=bb)
    assert (
        "temperature 0: median Indel ratio fast-vs-base 0.933, exact matches 0%; "
        "base-vs-base 1.000, exact matches 100%"
    ) in v.reasons


def test_it_decides_end_to_end_on_synthetic_tiers():
    same_fast, base = tiers(0, (0.3, 0.3), prompts=25, k=5, length=1000)
    far_fast = tiers(0, (0.6,), prompts=25, k=5, length=1000)[0]  # same references
    same = judge(fast_vs_base=mmd_test(same_fast, base, B=199))
    far = judge(fast_vs_base=mmd_test(far_fast, base, B=199))
    assert same.label == "no_detectable_difference"
    assert far.label == "outputs_differ" and far.p_value == pytest.approx(1 / 200)


def test_no_difference_reports_the_mmd_tests_own_p_not_the_family_adjusted_one():
    same = cases_table(n=10, base_passes=10, fast_loses=0)  # McNemar p = 1 pushes Holm to 1
    v = judge(fast_vs_base=result(0.58, 0.0001), capability=same)
    assert v.sentence.startswith("no detectable difference (p = 0.58;")
    assert v.adjusted_p_values["mmd_fast_vs_base"] == pytest.approx(1.0)


def test_judge_writes_every_label_of_labels_and_no_other():
    """LABELS is what /metrics, the API schema and the pages enumerate: it must be exactly
    what judge can write."""
    written = {
        judge(fast_vs_base=result(0.41, 0.0)).label,
        judge(fast_vs_base=result(0.001, 0.05)).label,
        judge(fast_vs_base=result(0.5, 0.0), capability=cases_table(60, 50, 12)).label,
        judge(fast_vs_base=result(0.3, 0.0, prompts=8)).label,
    }
    assert written == set(LABELS) and len(LABELS) == len(written)
