"""The tool-call checker: is a tier's call right, and what kind of wrong is it?

Correctness follows BFCL's AST checker (Patil et al. 2025; ``bfcl_eval/eval_checker/
ast_eval``): the call's function name equals the possible answer's; every parameter the call
gives is in the answer and has one of its acceptable values; a parameter left out is allowed
only when ``""`` is among its values (optional); parallel calls match the answers in any order;
for the irrelevance categories, making no call is correct. Strings compare after BFCL's
standardisation (lower case, spaces and ``,./-_*^`` removed, ``'`` as ``"``); an integer is
accepted for a float; lists compare element by element, dicts key by key.

Error classes (OpenRouter's tool-call error taxonomy), checked before correctness, on every
call: ``invalid_json`` (the arguments are not a JSON object), ``unknown_function`` (a name not
offered), ``schema_mismatch`` (the arguments fail the function's JSON Schema, validated with
``jsonschema``). Wrong but well-formed answers are ``no_call``, ``unwanted_call``,
``wrong_count``, ``wrong_function`` or ``wrong_arguments``.

Between tiers (Moonshot's K2-Vendor-Verifier, "KVV"): **tool-call decision F1** takes the base
tier's decision to call a tool (or not) as the reference and the fast tier's as the
prediction, case by case: precision = both called / fast called, recall = both called / base
called, F1 their harmonic mean. **Schema accuracy** per tier = calls whose arguments parse and
validate / all calls.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema

from evals.records import CaseSpec

TOOL_ERROR_CLASSES = ("invalid_json", "unknown_function", "schema_mismatch")
WRONG_CLASSES = ("no_call", "unwanted_call", "wrong_count", "wrong_function", "wrong_arguments")
_STANDARD = re.compile(r"[ ,./\-_*^]")
_MAX_PERMUTED = 7  # parallel calls matched by trying orders up to 7! = 5040


@dataclass(frozen=True)
class ToolVerdict:
    correct: bool
    called: bool  # the tier decided to call at least one tool
    n_calls: int
    n_schema_valid: int  # calls whose arguments parse and validate
    error_class: str | None = None  # a TOOL_ERROR_CLASSES or WRONG_CLASSES value
    detail: str = ""


def _standard(text: str) -> str:
    return _STANDARD.sub("", text).lower().replace("'", '"')


def value_matches(value: Any, acceptable: Any) -> bool:
    """One given value against one acceptable value of a BFCL possible answer."""
    if isinstance(acceptable, dict):  # a dict param: {key: [acceptable values]}
        if not isinstance(value, dict) or set(value) - set(acceptable):
            return False
        return all(_param_ok(value, k, v) for k, v in acceptable.items())
    if isinstance(acceptable, bool) or isinstance(value, bool):
        return value is acceptable
    if isinstance(acceptable, int | float) and isinstance(value, int | float):
        return float(value) == float(acceptable)
    if isinstance(acceptable, str) and isinstance(value, str):
        return _standard(value) == _standard(acceptable)
    if isinstance(acceptable, list) and isinstance(value, list):
        return len(value) == len(acceptable) and all(
            value_matches(v, a) for v, a in zip(value, acceptable, strict=True)
        )
    return bool(value == acceptable)


def _alts(acceptable: Any) -> list[Any]:
    """A possible answer's alternatives (nested dict values are sometimes a bare value)."""
    return acceptable if isinstance(acceptable, list) else [acceptable]


def _param_ok(args: Mapping[str, Any], name: str, acceptable: Any) -> bool:
    acceptable = _alts(acceptable)
    if name not in args:
        return "" in acceptable
    return any(value_matches(args[name], a) for a in acceptable if a != "" or args[name] == "")


def call_matches(name: str, args: Mapping[str, Any], answer: Mapping[str, Any]) -> str | None:
    """None when the call is one of the answer's possibilities, else what differs."""
    ((want, params),) = answer.items()
    if name != want:
        return "wrong_function"
    extra = sorted(set(args) - set(params))
    if extra:
        return "wrong_arguments"
    for param, acceptable in params.items():
        if not _param_ok(args, param, acceptable):
            return "wrong_arguments"
    return None


def _parse(
    call: Mapping[str, str], schemas: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str | None, str]:
    name, raw = call.get("name", ""), call.get("arguments_json", "")
    try:
        args = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        return None, "invalid_json", f"{name}: {exc}"
    if not isinstance(args, dict):
        return None, "invalid_json", f"{name}: arguments are not a JSON object"
    if name not in schemas:
        return args, "unknown_function", f"{name!r} was not offered"
    try:
        jsonschema.validate(args, schemas[name])
    except jsonschema.ValidationError as exc:
        return args, "schema_mismatch", f"{name}: {exc.message}"
    return args, None, ""


