"""The tool-call checker: BFCL's matching rules, the error classes, and KVV's metrics."""

from __future__ import annotations

import json

import pytest

from evals.benchmarks import bfcl
from evals.benchmarks.toolcheck import ToolVerdict, check, example_calls, tool_metrics
from evals.records import CaseSpec

WEATHER = {
    "name": "get_weather",
    "description": "",
    "parameters": {
        "type": "object",
        "required": ["city"],
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "days": {"type": "integer"},
            "lat": {"type": "number"},
        },
    },
}
TIME = {
    "name": "get_time",
    "description": "",
    "parameters": {
        "type": "object",
        "required": ["zone"],
        "properties": {"zone": {"type": "string"}},
    },
}


def case(answers, tools=(WEATHER, TIME)) -> CaseSpec:
    return CaseSpec(
        key="k",
        messages=[{"role": "user", "content": "q"}],
        tools=list(tools),
        tool_answers=answers,
    )


def call(name: str, **args) -> dict[str, str]:
    return {"name": name, "arguments_json": json.dumps(args)}


SIMPLE = case(
    [{"get_weather": {"city": ["San Francisco", "SF"], "unit": ["c", ""], "lat": [37.0]}}]
)


def test_it_accepts_any_possible_value_and_an_omitted_optional_param():
    assert check(SIMPLE, [call("get_weather", city="SF", unit="c", lat=37.0)]).correct
    assert check(SIMPLE, [call("get_weather", city="San Francisco", lat=37)]).correct


def test_it_compares_strings_after_bfcl_standardisation():
    assert check(SIMPLE, [call("get_weather", city="san-francisco", lat=37.0)]).correct


def test_it_rejects_a_wrong_value_a_missing_required_value_and_an_extra_param():
    wrong = check(SIMPLE, [call("get_weather", city="Oakland", lat=37.0)])
    assert (wrong.correct, wrong.error_class) == (False, "wrong_arguments")
    missing = check(SIMPLE, [call("get_weather", city="SF")])  # lat has no "" alternative
    assert missing.error_class == "wrong_arguments"
    extra = check(SIMPLE, [call("get_weather", city="SF", lat=37.0, days=3)])
    assert extra.error_class == "wrong_arguments"


def test_it_classifies_invalid_json_unknown_function_and_schema_mismatch():
    bad_json = check(SIMPLE, [{"name": "get_weather", "arguments_json": '{"city": "SF"'}])
    assert (bad_json.error_class, bad_json.n_schema_valid) == ("invalid_json", 0)
    not_object = check(SIMPLE, [{"name": "get_weather", "arguments_json": "[1]"}])
    assert not_object.error_class == "invalid_json"
    unknown = check(SIMPLE, [call("get_forecast", city="SF")])
    assert unknown.error_class == "unknown_function"
    mismatch = check(SIMPLE, [call("get_weather", city="SF", unit="kelvin", lat=37.0)])
    assert mismatch.error_class == "schema_mismatch" and "kelvin" in mismatch.detail
    wrong_type = check(SIMPLE, [call("get_weather", city="SF", lat="37")])
    assert wrong_type.error_class == "schema_mismatch"


def test_it_matches_parallel_calls_in_any_order_and_counts_them():
    parallel = case([{"get_weather": {"city": ["Paris"]}}, {"get_time": {"zone": ["CET"]}}])
    calls = [call("get_time", zone="CET"), call("get_weather", city="Paris")]
    assert check(parallel, calls).correct
    assert check(parallel, calls[:1]).error_class == "wrong_count"
    assert (
        check(parallel, [call("get_time", zone="CET"), call("get_time", zone="CET")]).error_class
        == "wrong_function"
    )


def test_it_says_no_call_is_right_for_irrelevance_and_wrong_otherwise():
    irrelevant = case([])
    assert check(irrelevant, []).correct
    assert check(irrelevant, [call("get_time", zone="UTC")]).error_class == "unwanted_call"
    assert check(SIMPLE, []).error_class == "no_call"
    with pytest.raises(ValueError, match="not a tool-call case"):
        check(case(None), [])


def test_it_accepts_the_first_possible_answer_of_real_bfcl_cases(benchmark_wheels):
    cases = bfcl.load_cases(["simple_python", "multiple", "parallel", "parallel_multiple"])
    correct = sum(check(c, example_calls(c)).correct for c in cases)
    # a few BFCL ground truths contradict their own schema (e.g. True for a string param)
    assert correct >= 0.99 * len(cases)


def verdict(called: bool, correct: bool = True, calls: int = 1, valid: int = 1) -> ToolVerdict:
    return ToolVerdict(correct, called, calls if called else 0, valid if called else 0)


def test_it_computes_decision_f1_and_schema_accuracy_between_tiers():
    base = {"a": verdict(True), "b": verdict(True), "c": verdict(False), "d": verdict(True)}
    fast = {
        "a": verdict(True),
        "b": verdict(False, False),
        "c": verdict(True, False, 1, 0),
        "d": verdict(True, False, 2, 1),
        "only_fast": verdict(True),
    }
    m = tool_metrics(fast, base)
    assert m.n == 4
    # both called on a, d; fast called a, c, d; base called a, b, d
    assert m.decision_precision == pytest.approx(2 / 3)
    assert m.decision_recall == pytest.approx(2 / 3)
    assert m.decision_f1 == pytest.approx(2 / 3)
    assert m.schema_accuracy_fast == pytest.approx(2 / 4)
    assert m.schema_accuracy_base == 1.0
    assert (m.accuracy_fast, m.accuracy_base) == (0.25, 1.0)
