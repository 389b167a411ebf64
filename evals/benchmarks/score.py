"""One answer, one outcome: the right checker for each kind of benchmark case.

A case is checked by what it carries, in this order: possible tool answers
(:mod:`evals.benchmarks.toolcheck`), a response format (:mod:`evals.benchmarks.structured`),
unit tests (the sandbox; HumanEval cases through :mod:`evals.benchmarks.humaneval`, which puts
the problem's prompt before the answer), constraints (strict, as
:mod:`evals.benchmarks.instructions` defines it). A failed request (``ok`` false) is a failed
case: an empty answer does not pass a benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evals.benchmarks import humaneval, instructions, structured, toolcheck
from evals.records import CaseSpec, ChatRequest, TimingRecord
from evals.sandbox import extract_code, run_unit_tests


@dataclass(frozen=True)
class Outcome:
    passed: bool
    kind: str  # tool_call | structured | unit_tests | constraints | request_failed
    error_class: str | None = None
    detail: Any = None  # the checker's verdict object


def request_for(case: CaseSpec, **overrides: Any) -> ChatRequest:
    """The request a case sends (tools and response format included)."""
    fields: dict[str, Any] = {
        "messages": case.messages,
        "max_tokens": case.max_tokens,
        "tools": case.tools,
        "response_format": case.response_format,
    }
    return ChatRequest(**{**fields, **overrides})


def score(case: CaseSpec, record: TimingRecord, **sandbox: Any) -> Outcome:
    if not record.ok:
        return Outcome(False, "request_failed", record.error_class)
    if case.tool_answers is not None:
        verdict = toolcheck.check(case, record.tool_calls)
        return Outcome(verdict.correct, "tool_call", verdict.error_class, verdict)
    if case.response_format is not None:
        verdict_s = structured.check(case, record.text)
        return Outcome(verdict_s.valid, "structured", verdict_s.error_class, verdict_s)
    if case.unit_tests:
        if case.category == humaneval.CATEGORY:
            result = humaneval.evaluate(case, record.text, **sandbox)
        else:
            result = run_unit_tests(extract_code(record.text), case.unit_tests, **sandbox)
        return Outcome(result.passed, "unit_tests", result.error_class, result)
    if case.constraints:
        verdict_i = instructions.check(case, record.text)
        return Outcome(verdict_i.prompt_strict, "constraints", None, verdict_i)
    raise ValueError(f"{case.key}: nothing to check")