def check(case: CaseSpec, tool_calls: Sequence[Mapping[str, Any]]) -> ToolVerdict:
    """A tier's calls (``TimingRecord.tool_calls``) against the case's possible answers."""
    if case.tool_answers is None:
        raise ValueError(f"{case.key}: not a tool-call case (no tool_answers)")
    schemas = {t["name"]: t.get("parameters") or {} for t in case.tools}
    parsed, first_error, detail, valid = [], None, "", 0
    for call in tool_calls:
        args, error, why = _parse(call, schemas)
        valid += error is None
        if error and first_error is None:
            first_error, detail = error, why
        parsed.append((call.get("name", ""), args or {}))
    base: dict[str, Any] = {
        "called": bool(tool_calls),
        "n_calls": len(tool_calls),
        "n_schema_valid": valid,
    }
    if first_error:
        return ToolVerdict(False, error_class=first_error, detail=detail, **base)
    answers = case.tool_answers
    if not answers:
        ok = not tool_calls
        return ToolVerdict(ok, error_class=None if ok else "unwanted_call", **base)
    if not tool_calls:
        return ToolVerdict(False, error_class="no_call", **base)
    if len(parsed) != len(answers):
        return ToolVerdict(
            False,
            error_class="wrong_count",
            detail=f"{len(parsed)} calls, {len(answers)} expected",
            **base,
        )
    if len(parsed) > _MAX_PERMUTED:
        orders: Any = [answers]
    else:
        orders = itertools.permutations(answers)
    worst = "wrong_function"
    for order in orders:
        misses = [call_matches(n, a, ans) for (n, a), ans in zip(parsed, order, strict=True)]
        if not any(misses):
            return ToolVerdict(True, **base)
        if all(m != "wrong_function" for m in misses):
            worst = "wrong_arguments"  # some order matched every name
    return ToolVerdict(False, error_class=worst, **base)


@dataclass(frozen=True)
class ToolMetrics:
    """KVV's metrics for one pair over the cases both tiers answered."""

    n: int
    decision_f1: float | None  # fast's call/no-call decisions against base's
    decision_precision: float | None
    decision_recall: float | None
    schema_accuracy_fast: float | None
    schema_accuracy_base: float | None
    accuracy_fast: float | None
    accuracy_base: float | None
    errors_fast: dict[str, int]
    errors_base: dict[str, int]


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def tool_metrics(fast: Mapping[str, ToolVerdict], base: Mapping[str, ToolVerdict]) -> ToolMetrics:
    keys = sorted(set(fast) & set(base))
    both = sum(fast[k].called and base[k].called for k in keys)
    fast_called = sum(fast[k].called for k in keys)
    base_called = sum(base[k].called for k in keys)
    precision, recall = _ratio(both, fast_called), _ratio(both, base_called)
    if precision is None or recall is None:
        f1 = 1.0 if fast_called == base_called == 0 and keys else None
    else:
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0

    def schema(side: Mapping[str, ToolVerdict]) -> float | None:
        return _ratio(sum(side[k].n_schema_valid for k in keys), sum(side[k].n_calls for k in keys))

    def errors(side: Mapping[str, ToolVerdict]) -> dict[str, int]:
        out: dict[str, int] = {}
        for k in keys:
            cls = side[k].error_class
            if cls:
                out[cls] = out.get(cls, 0) + 1
        return out

    return ToolMetrics(
        n=len(keys),
        decision_f1=f1,
        decision_precision=precision,
        decision_recall=recall,
        schema_accuracy_fast=schema(fast),
        schema_accuracy_base=schema(base),
        accuracy_fast=_ratio(sum(fast[k].correct for k in keys), len(keys)),
        accuracy_base=_ratio(sum(base[k].correct for k in keys), len(keys)),
        errors_fast=errors(fast),
        errors_base=errors(base),
    )


def _first(acceptable: Any) -> Any:
    value = next(v for v in _alts(acceptable) if v != "")
    if isinstance(value, dict):
        return {k: _first(v) for k, v in value.items() if any(x != "" for x in _alts(v))}
    return value


def example_calls(case: CaseSpec) -> list[dict[str, str]]:
    """A correct answer built from the possible answers (the first acceptable value of each
    param, optional ones left out): the SIMULATED base tier's answer, and a checker test."""
    calls = []
    for answer in case.tool_answers or ():
        ((name, params),) = answer.items()
        args = {p: _first(v) for p, v in params.items() if any(x != "" for x in v)}
        calls.append({"name": name, "arguments_json": json.dumps(args)})
    return calls
