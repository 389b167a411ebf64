"""evals.similarity: Indel ratio, first divergence, prefix agreement, pair summaries."""

import difflib

import pytest

from evals.similarity import compare_pairs, first_divergence, indel_ratio, prefix_token_match


def test_it_gives_a_symmetric_ratio_where_difflib_autojunk_does_not():
    # difflib's autojunk treats characters frequent in the *second* text (>1% of 200+) as junk,
    # so its ratio depends on argument order; the Indel ratio does not.
    a = (
        "model model code tier code fast token token base a base code a token code base "
        "model model the fast a model base of base tier the a of model the code answer "
        "code a the a model code code a tier a base a the code the model of a token model"
        " the the answer"
    )
    b = (
        "code a fast a model a fast base tier of the answer token the code a tier model "
        "fast base token code of model the of of base answer fast a code token of the "
        "token tier code answer fast base tier fast of answer the token a base the answer"
        " fast of"
    )
    assert (
        difflib.SequenceMatcher(None, a, b).ratio() != difflib.SequenceMatcher(None, b, a).ratio()
    )
    assert indel_ratio(a, b) == indel_ratio(b, a)


def test_it_computes_the_indel_ratio():
    assert indel_ratio("abc", "abc") == 1.0
    assert indel_ratio("", "") == 1.0
    assert indel_ratio("abc", "xyz") == 0.0
    assert indel_ratio("abcd", "abce") == pytest.approx(1 - 2 / 8)  # delete d, insert e


def test_it_finds_the_first_divergence():
    assert first_divergence("same", "same") is None
    assert first_divergence("abcX", "abcY") == 3
    assert first_divergence("abc", "abcdef") == 3  # a prefix diverges where it ends
    assert first_divergence("héllo 🙂x", "héllo 🙂y") == 7  # characters, not bytes


def test_it_matches_prefix_tokens():
    assert prefix_token_match("The answer is 42.", "The answer is 43.", k=3)
    assert not prefix_token_match("The answer is 42.", "The answer is 43.", k=4)
    assert not prefix_token_match("foo, bar", "foo. bar", k=2)  # punctuation is a token
    assert prefix_token_match("a  b\nc", "a b c", k=3)  # whitespace is not


def test_it_summarises_pairs():
    out = compare_pairs([("abcd", "abcd"), ("abcd", "abce"), ("xyz", "xya")])
    assert out["n"] == 3
    assert out["exact_match_rate"] == pytest.approx(1 / 3)
    assert out["first_divergence"] == [None, 3, 2]
    assert out["n_diverging"] == 2 and out["first_divergence_p50"] == 2.5
    assert out["ratios"][0] == 1.0 and len(out["ratios"]) == 3
    assert out["median_ratio"] == pytest.approx(0.75)
    assert compare_pairs([])["mean_ratio"] is None
