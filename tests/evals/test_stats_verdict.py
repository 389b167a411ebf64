"""evals.stats.verdict: labels, sentences and the reasons for being inconclusive."""

import json

import numpy as np
import pytest

from evals.similarity import compare_pairs
from evals.stats.capability import paired_table
from evals.stats.mmd import MMDResult, mmd_test
from evals.stats.verdict import (
    PLACEHOLDER_LADDER,
    TierCounts,
    decide,
    grade_effect,
    load_reference_ladder,
    reach,
)
from tests.evals.synthetic import CALM, result, tiers

LADDER = PLACEHOLDER_LADDER  # explicit, so a measured ladder file does not change the wording


def cases_table(n=50, base_passes=40, fast_loses=6):
    base = {i: i < base_passes for i in range(n)}
    fast = {i: i < base_passes - fast_loses for i in range(n)}
    return paired_table(fast, base)


def test_it_says_no_detectable_difference_with_what_it_could_miss():
    v = decide(fast_vs_base=result(0.41, 0.0002), base_vs_base=CALM, ladder=LADDER)
    assert v.label == "no_detectable_difference"
    assert v.sentence == (
        "no detectable difference (p = 0.41; n = 250 per tier; this run could miss "
        "differences below MMD² 0.0012: it would catch a 4-bit quantization of the same model, "
        "could miss an 8-bit quantization of the same model)"
    )
    assert v.min_detectable_effect == pytest.approx(0.0012)
    assert v.noise_floor == pytest.approx(0.0001)


def test_it_says_different_model_with_the_capability_loss():
    table = cases_table()  # 6 cases fast fails and base passes: −12 points, McNemar p = 1/32
    v = decide(
        fast_vs_base=result(0.0001, 0.04, B=9999),
        base_vs_base=CALM,
        capability=table,
        ladder=LADDER,
    )
    assert v.label == "different_model"
    assert v.sentence == (
        "different model (p < 0.001; pass@1 −12 points; about the distance of a different model)"
    )
    # Holm over {MMD, McNemar}: 2 · 0.0001, then max(that, 1 · 1/32)
    assert v.adjusted_p_values == pytest.approx({"mmd_fast_vs_base": 0.0002, "mcnemar": 1 / 32})
    assert v.p_value == pytest.approx(0.0002)


def test_it_grades_a_small_difference_as_numerics_scale():
    v = decide(fast_vs_base=result(0.003, 0.005), base_vs_base=CALM, ladder=LADDER)
    assert v.label == "numerics_scale_difference"
    assert v.sentence == (
        "numerics-scale difference (p = 0.003; about the distance of a 4-bit quantization of "
        "the same model; a tenth of the distance to a different model)"
    )


def test_it_calls_a_significant_capability_loss_a_different_model():
    table = cases_table(n=60, base_passes=50, fast_loses=12)
    v = decide(fast_vs_base=result(0.5, 0.0), base_vs_base=CALM, capability=table, ladder=LADDER)
    assert v.label == "different_model"
    assert "pass@1 −20 points" in v.sentence


def test_it_never_claims_the_same_model():
    labels = set()
    for p, stat in ((0.9, 0.0), (0.01, 0.002), (0.001, 0.1)):
        v = decide(fast_vs_base=result(p, stat), base_vs_base=CALM, ladder=LADDER)
        labels.add(v.label)
        assert not v.sentence.startswith("same") and "is the same model" not in v.sentence
    assert labels == {"no_detectable_difference", "numerics_scale_difference", "different_model"}


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"fast_vs_base": result(0.3, 0.0, prompts=8)}, "n too small: 8 prompts, need 25"),
        (
            {"fast_vs_base": result(0.3, 0.0, k=3)},
            "n too small: 3 samples of a prompt on a tier, need 5",
        ),
        (
            {"tiers": {"fast": TierCounts(250, 0), "base": TierCounts(250, 60)}},
            "24% of base requests failed, limit 20%",
        ),
        (
            {"tiers": {"fast": TierCounts(250, 50, empty=100)}},
            "50% of fast outputs were empty, limit 20%",
        ),
        ({"base_vs_base": None}, "no base-vs-base calibration (two independent base batches)"),
        (
            {"base_vs_base": result(0.001, 0.01)},
            "the base tier differs from itself: base-vs-base p = 0.001, no stable noise floor",
        ),
        (
            {"fast_vs_fast": result(0.0001, 0.01)},
            "the fast tier differs from itself: fast-vs-fast p < 0.001, no stable noise floor",
        ),
        (
            {"fast_vs_base": MMDResult(None, None, np.empty(0), 0, (0, 0), 1000, 999)},
            "no prompt has 2 samples on both tiers",
        ),
    ],
)
def test_it_is_inconclusive_with_a_reason(kwargs, reason):
    args = {"fast_vs_base": result(0.001, 0.05), "base_vs_base": CALM, "ladder": LADDER}
    v = decide(**{**args, **kwargs})
    assert v.label == "inconclusive"
    assert v.sentence == f"inconclusive ({reason})"
    assert v.reasons[0] == reason


