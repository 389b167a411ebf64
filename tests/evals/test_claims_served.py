"""evals.served (the one gating rule) and evals.claims (a claim's fields, its wording, the
floor check with its Wilson interval)."""

from __future__ import annotations

import pytest

from evals.claims import Claim, check_floor, judge, problems, wilson
from evals.served import counts_for_tier, never_confirmed, served_state, tally


def test_the_four_states_of_a_sample_against_its_expected_tier():
    assert served_state("priority", "") == "unchecked"
    assert served_state("priority", "priority") == "confirmed"
    assert served_state("default", "priority") == "downgraded"
    assert served_state("", "priority") == "unconfirmed"
    assert served_state(None, "priority") == "unconfirmed"


def test_only_a_downgraded_sample_is_left_out_and_only_unless_included():
    assert not counts_for_tier("default", "priority")
    assert counts_for_tier("default", "priority", include_downgraded=True)
    assert counts_for_tier("", "priority")  # unconfirmed: kept (it proves nothing either way)
    assert counts_for_tier("priority", "priority") and counts_for_tier("default", "")


def test_never_confirmed_needs_an_expected_tier_and_no_report_at_all():
    silent = tally([("", "priority")] * 3)
    assert silent == {"unchecked": 0, "confirmed": 0, "downgraded": 0, "unconfirmed": 3}
    assert never_confirmed(silent)
    assert not never_confirmed(tally([("", "priority"), ("default", "priority")]))
    assert not never_confirmed(tally([("", "")]))  # nothing expected: nothing to confirm


def test_a_claim_is_worded_as_the_vendor_words_it():
    assert Claim("output_tps", "factor", 2.5).text() == "2.5× output tok/s"
    assert Claim("output_tps", "floor", 80, 99).text() == "99 % of requests ≥ 80 tok/s"
    assert Claim("ttft", "floor", 300, 95).text() == "95 % of requests TTFT ≤ 300 ms"
    assert Claim("e2e", "factor", 6).text() == "6× E2E"


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        (("e2e", "factor", 0, None), "claim.value: must be a number > 0 (got 0)"),
        (("e2e", "factor", True, None), "claim.value: must be a number > 0 (got True)"),
        (("tps", "factor", 2, None), "claim.metric: must be one of output_tps, ttft, e2e"),
        (("e2e", "ceiling", 2, None), "claim.form: must be one of factor, floor"),
        (("ttft", "floor", 300, None), "claim.percentile: a floor needs the percentile"),
        (("ttft", "floor", 300, 100), "claim.percentile: must be between 0 and 100 exclusive"),
        (("ttft", "floor", 300, 0), "claim.percentile: must be between 0 and 100 exclusive"),
        (("e2e", "factor", 6, 95), "claim.percentile: only a floor has a percentile"),
    ],
)
def test_each_bad_claim_field_is_named_with_its_problem(fields, problem):
    found = problems(*fields)
    assert any(line.startswith(problem) for line in found), found


def test_a_valid_claim_has_no_problem():
    assert problems("output_tps", "floor", 80, 99) == []
    assert problems("e2e", "factor", 6, None) == []


def test_the_wilson_interval_matches_its_formula_at_known_points():
    # Wilson (1927); values as in Newcombe (1998), Statistics in Medicine 17:857, table I:
    # 81/263 → [0.2553, 0.3662]; 15/148 → [0.0624, 0.1605]; 0/20 → [0, 0.1611]
    assert wilson(81, 263) == pytest.approx((0.2553, 0.3662), abs=5e-5)
    assert wilson(15, 148) == pytest.approx((0.0624, 0.1605), abs=5e-5)
    assert wilson(0, 20) == pytest.approx((0.0, 0.1611), abs=5e-5)


def test_judge_reads_the_interval_against_the_target():
    assert judge(0.96, 0.99, 0.95) == "confirmed"
    assert judge(0.80, 0.94, 0.95) == "contradicted"
    assert judge(0.90, 0.99, 0.95) == "not yet"
    assert judge(None, None, 0.95) is None


def test_a_floor_counts_failures_as_misses_and_leaves_out_requests_without_a_value():
    claim = Claim("output_tps", "floor", 80, 99)
    values = [100.0] * 195 + [70.0] * 3 + [False] * 2 + [None] * 10
    check = check_floor(claim, values)
    assert (check.n, check.met) == (200, 195)
    assert check.share == pytest.approx(0.975)
    assert (check.low, check.high) == pytest.approx(wilson(195, 200))
    assert check.word == "contradicted"  # high 0.989 < 0.99
    assert "97.5 % [94.3, 98.9] of 200 requests met it" in check.line(claim)
    ttft = check_floor(Claim("ttft", "floor", 300, 50), [250.0] * 30 + [350.0] * 2)
    assert ttft.met == 30 and ttft.word == "confirmed"  # a duration meets it from below


def test_a_floor_without_requests_is_not_yet():
    claim = Claim("ttft", "floor", 300, 95)
    check = check_floor(claim, [None, None])
    assert check.n == 0 and check.word is None
    assert (
        check.line(claim) == "claim 95 % of requests TTFT ≤ 300 ms: not yet (no fast-tier request)"
    )
