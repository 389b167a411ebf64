"""Episodes scored as BFCL's multi-turn checker scores them, on BFCL's own tasks."""

from __future__ import annotations

import json

import pytest

from evals.agent.records import Episode, Step, TaskScore, ToolCall
from evals.agent.score import first_divergence, score_episode
from evals.benchmarks import bfcl_multi_turn as mt
from evals.sandbox import isolation

pytestmark = [
    pytest.mark.usefixtures("benchmark_wheels"),
    pytest.mark.skipif(isolation() == "none", reason="no sandbox on this machine"),
]


def played(task, calls_per_turn) -> Episode:
    """An episode that made these calls, one step per turn, every turn finished."""
    episode = Episode(task.key, "fast", turns_done=len(task.turns))
    for turn, calls in enumerate(calls_per_turn):
        made = [
            ToolCall(c["name"], c["arguments_json"], f"t{turn}c{i}") for i, c in enumerate(calls)
        ]
        episode.steps.append(Step(turn, 0, True, calls=made))
        episode.steps.append(Step(turn, 1, True, text="Done."))
    return episode


def truth(task):
    return [mt.truth_calls(task, turn) for turn in range(len(task.turns))]


@pytest.mark.parametrize(
    "bfcl_id",
    [
        "multi_turn_base_0",
        "multi_turn_miss_func_0",
        "multi_turn_miss_param_0",
        "multi_turn_long_context_0",
    ],
)
def test_the_ground_truth_played_as_an_episode_passes(bfcl_id):
    task = mt.load_task(bfcl_id)
    score = score_episode(task, played(task, truth(task)))
    assert score.passed and score.state_ok and score.response_ok
    assert [t.checked for t in score.turns] == [bool(calls) for calls in task.ground_truth]


def test_a_wrong_argument_that_changes_the_state_fails_that_turn():
    task = mt.load_task("multi_turn_miss_func_0")  # turn 0: cd, mkdir temp, mv
    calls = truth(task)
    calls[0][1] = {"name": "mkdir", "arguments_json": json.dumps({"dir_name": "tmp"})}
    score = score_episode(task, played(task, calls))
    assert not score.passed and (score.failure, score.first_failing_turn) == (
        "instance_state_mismatch",
        0,
    )
    assert "GorillaFileSystem" in score.turns[0].differences


def test_a_missing_read_fails_on_the_responses_not_the_state():
    task = mt.load_task("multi_turn_miss_func_0")  # turn 1: cd temp, grep (reads only)
    calls = truth(task)
    calls[1] = calls[1][:1]
    score = score_episode(task, played(task, calls))
    assert (score.failure, score.first_failing_turn) == ("execution_response_mismatch", 1)
    assert score.turns[1].state_ok and not score.turns[1].response_ok
    assert score.turns[1].missing and "budget analysis" in score.turns[1].missing[0]


def test_a_turn_without_a_call_where_one_is_expected_fails():
    task = mt.load_task("multi_turn_base_0")
    calls = truth(task)
    calls[2] = []
    score = score_episode(task, played(task, calls))
    assert (score.failure, score.first_failing_turn) == ("empty_turn_model_response", 2)


def test_undecodable_arguments_do_not_count_as_a_call():
    task = mt.load_task("multi_turn_base_0")
    calls = truth(task)
    calls[0] = [{**calls[0][0], "arguments_json": "{not json"}, *calls[0][1:]]
    score = score_episode(task, played(task, calls))
    assert score.failure == "empty_turn_model_response" and score.first_failing_turn == 0


def test_an_unfinished_episode_is_force_terminated_and_a_failed_one_keeps_its_stop():
    task = mt.load_task("multi_turn_base_0")
    episode = played(task, truth(task)[:2])
    episode.turns_done, episode.stop = 2, "step_limit"
    assert score_episode(task, episode).failure == "force_terminated"
    episode.stop = "environment_error"
    score = score_episode(task, episode)
    assert (score.passed, score.failure, score.first_failing_turn) == (
        False,
        "environment_error",
        2,
    )


def test_scores_and_episodes_round_trip_through_json():
    task = mt.load_task("multi_turn_base_0")
    episode = played(task, truth(task))
    score = score_episode(task, episode)
    assert Episode.from_json(json.loads(json.dumps(episode.to_json()))) == episode
    assert TaskScore.from_json(json.loads(json.dumps(score.to_json()))) == score


def test_first_divergence_is_the_first_step_whose_calls_differ():
    task = mt.load_task("multi_turn_base_0")
    a = played(task, truth(task))
    b = played(task, truth(task))
    assert first_divergence(a, b) is None
    # the same arguments written differently are the same call
    b.steps[2].calls[0].arguments_json = json.dumps(
        json.loads(b.steps[2].calls[0].arguments_json), indent=1
    )
    assert first_divergence(a, b) is None
    b.steps[4].calls = []
    assert first_divergence(a, b) == (2, 0)
