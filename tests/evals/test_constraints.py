from __future__ import annotations

import pytest

from evals.constraints import CHECKS, check_all, validate

REPLY = """- alpha is first
- beta follows
- gamma ends

```python
print("hi")
```
done."""


@pytest.mark.parametrize(
    ("constraint", "expected"),
    [
        ({"kind": "max_words", "n": 15}, True),
        ({"kind": "max_words", "n": 5}, False),
        ({"kind": "min_words", "n": 10}, True),
        ({"kind": "min_words", "n": 100}, False),
        ({"kind": "max_chars", "n": 10}, False),
        ({"kind": "must_include", "terms": ["ALPHA", "gamma"]}, True),
        ({"kind": "must_include", "terms": ["ALPHA"], "case_sensitive": True}, False),
        ({"kind": "must_not_include", "terms": ["delta"]}, True),
        ({"kind": "must_not_include", "terms": ["delta", "Beta"]}, False),
        ({"kind": "starts_with", "prefix": "- alpha"}, True),
        ({"kind": "ends_with", "suffix": "done."}, True),
        ({"kind": "ends_with", "suffix": "done"}, False),
        ({"kind": "bullet_count", "n": 3}, True),
        ({"kind": "bullet_count", "min": 4}, False),
        ({"kind": "bullet_count", "max": 0, "numbered": True}, True),
        ({"kind": "code_block_count", "n": 1}, True),
        ({"kind": "code_block_count", "min": 2}, False),
        ({"kind": "all_lowercase"}, True),
        ({"kind": "no_commas"}, True),
        ({"kind": "line_count", "n": 7}, True),
        ({"kind": "matches_regex", "pattern": r"^- beta"}, True),
    ],
)
def test_it_checks_each_kind(constraint, expected):
    assert check_all(REPLY, [constraint])[0] == int(expected)


def test_it_checks_json_with_required_keys():
    assert check_all('{"a": 1, "b": 2}', [{"kind": "json_valid", "required_keys": ["a"]}])[0]
    assert check_all('```json\n{"a": 1}\n```', [{"kind": "json_valid"}])[0] == 1
    assert check_all("[1, 2]", [{"kind": "json_valid", "required_keys": ["a"]}])[0] == 0
    assert check_all("{'a': 1}", [{"kind": "json_valid"}])[0] == 0


def test_it_counts_stacked_constraints_and_names_failures():
    constraints = [
        {"kind": "all_lowercase"},
        {"kind": "no_commas"},
        {"kind": "max_words", "n": 5},
        {"kind": "must_include", "terms": ["tierwatch"]},
    ]
    n_passed, n_total, failures = check_all("Hello, tierwatch", constraints)
    assert (n_passed, n_total) == (2, 4)
    assert failures == ["all_lowercase()", "no_commas()"]


def test_it_rejects_all_lowercase_text_without_letters():
    assert check_all("123 !", [{"kind": "all_lowercase"}])[0] == 0


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"kind": "max_word", "n": 3}, "kind"),
        ({"n": 3}, "kind"),
        ({"kind": "max_words"}, "n"),
        ({"kind": "max_words", "n": "3"}, "n"),
        ({"kind": "max_words", "n": True}, "n"),
        ({"kind": "max_words", "n": -1}, "n"),
        ({"kind": "max_words", "n": 3, "limit": 4}, "limit"),
        ({"kind": "must_include", "terms": "abc"}, "terms"),
        ({"kind": "must_include", "terms": [1]}, "terms"),
        ({"kind": "bullet_count"}, "n"),
        ({"kind": "matches_regex", "pattern": "("}, "pattern"),
    ],
)
def test_it_rejects_a_bad_spec_naming_the_field(spec, field):
    with pytest.raises(ValueError, match=rf"constraints\[0\]\.{field}"):
        validate(spec)


def test_it_validates_before_checking():
    with pytest.raises(ValueError, match=r"constraints\[1\]\.kind"):
        check_all("x", [{"kind": "no_commas"}, {"kind": "nope"}])


def test_every_registered_check_is_a_predicate_on_text():
    for kind, check in CHECKS.items():
        assert callable(check.fn), kind
