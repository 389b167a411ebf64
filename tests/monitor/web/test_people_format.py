"""Numbers for people (monitor/templatetags/people.py): e-values, p-values and MMD² as a lead
reads them, and glossary links that point at a definition."""

from __future__ import annotations

import pytest
from django.template import Context, Template

from monitor.templatetags import people


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (3898952.877, "3.9 M×"),
        (25920.0, "25,920×"),
        (4320, "4,320×"),
        (12.345, "12.3×"),
        (0.42, "0.42×"),
        (1.0, "1×"),
        (2.5e10, "25 G×"),
        (None, "—"),
        (float("inf"), "∞×"),
        (float("nan"), "—"),
    ],
)
def test_a_factor_is_rounded_for_people(value, words):
    assert people.times(value) == words


def test_the_evidence_sentence_names_what_it_is_against_and_the_alarm():
    assert (
        people.evidence(3898952.877, 25920)
        == "evidence 3.9 M× against 'same outputs', alarm at 25,920×"
    )


@pytest.mark.parametrize(
    ("p", "words"),
    [
        (0.0, "< 0.001"),
        (0.00025, "< 0.001"),
        (0.000999, "< 0.001"),
        (0.001, "0.001"),
        (0.0042, "0.004"),
        (0.0451, "0.045"),
        (0.37, "0.37"),
        (1.0, "1"),
        (None, "—"),
    ],
)
def test_a_p_value_is_never_zero(p, words):
    assert people.pvalue(p) == words
    assert people.pvalue(p) != "0.000"


def test_a_p_value_in_a_sentence():
    assert people.p_is(0.0001) == "p < 0.001"
    assert people.p_is(0.2) == "p = 0.2"


def test_a_negative_mmd2_reads_as_no_difference_with_the_raw_value_in_a_tooltip():
    html = people.mmd2(-0.00123)
    assert "≈ 0 (no difference measurable)" in html
    assert 'title="raw estimate -0.00123' in html
    assert "-0.00123" not in html.split(">", 1)[1]  # not in the visible text
    assert people.mmd2(0.0683) == "0.0683"
    assert people.mmd2(None) == "—"


def test_the_term_tag_links_the_word_to_its_anchor_on_the_metrics_page():
    source = '{% load people %}{% term "mmd" %} and {% term "holm" "Holm-adjusted" %}'
    html = Template(source).render(Context())
    assert '<a class="term" href="/metrics/#mmd" title="' in html and ">MMD</a>" in html
    assert 'href="/metrics/#holm"' in html and ">Holm-adjusted</a>" in html


def test_an_unknown_term_fails_loudly():
    with pytest.raises(KeyError):
        Template('{% load people %}{% term "nonsense" %}').render(Context())


def test_a_failed_check_has_one_class_name_on_every_page():
    """The worse page reads ``f`` from the rollups, the sample page the sample's own detail:
    both go through ``rollups.failed_class``, so a failed unit test is ``tests_failed`` on
    both (the sample page said ``failed``)."""
    from types import SimpleNamespace

    from monitor.derived.rollups import case_outcomes

    detail = {"kind": "unit_tests", "error_class": None}
    sample = SimpleNamespace(tests_detail=detail)
    row = {
        "case__key": "c1",
        "case__category": "coding",
        "prompt_tokens": 3,
        "completion_tokens": 5,
        "text": "x",
        "tests_passed": False,
        "batch": 0,
        "tests_detail": detail,
        "repetition": 0,
    }
    try:
        stored = case_outcomes([row])["c1"]["f"]
    except KeyError as exc:  # a field the rollup reads that this row lacks
        pytest.fail(f"case_outcomes needs {exc}")
    assert stored == people.check_class(sample) == "tests_failed"
    crashed = SimpleNamespace(tests_detail={"kind": "unit_tests", "error_class": "timeout"})
    assert people.check_class(crashed) == "timeout"
    assert people.check_class(SimpleNamespace(tests_detail={})) == "check_failed"


def test_undecided_at_a_large_loss_reads_as_keep_on_base_for_now():
    """At −50 points and p = 0.00025 the advice said only "undecided"; the lead's sentence
    says what to do and why."""
    from types import SimpleNamespace

    from monitor.web.worse import advice_for_a_lead

    losing = SimpleNamespace(
        category="code/humaneval", diff_points=-50.0, p_adjusted=0.00025, alpha=0.05
    )
    words = advice_for_a_lead("undecided", losing, 10.0)
    assert words.startswith("Keep this work on base for now: the fast tier looks worse here")
    assert "(-50 points)" in words
    thin = SimpleNamespace(category="code/humaneval", diff_points=-2.0, p_adjusted=0.6, alpha=0.05)
    assert "too little evidence" in advice_for_a_lead("undecided", thin, 10.0)
    assert advice_for_a_lead("route", thin, 10.0).startswith("Safe to send this work to the fast")
    assert advice_for_a_lead("keep", losing, 10.0).startswith("Send this work to base")
    agent = SimpleNamespace(category="agent/base", diff_points=-35.0, p_adjusted=0.001, alpha=0.05)
    assert advice_for_a_lead("keep", agent, 10.0).startswith(
        "Keep multi-step agent work on base: -35 points"
    )
