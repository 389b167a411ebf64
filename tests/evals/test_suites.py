"""The built-in suites: solutions checked in the real sandbox, sizes, keys, lookups."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import pytest

from evals import suites
from evals.constraints import check_all, validate_all
from evals.records import CaseSpec
from evals.sandbox import extract_code, run_unit_tests
from evals.suites import (
    BUILTIN_SUITES,
    NONCE,
    SCENARIOS,
    fill_nonce,
    find_case,
    fits_context,
    get_suite,
)
from evals.tokens import estimate_tokens

ALL_CASES = [case for suite in BUILTIN_SUITES.values() for case in suite.cases]
CODING = get_suite("coding").cases
HARD = [c for c in CODING if c.difficulty == "hard"]

# A reply that meets every constraint of each constraints case: proof they can all be met.
GOOD_REPLIES = {
    "lt-multistep-warehouse": "240 - 84 = 156; 156 + 54 = 210; 210 - 70 = 140.\nANSWER: 140",
    "lt-multistep-schedule": "Shortest first: C, A, B; 175 minutes after 09:00.\nANSWER: 11:55 B",
    "lt-debug-keyerror": (
        "load_config lowercases every key, so the dict holds 'host', not 'Host'. Fix: "
        '`return Client(host=cfg["host"], port=int(cfg.get("port", 5432)))`. Second bug: '
        'cfg.get("Port") never matches either, so the port silently falls back to 5432.'
    ),
    "lt-rare-struct-alignment": (
        "'<hI' is 6 bytes: standard sizes, no padding. 'hI' uses native alignment, so 2 bytes "
        "of padding follow the short to align the 4-byte int, giving 8."
    ),
    "lt-old-python2-division": "7 / 2 is 3, 7 // 2 is 3 and -7 / 2 is -4: ints floor-divide.",
    "lt-rare-sqlite-rowid": "The table is empty, so the next rowid is 1.\nANSWER: 1",
    "lt-stacked-prefix-cache": (
        "- many requests share one long system prompt\n"
        "- the server keeps the attention keys and values of that prefix\n"
        "- a new request reuses them and skips most of the prefill\n"
        "- so the time to first token drops sharply"
    ),
    "lt-stacked-json-plan": (
        '{"name": "add orders index", "steps": ["create the index concurrently", '
        '"check query plans", "drop the old index"], "risk": "low"}'
    ),
    "lt-stacked-release-note": (
        "Release 2.4.0\n"
        "- a new export command writes CSV and JSON files for every saved report\n"
        "- startup is twice as fast thanks to lazy imports of plugins\n"
        "- breaking change: the --out flag is now called --output in every command\n"
        "Upgrade: pip install -U tool"
    ),
    "lt-cross-file-client": (
        "- `fetch_user` does not exist: call `get_user`\n"
        "- its keyword is `uid`, not `user_id`: `client.get_user(uid=user_id)`\n"
        "- pages start at 1, so `list_users(page=0)` must be `list_users(page=1)`"
    ),
    "lt-cross-file-config-keys": '["database.pool", "retry.max_retries"]',
}


def _text(case) -> str:
    return case.messages[-1]["content"]


@pytest.mark.parametrize("case", CODING, ids=lambda c: c.key)
def test_every_reference_solution_passes_its_tests_in_the_sandbox(case):
    result = run_unit_tests(case.reference_solution, case.unit_tests)
    assert result.passed, result.output
    assert result.n_tests >= 4


@pytest.mark.parametrize("case", HARD, ids=lambda c: c.key)
def test_every_weak_solution_fails_at_least_one_test(case):
    result = run_unit_tests(case.weak_solution, case.unit_tests)
    assert result.error_class is None, result.output  # it runs: wrong, not broken
    assert 1 <= result.n_failed < result.n_tests


def test_coding_is_half_hard_and_asks_for_one_python_block():
    assert len(CODING) >= 10 and len(HARD) * 2 == len(CODING)
    for case in CODING:
        assert "single ```python code block" in _text(case)
        assert f"def {case.entry_point}(" in case.reference_solution
        assert bool(case.weak_solution) == (case.difficulty == "hard"), case.key


def test_a_fenced_reference_solution_extracts_to_itself():
    for case in CODING:
        reply = f"Here you go:\n```python\n{case.reference_solution}```\n"
        assert extract_code(reply) == case.reference_solution.strip("\n")


def test_keys_are_unique_within_and_across_suites():
    for suite in BUILTIN_SUITES.values():
        keys = [c.key for c in suite.cases]
        assert len(keys) == len(set(keys)), suite.name
    assert len({c.key for c in ALL_CASES}) == len(ALL_CASES)


def test_find_case_finds_every_case_by_its_messages():
    assert len({_text(c) for c in ALL_CASES}) == len(ALL_CASES)  # no two cases share a text
    for case in ALL_CASES:
        assert find_case(case.messages) is case
    assert find_case([{"role": "user", "content": "never a case"}]) is None
    assert find_case([{"role": "system", "content": "only system"}]) is None


def test_find_case_reads_the_last_user_message_and_content_parts():
    case = CODING[0]
    messages = [
        {"role": "user", "content": "earlier"},
        {"role": "user", "content": [{"type": "text", "text": _text(case)}]},
        {"role": "assistant", "content": "a previous answer"},
    ]
    assert find_case(messages) is case


def test_prompt_sizes_are_in_their_scenarios_ranges():
    for case in ALL_CASES:
        low, high = SCENARIOS[case.scenario].prompt_tokens
        assert low <= estimate_tokens(_text(case)) <= high, case.key
        assert case.max_tokens <= max(SCENARIOS[case.scenario].max_tokens, 700), case.key


def test_the_speed_matrix_covers_each_scenario():
    matrix = {c.scenario for c in get_suite("scenarios").cases}
    assert matrix == {name for name, s in SCENARIOS.items() if s.in_matrix}
    for case in get_suite("scenarios").cases:
        assert case.max_tokens == SCENARIOS[case.scenario].max_tokens


def test_long_cached_cases_share_a_prefix_and_long_cold_ones_start_unique():
    cached = [_text(c) for c in get_suite("scenarios").cases if c.scenario == "long_cached"]
    assert len(cached) >= 2
    assert len(os.path.commonprefix(cached)) > 0.9 * len(cached[0])
    for case in get_suite("scenarios").cases:
        if case.scenario == "long_cold":
            a = fill_nonce(case.messages, "run1-1")[0]["content"]
            b = fill_nonce(case.messages, "run1-2")[0]["content"]
            assert len(os.path.commonprefix([a, b])) < 20 and NONCE not in a


def test_only_long_cold_cases_hold_the_nonce_placeholder():
    for case in ALL_CASES:
        assert (NONCE in _text(case)) == (case.scenario == "long_cold"), case.key


def test_fill_nonce_copies_and_leaves_other_cases_alone():
    case = get_suite("smoke").cases[0]
    assert fill_nonce(case.messages, "x") == case.messages
    assert fill_nonce(case.messages, "x") is not case.messages
    cold = next(c for c in ALL_CASES if c.scenario == "long_cold")
    filled = fill_nonce(cold.messages, "abc")
    assert "Request abc." in filled[0]["content"] and NONCE in cold.messages[0]["content"]
    assert find_case(filled) is None  # a filled nonce is a new text


def test_long_prompts_are_generated_deterministically():
    assert suites.scenarios.build() == get_suite("scenarios")
    assert suites.smoke.build() == get_suite("smoke")
    assert suites.text.codebase(7, 2000) == suites.text.codebase(7, 2000)
    assert suites.text.codebase(7, 2000) != suites.text.codebase(8, 2000)


# sha256 of each suite's content (as JSON) at its current version. A suite's version names its
# exact content: a change here without a version bump would merge old and new runs in one trend.
FINGERPRINTS = {
    ("smoke", 1): "fbf5ba4068db868603a7d7c425ee29173e9399ff4d39e0909bf56bb575032aba",
    ("coding", 1): "16ebe74c114c79b8f00716e45a53c041782a91d8860fdea0bbdf7ff73d3da7f6",
    ("long_tail", 1): "fceb4cc3cd24ee596f23abaa72f6eadfe22305993d30c14ca50c841ea8bd9633",
    ("scenarios", 1): "6f627934f58dbb8828261ae68cefc3bb8e40bf77272fe402d6e413cca825798b",
    ("audit", 1): "bed7ffaa940626d9c821e54ba943a4d1498ffb749121b0c8abbcccd53a4f62d4",
}


def _content(suite) -> dict:
    """The suite as data, each case without the fields left at their default: a field added to
    CaseSpec later (with a default) is no change of content."""
    defaults = {
        f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
        for f in dataclasses.fields(CaseSpec)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    }
    data = dataclasses.asdict(suite)
    data["cases"] = [
        {k: v for k, v in case.items() if k not in defaults or v != defaults[k]}
        for case in data["cases"]
    ]
    return data


@pytest.mark.parametrize("name", list(BUILTIN_SUITES))
def test_a_suite_content_changes_only_with_its_version(name):
    suite = get_suite(name)
    text = json.dumps(_content(suite), sort_keys=True)
    assert FINGERPRINTS.get((name, suite.version)) == hashlib.sha256(text.encode()).hexdigest(), (
        f"suite {name!r} version {suite.version}: content differs from its recorded fingerprint; "
        "bump the suite's version and record the new sha256 in FINGERPRINTS"
    )


def test_xl_context_is_skipped_on_a_small_context_window():
    xl = next(c for c in ALL_CASES if c.scenario == "xl_context")
    assert not fits_context(xl, 8192)
    assert fits_context(xl, 32768) and fits_context(xl, None)
    assert fits_context(CODING[0], 4096)


def test_constraints_are_valid_specs_and_each_can_be_met():
    constrained = [c for c in ALL_CASES if c.constraints]
    assert {c.key for c in constrained} == set(GOOD_REPLIES)
    for case in constrained:
        validate_all(case.constraints)
        n_passed, n_total, failures = check_all(GOOD_REPLIES[case.key], case.constraints)
        assert n_passed == n_total, (case.key, failures)


def test_stacked_constraints_catch_a_near_miss():
    case = next(c for c in ALL_CASES if c.key == "lt-stacked-prefix-cache")
    near_miss = GOOD_REPLIES[case.key].replace("prompt", "prompt, reused").upper()
    n_passed, n_total, failures = check_all(near_miss, case.constraints)
    assert n_passed == n_total - 2 and failures == ["all_lowercase()", "no_commas()"]


def test_the_long_tail_is_hard_and_covers_the_article_kinds():
    cases = get_suite("long_tail").cases
    assert len(cases) >= 10 and all(c.difficulty == "hard" for c in cases)
    keys = " ".join(c.key for c in cases)
    for kind in ("multistep", "debug", "rare", "old", "stacked", "cross-file"):
        assert kind in keys, kind


def test_audit_has_enough_short_open_prompts():
    cases = get_suite("audit").cases
    assert len(cases) >= 25
    assert all(c.scenario == "short" and c.max_tokens <= 64 for c in cases)


def test_smoke_is_short_or_mid():
    cases = get_suite("smoke").cases
    assert 6 <= len(cases) <= 10 and {c.scenario for c in cases} <= {"short", "mid"}


def test_get_suite_names_the_suites_it_has():
    assert get_suite("coding").version == 1
    with pytest.raises(KeyError, match="smoke"):
        get_suite("nope")
