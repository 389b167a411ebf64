"""Structured output: does the reply honour the requested JSON format?

Cases (``data/structured.yaml``, category ``structured/json``) ask for OpenAI's
``response_format``: ``json_object`` (JSON mode: any JSON object) or ``json_schema`` (an
object valid against the given schema). A reply is *valid* when it parses as a JSON object (a
single surrounding code fence is forgiven, as :func:`evals.constraints.json_valid` does) and,
for a schema, validates with ``jsonschema``. The validity rate per tier is the share of valid
replies.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import jsonschema

from evals.benchmarks.importer import builtin_cases
from evals.constraints import strip_fence
from evals.records import CaseSpec

CATEGORY = "structured/json"


def load_cases() -> list[CaseSpec]:
    return builtin_cases(CATEGORY)


@dataclass(frozen=True)
class StructuredVerdict:
    valid: bool
    error_class: str | None = None  # invalid_json | not_object | schema_mismatch
    detail: str = ""


def check(case: CaseSpec, text: str) -> StructuredVerdict:
    fmt = case.response_format or {}
    try:
        value = json.loads(strip_fence(text))
    except ValueError as exc:
        return StructuredVerdict(False, "invalid_json", str(exc))
    if not isinstance(value, dict):
        return StructuredVerdict(False, "not_object", type(value).__name__)
    schema = (
        (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None
    )
    if schema is not None:
        try:
            jsonschema.validate(value, schema)
        except jsonschema.ValidationError as exc:
            return StructuredVerdict(False, "schema_mismatch", exc.message)
    return StructuredVerdict(True)


def validity_rate(verdicts: Iterable[StructuredVerdict]) -> float | None:
    rows = list(verdicts)
    return sum(v.valid for v in rows) / len(rows) if rows else None
