"""BFCL v4 tool-calling cases (Berkeley Function-Calling Leaderboard; Patil et al., "The
Berkeley Function Calling Leaderboard", ICML 2025), read from the ``bfcl-eval`` 2026.3.23 wheel
(Apache-2.0): ``bfcl_eval/data/BFCL_v4_<category>.json`` (one JSON object per line: ``id``,
``question`` = turns of messages, ``function`` = the functions offered) and
``possible_answer/BFCL_v4_<category>.json`` (``ground_truth``: a list of calls, each
``{function: {param: [acceptable values]}}``; ``""`` among the values = the param may be left
out). The single-turn categories are loaded; multi-turn, memory and web-search need BFCL's
executable back-ends and are not.

BFCL writes parameter types in Python's words (``dict``, ``float``, ``tuple``, ``any``); they are
mapped to JSON Schema (``object``, ``number``, ``array``, no type), as BFCL itself does for
OpenAI-style models; a parameter whose default is ``None`` may be null. Function names may
contain dots, which the OpenAI and Anthropic APIs reject (``^[a-zA-Z0-9_-]{1,64}$``): dots
become underscores in the tools *and* the answers (BFCL's own OpenAI handler does the same).

The data is taken as shipped. Some possible answers contradict their own function's schema
(a string param answered ``True``, a list where a string is declared): built from the first
acceptable values, 2,239 of the 2,351 call cases check as correct; 110 (77 of them
``live_multiple``) fail ``jsonschema`` on BFCL's own answer and 2 fail the matching, so a tier
that gives those answers is counted wrong, on both tiers alike.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from evals.benchmarks.fetch import read_member
from evals.records import CaseSpec

DATA = "bfcl_eval/data/BFCL_v4_{}.json"
ANSWERS = "bfcl_eval/data/possible_answer/BFCL_v4_{}.json"
# BFCL category -> tierwatch category label ("tool_calls/<kind>")
CATEGORIES = {
    "simple_python": "tool_calls/simple",
    "multiple": "tool_calls/multiple",
    "parallel": "tool_calls/parallel",
    "parallel_multiple": "tool_calls/parallel_multiple",
    "irrelevance": "tool_calls/irrelevance",
    "live_simple": "tool_calls/live_simple",
    "live_multiple": "tool_calls/live_multiple",
    "live_parallel": "tool_calls/live_parallel",
    "live_parallel_multiple": "tool_calls/live_parallel_multiple",
    "live_irrelevance": "tool_calls/live_irrelevance",
}
NO_CALL = ("irrelevance", "live_irrelevance")  # no ground truth: not calling is correct
_TYPES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "int": "integer",
    "bool": "boolean",
    "str": "string",
    "list": "array",
}
_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name(name: str) -> str:
    """A BFCL function name as the APIs accept it."""
    return _NAME.sub("_", name)[:64]


def json_schema(params: Any) -> Any:
    """BFCL's parameter description as JSON Schema (a copy; ``optional`` markers dropped)."""
    if isinstance(params, list):
        return [json_schema(p) for p in params]
    if not isinstance(params, dict):
        return params
    out = {}
    for key, value in params.items():
        if key == "optional":
            continue
        if key == "type" and isinstance(value, str):
            if value == "any":
                continue
            value = _TYPES.get(value, value)
        elif key == "properties" and isinstance(value, dict):
            value = {k: json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "oneOf"):
            value = json_schema(value)
        else:
            value = copy.deepcopy(value)
        out[key] = value
    if "default" in out and out["default"] is None and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]  # BFCL's "default: None" means it may be null
    return out


def tool(function: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": tool_name(function["name"]),
        "description": function.get("description", ""),
        "parameters": json_schema(function.get("parameters") or {"type": "dict"}),
    }


def _rows(member: str) -> list[tuple[int, dict[str, Any]]]:
    text = read_member("bfcl-eval", member).decode("utf-8")
    return [(i, json.loads(line)) for i, line in enumerate(text.splitlines(), 1) if line.strip()]


def to_case(row: dict[str, Any], category: str, answer: dict[str, Any] | None) -> CaseSpec:
    """One BFCL row (and its possible answer) as a case; the first turn is the request."""
    if category not in CATEGORIES:
        raise ValueError(f"category: {category!r} is not a single-turn BFCL category")
    functions = row.get("function")
    question = row.get("question")
    if not isinstance(functions, list) or not functions:
        raise ValueError("function: must be a non-empty list")
    if not isinstance(question, list) or not question or not isinstance(question[0], list):
        raise ValueError("question: must be a list of turns (lists of messages)")
    if category in NO_CALL:
        answers: list[dict[str, Any]] = []
    else:
        truth = (answer or {}).get("ground_truth")
        if not isinstance(truth, list) or not truth:
            raise ValueError("ground_truth: missing possible answer for a call case")
        answers = [{tool_name(name): params for name, params in call.items()} for call in truth]
    return CaseSpec(
        key=f"bfcl/{row['id']}",
        messages=[{"role": m["role"], "content": m["content"]} for m in question[0]],
        category=CATEGORIES[category],
        max_tokens=256,
        difficulty="hard" if "multiple" in category or "parallel" in category else "easy",
        tools=[tool(f) for f in functions],
        tool_answers=answers,
    )


def load_cases(categories: list[str] | None = None, limit: int | None = None) -> list[CaseSpec]:
    """Cases of the given BFCL categories (all single-turn ones by default), ``limit`` each."""
    cases = []
    for category in categories or list(CATEGORIES):
        rows = _rows(DATA.format(category))[:limit]
        answers = (
            {} if category in NO_CALL else {r["id"]: r for _, r in _rows(ANSWERS.format(category))}
        )
        # four live_irrelevance rows offer no function at all: nothing to decide, left out
        cases += [
            to_case(r, category, answers.get(r["id"]))
            for _, r in rows
            if r.get("function") or category not in NO_CALL
        ]
    return cases
