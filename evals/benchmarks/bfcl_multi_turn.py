"""BFCL v4 multi-turn agent tasks (Patil et al., "The Berkeley Function Calling Leaderboard",
ICML 2025), read from the ``bfcl-eval`` 2026.3.23 wheel (Apache-2.0), as BFCL's own runner reads
them.

- ``bfcl_eval/data/BFCL_v4_multi_turn_<kind>.json``, one JSON object a line: ``id``,
  ``question`` (turns, each a list of user messages; ``[]`` is the turn where miss_func's
  held-back functions arrive), ``initial_config`` (each class's starting state),
  ``involved_classes``, ``path``; miss_func adds ``missed_function`` ({turn: [names]}). The
  rows' ``excluded_function`` is not read by BFCL's code, so not here either.
- ``possible_answer/BFCL_v4_multi_turn_<kind>.json``: ``ground_truth``, per turn a list of call
  strings (``cd(folder='document')``); ``[]`` = no call is expected that turn.
- ``multi_turn_func_doc/<class file>.json``: each class's function documents. A task offers every
  function of its classes (``populate_test_cases_with_predefined_functions``), miss_func's
  held-back ones only from their turn, announced by BFCL's own user message
  (:data:`ADDED_FUNCTIONS_PROMPT`).

Tools are made API-safe as for the single-turn cases (:func:`evals.benchmarks.bfcl.tool`); the
task keeps each tool name's method. The executable environments are read from the same wheel by
:mod:`evals.agent.environment` when an episode runs.
"""

from __future__ import annotations

import ast
import functools
import json
from typing import Any

from evals.agent.records import AgentTask
from evals.benchmarks.bfcl import tool, tool_name
from evals.benchmarks.fetch import read_member
from evals.pysource import parse_expression
from evals.records import CaseSpec

DATA = "bfcl_eval/data/BFCL_v4_{}.json"
ANSWERS = "bfcl_eval/data/possible_answer/BFCL_v4_{}.json"
FUNC_DOC = "bfcl_eval/data/multi_turn_func_doc/{}"
# BFCL category -> tierwatch category label ("agent/<kind>")
CATEGORIES = {
    "multi_turn_base": "agent/base",
    "multi_turn_miss_func": "agent/miss_func",
    "multi_turn_miss_param": "agent/miss_param",
    "multi_turn_long_context": "agent/long_context",
}
# BFCL's MULTI_TURN_FUNC_DOC_FILE_MAPPING (constants/executable_backend_config.py)
FUNC_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}
# BFCL's DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC (constants/default_prompts.py)
ADDED_FUNCTIONS_PROMPT = "I have updated some more functions you can choose from. What about now?"
MAX_TOKENS = 1024  # per request of an episode


