"""BFCL v4 multi-turn tasks read from the real wheel, as BFCL's own runner reads them."""

from __future__ import annotations

import json
import re

import pytest

from evals.benchmarks import bfcl_multi_turn as mt

pytestmark = pytest.mark.usefixtures("benchmark_wheels")


def test_it_loads_the_four_multi_turn_categories():
    tasks = mt.load_tasks()
    assert len(tasks) == 800
    assert len({t.key for t in tasks}) == 800
    assert {t.category for t in tasks} == set(mt.CATEGORIES.values())
    for task in tasks:
        assert len(task.turns) == len(task.ground_truth) and all(task.turns)
        assert task.long_context == (task.category == "agent/long_context")
        names = [t["name"] for t in task.tools]
        assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in names)


def test_it_holds_back_miss_func_functions_until_their_turn():
    task = mt.load_task("multi_turn_miss_func_0")
    assert task.added_tools.keys() == {3}
    assert [t["name"] for t in task.added_tools[3]] == ["sort"]
    assert "sort" not in {t["name"] for t in task.tools}
    # the held-back turn has no user message in BFCL's data: its own prompt is said instead
    assert task.turns[3] == [{"role": "user", "content": mt.ADDED_FUNCTIONS_PROMPT}]
    assert task.ground_truth[3] == ["sort('final_report.pdf')"]


def test_it_offers_every_function_of_the_involved_classes():
    task = mt.load_task("multi_turn_base_0")
    assert task.involved_classes == ["TwitterAPI", "GorillaFileSystem"]
    names = {t["name"] for t in task.tools}
    assert {"cd", "mv", "grep", "post_tweet"} <= names
    assert task.tools[0]["parameters"]["type"] == "object"  # BFCL's "dict" as JSON Schema


def test_every_ground_truth_call_parses_into_literal_arguments():
    for task in mt.load_tasks():
        for turn in range(len(task.turns)):
            for call in mt.truth_calls(task, turn):
                assert call["name"] in task.methods
                assert isinstance(json.loads(call["arguments_json"]), dict)


def test_it_names_positional_ground_truth_arguments_by_the_function_document():
    assert mt.parse_call("sort('final_report.pdf')") == ("sort", ["final_report.pdf"], {})
    task = mt.load_task("multi_turn_miss_func_0")
    assert mt.truth_calls(task, 3) == [
        {"name": "sort", "arguments_json": '{"file_name": "final_report.pdf"}'}
    ]
    with pytest.raises(ValueError):
        mt.parse_call("os.system('ls')")


def test_a_case_carries_its_task_and_gives_it_back():
    case = mt.load_cases(["multi_turn_long_context"], limit=1)[0]
    assert case.key == "bfcl/multi_turn_long_context_0" and case.category == "agent/long_context"
    assert case.agent is not None and case.agent["turns"] == len(mt.task_for(case).turns)
    assert case.messages == mt.task_for(case).turns[0]
