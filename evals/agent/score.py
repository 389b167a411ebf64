"""An episode scored as BFCL scores a multi-turn entry (docs/measures.md, "Multi-turn agent tasks").

BFCL's ``multi_turn_checker`` (``eval_checker/multi_turn_eval/multi_turn_checker.py``), turn by
turn, on fresh instances of the task's classes: the model's calls of the turn are executed on
one set, the ground truth's on another; where the ground truth expects calls, the turn passes
when the model made at least one (``empty_turn_model_response``), every public attribute of
every instance equals the ground truth's (``instance_state_mismatch``), and every result of the
ground truth's calls of this turn is among the results of all the model's calls so far,
unordered and counting repeats (``execution_response_mismatch``). The first failing turn fails
the task; a turn with no expected call is not checked (BFCL's runner does not apply its
irrelevance checker to these categories). An episode that did not play every turn is BFCL's
``force_terminated``. Both sets run in one sandboxed environment
(:class:`evals.agent.environment.Environment`), so the model's arguments are executed only
there, and the ground truth's call strings are parsed (``ast``) into literal arguments, never
evaluated.

An episode that stopped on a vendor error, its time or request limit, or an environment error
is not passed, with that stop as its ``failure`` (``error``, ``timeout``,
``environment_error``): not a BFCL verdict, so the product can tell them apart.
"""

from __future__ import annotations

import json
from typing import Any

from evals.agent.environment import Environment, EnvironmentFailure, EnvLimits
from evals.agent.records import AgentTask, Episode, TaskScore, TurnScore
from evals.benchmarks.bfcl_multi_turn import parse_call


def _unordered_missing(expected: list[str], got: list[str]) -> list[str]:
    """BFCL's ``_is_subsequence_unordered``: the items of ``expected`` not in ``got``, each
    item of ``got`` used once."""
    left, missing = list(got), []
    for item in expected:
        if item in left:
            left.remove(item)
        else:
            missing.append(item)
    return missing


def _arguments(arguments_json: str) -> dict[str, Any] | None:
    try:
        value = json.loads(arguments_json or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def score_episode(
    task: AgentTask, episode: Episode, *, env_limits: EnvLimits | None = None
) -> TaskScore:
    """The episode's :class:`TaskScore` (blocking: plays both sets in a sandbox)."""
    score = TaskScore(task.key, episode.tier, passed=False, state_ok=False, response_ok=False)
    if episode.stop != "done" or episode.turns_done < len(task.turns):
        score.failure = (
            "force_terminated" if episode.stop in ("done", "step_limit") else episode.stop
        )
        score.first_failing_turn = episode.turns_done
        return score
    try:
        with Environment(
            task.involved_classes,
            task.initial_config,
            long_context=task.long_context,
            limits=env_limits,
        ) as env:
            _check(task, episode, env, score)
    except EnvironmentFailure as exc:
        score.passed = score.state_ok = score.response_ok = False
        score.failure = "environment_error"
        score.turns.append(
            TurnScore(len(score.turns), True, False, False, {"environment": str(exc)})
        )
        score.first_failing_turn = len(score.turns) - 1
    return score


def _check(task: AgentTask, episode: Episode, env: Environment, score: TaskScore) -> None:
    model_results: list[str] = []
    for turn, truth in enumerate(task.ground_truth):
        steps = []
        for calls in episode.calls(turn):  # a step whose calls cannot be decoded is skipped
            decoded = [(c, _arguments(c.arguments_json)) for c in calls]
            if all(kwargs is not None for _, kwargs in decoded):
                steps.append(decoded)
        for decoded in steps:
            for call, kwargs in decoded:
                method = task.methods.get(call.name, call.name)
                model_results.append(env.call(method, [], kwargs or {}, on="model"))
        truth_results = []
        for text in truth:
            method, args, kwargs = parse_call(text)
            truth_results.append(env.call(method, args, kwargs, on="truth"))
        if not truth:
            score.turns.append(TurnScore(turn, checked=False))
            continue
        if not steps:
            score.turns.append(TurnScore(turn, True, False, False))
            score.failure, score.first_failing_turn = "empty_turn_model_response", turn
            return
        valid, differences = env.compare("model", "truth")
        missing = _unordered_missing(truth_results, model_results)
        score.turns.append(TurnScore(turn, True, valid, not missing, differences, missing))
        if not valid or missing:
            score.state_ok, score.response_ok = valid, not missing
            score.failure = (
                "instance_state_mismatch" if not valid else "execution_response_mismatch"
            )
            score.first_failing_turn = turn
            return
    score.passed = score.state_ok = score.response_ok = True


def _signature(calls: list[Any]) -> list[tuple[str, Any]]:
    return [(c.name, _arguments(c.arguments_json)) for c in calls]


def first_divergence(a: Episode, b: Episode) -> tuple[int, int] | None:
    """(turn, step) where two episodes' calls first differ (name or arguments, as parsed), or
    where one has a step the other does not; None when they never do."""
    steps_a = {(s.turn, s.step): s for s in a.steps}
    steps_b = {(s.turn, s.step): s for s in b.steps}
    for key in sorted(steps_a.keys() | steps_b.keys()):
        sa, sb = steps_a.get(key), steps_b.get(key)
        if sa is None or sb is None or _signature(sa.calls) != _signature(sb.calls):
            return key
    return None