def test_it_reports_temperature_zero_diagnostics_against_base_vs_base():
    fb = compare_pairs([("the answer is 4", "the answer is 5")] * 3)
    bb = compare_pairs([("the answer is 4", "the answer is 4")] * 3)
    v = decide(
        fast_vs_base=result(0.41, 0.0),
        base_vs_base=CALM,
        t0_fast_vs_base=fb,
        t0_base_vs_base=bb,
        ladder=LADDER,
    )
    assert any(
        r.startswith(
            "temperature 0: median Indel ratio fast-vs-base 0.933, exact matches 0%; "
            "base-vs-base 1.000, exact matches 100%"
        )
        for r in v.reasons
    )
    assert "effect grading uses placeholder reference values (not measured yet)" in v.reasons


def test_it_loads_a_measured_ladder_and_rejects_a_malformed_one(tmp_path):
    measured = {"L": 1000, "rungs": [
        {"key": "a_vs_a", "label": "the same model against itself", "mmd2": 0.0},
        {"key": "q4_0", "label": "a 4-bit quantization", "mmd2": 0.002},
        {"key": "different_model", "label": "a different model", "mmd2": 0.02},
    ]}  # fmt: skip
    path = tmp_path / "ladder.json"
    path.write_text(json.dumps(measured))
    ladder = load_reference_ladder(path)
    assert grade_effect(0.002, ladder)[1:] == (
        "about the distance of a 4-bit quantization",
        "a tenth of the distance to a different model",
    )
    assert grade_effect(0.0005, ladder)[1] == "below the distance of a 4-bit quantization"
    v = decide(fast_vs_base=result(0.01, 0.002), base_vs_base=CALM, ladder=ladder)
    assert not any("placeholder" in r for r in v.reasons)
    assert load_reference_ladder(tmp_path / "absent.json") is PLACEHOLDER_LADDER
    path.write_text(json.dumps({"L": 1000, "rungs": measured["rungs"][:2]}))
    with pytest.raises(ValueError):
        load_reference_ladder(path)


def test_it_grades_only_against_rungs_that_were_significant_when_measured():
    measured = {"L": 1000, "rungs": [
        {"key": "a_vs_a", "label": "itself", "mmd2": 0.0003, "p_value": 0.35},
        {"key": "q8_0", "label": "an 8-bit quantization", "mmd2": 0.0005, "p_value": 0.29},
        {"key": "q4_0", "label": "a 4-bit quantization", "mmd2": 0.007, "p_value": 0.001},
        {"key": "different_model", "label": "a different model", "mmd2": 0.04, "p_value": 0.001},
    ]}  # fmt: skip
    # a false alarm just above the threshold is not "about the distance of an 8-bit one"
    assert grade_effect(0.0006, measured)[1] == "below the distance of a 4-bit quantization"
    assert reach(0.002, measured) == (
        "it would catch a 4-bit quantization, could miss an 8-bit quantization"
    )
    assert reach(0.05, measured) == "could miss a different model"


def test_it_does_not_grade_against_a_ladder_measured_at_another_l():
    v = decide(fast_vs_base=result(0.01, 0.001, L=500), base_vs_base=CALM, ladder=LADDER)
    assert v.label == "different_model" and v.effect is None
    assert "effect not graded: reference ladder measured at L = 1000" in v.reasons


def test_it_decides_end_to_end_on_synthetic_tiers():
    same_fast, base, base2 = tiers(0, (0.3, 0.3, 0.3), prompts=25, k=5, length=1000)
    far_fast = tiers(0, (0.6,), prompts=25, k=5, length=1000)[0]  # same references
    calm = mmd_test(base, base2, B=199)
    same = decide(fast_vs_base=mmd_test(same_fast, base, B=199), base_vs_base=calm, ladder=LADDER)
    far = decide(fast_vs_base=mmd_test(far_fast, base, B=199), base_vs_base=calm, ladder=LADDER)
    assert same.label == "no_detectable_difference"
    assert far.label == "different_model" and far.p_value == pytest.approx(1 / 200)


def test_a_calibration_is_only_called_unstable_on_strong_evidence():
    borderline = decide(
        fast_vs_base=result(0.41, 0.0002), base_vs_base=result(0.03, 0.001), ladder=LADDER
    )
    assert borderline.label == "no_detectable_difference"
    strong = decide(
        fast_vs_base=result(0.41, 0.0002), base_vs_base=result(0.005, 0.001), ladder=LADDER
    )
    assert strong.label == "inconclusive" and "differs from itself" in strong.sentence


def test_it_marks_a_pass_rate_gap_that_is_not_significant():
    few = cases_table(n=4, base_passes=4, fast_loses=1)  # one discordant case: McNemar p = 1
    v = decide(
        fast_vs_base=result(0.0001, 0.04, B=9999), base_vs_base=CALM, capability=few, ladder=LADDER
    )
    assert "pass@1 −25 points (not significant)" in v.sentence


def test_no_difference_reports_the_mmd_tests_own_p_not_the_family_adjusted_one():
    same = cases_table(n=10, base_passes=10, fast_loses=0)  # McNemar p = 1 pushes Holm to 1
    v = decide(fast_vs_base=result(0.58, 0.0001), base_vs_base=CALM, capability=same, ladder=LADDER)
    assert v.sentence.startswith("no detectable difference (p = 0.58;")
    assert v.adjusted_p_values["mmd_fast_vs_base"] == pytest.approx(1.0)