def _lines(member: str) -> list[dict[str, Any]]:
    text = read_member("bfcl-eval", member).decode("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@functools.lru_cache(maxsize=16)
def _func_docs(class_name: str) -> tuple[dict[str, Any], ...]:
    return tuple(_lines(FUNC_DOC.format(FUNC_DOC_FILES[class_name])))


@functools.lru_cache(maxsize=8)
def _category(category: str) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """A category's rows and possible answers by id, in file order."""
    if category not in CATEGORIES:
        raise ValueError(f"category: {category!r} is not a BFCL multi-turn category")
    answers = {row["id"]: row for row in _lines(ANSWERS.format(category))}
    return {row["id"]: (row, answers[row["id"]]) for row in _lines(DATA.format(category))}


def to_task(row: dict[str, Any], answer: dict[str, Any]) -> AgentTask:
    """One BFCL multi-turn row and its possible answer as a task."""
    bfcl_id = row["id"]
    category = bfcl_id.rsplit("_", 1)[0]
    if category not in CATEGORIES:
        raise ValueError(f"id: {bfcl_id!r} is not in a BFCL multi-turn category")
    question, truth = row.get("question"), answer.get("ground_truth")
    if not isinstance(question, list) or not isinstance(truth, list) or len(question) != len(truth):
        raise ValueError(f"{bfcl_id}: question and ground_truth must be lists of equal length")
    classes = list(row["involved_classes"])
    unknown = [c for c in classes if c not in FUNC_DOC_FILES]
    if unknown:
        raise ValueError(f"{bfcl_id}: involved_classes without an environment: {unknown}")
    functions = [dict(f) for c in classes for f in _func_docs(c)]
    held: dict[int, list[dict[str, Any]]] = {}
    for turn, names in (row.get("missed_function") or {}).items():
        for name in names:  # BFCL moves the first function of that name to its turn
            index = next(i for i, f in enumerate(functions) if f["name"] == name)
            held.setdefault(int(turn), []).append(functions.pop(index))
    turns = [
        [{"role": m["role"], "content": m["content"]} for m in messages]
        or ([{"role": "user", "content": ADDED_FUNCTIONS_PROMPT}] if i in held else [])
        for i, messages in enumerate(question)
    ]
    every = functions + [f for fs in held.values() for f in fs]
    return AgentTask(
        key=f"bfcl/{bfcl_id}",
        bfcl_id=bfcl_id,
        category=CATEGORIES[category],
        turns=turns,
        tools=[tool(f) for f in functions],
        added_tools={turn: [tool(f) for f in fs] for turn, fs in sorted(held.items())},
        methods={tool_name(f["name"]): f["name"] for f in every},
        involved_classes=classes,
        initial_config=row.get("initial_config") or {},
        ground_truth=[list(calls) for calls in truth],
        long_context="long_context" in category,
    )


def load_task(bfcl_id: str) -> AgentTask:
    """The task of one BFCL id (``multi_turn_base_0``)."""
    row, answer = _category(bfcl_id.rsplit("_", 1)[0])[bfcl_id]
    return to_task(row, answer)


def to_case(task: AgentTask) -> CaseSpec:
    """The task as a suite's case: its first turn's messages and tools, ``agent`` naming it."""
    return CaseSpec(
        key=task.key,
        messages=task.turns[0],
        category=task.category,
        max_tokens=MAX_TOKENS,
        difficulty="hard",
        tools=task.tools,
        agent={
            "source": "bfcl",
            "id": task.bfcl_id,
            "category": task.bfcl_id.rsplit("_", 1)[0],
            "involved_classes": task.involved_classes,
            "turns": len(task.turns),
        },
    )


def task_for(case: CaseSpec) -> AgentTask:
    """The whole task behind an agent case (read from the wheel, cached per process)."""
    if not case.agent or case.agent.get("source") != "bfcl":
        raise ValueError(f"{case.key}: not a BFCL agent case")
    return load_task(str(case.agent["id"]))


def load_tasks(categories: list[str] | None = None, limit: int | None = None) -> list[AgentTask]:
    """Tasks of the given multi-turn categories (all four by default), the first ``limit`` each."""
    tasks = []
    for category in categories or list(CATEGORIES):
        pairs = list(_category(category).values())[:limit]
        tasks += [to_task(row, answer) for row, answer in pairs]
    return tasks


def load_cases(categories: list[str] | None = None, limit: int | None = None) -> list[CaseSpec]:
    """The tasks as cases, for a suite."""
    return [to_case(task) for task in load_tasks(categories, limit)]


def parse_call(text: str) -> tuple[str, list[Any], dict[str, Any]]:
    """A ground-truth call string (``mv(source='a', destination='b')``) as (method, positional
    arguments, keyword arguments), every argument a Python literal."""
    node = parse_expression(text.strip()).body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {text!r}")
    args = [ast.literal_eval(a) for a in node.args]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
    return node.func.id, args, kwargs


def truth_calls(task: AgentTask, turn: int) -> list[dict[str, str]]:
    """Turn ``turn``'s ground truth as a model would send it: API names, JSON keyword
    arguments (a positional argument named by its function's parameter order)."""
    params = {
        t["name"]: list((t.get("parameters") or {}).get("properties") or {})
        for t in [*task.tools, *(f for fs in task.added_tools.values() for f in fs)]
    }
    names = {method: name for name, method in task.methods.items()}
    calls = []
    for text in task.ground_truth[turn]:
        method, args, kwargs = parse_call(text)
        name = names.get(method, method)
        kwargs = {**dict(zip(params.get(name, []), args, strict=False)), **kwargs}
        calls.append({"name": name, "arguments_json": json.dumps(kwargs)})
    return calls
