"""Suites from files: parse and validate, all or nothing, errors as ``file:line: field: problem``.

Formats, told apart by the file name:

- ``*.jsonl`` / ``*.jsonl.gz`` whose rows have ``task_id`` + ``prompt`` + ``test``: HumanEval.
- ``*.json`` whose rows (one JSON object per line, BFCL's layout) have ``question`` +
  ``function``: BFCL; its possible answers from ``answers=`` (the matching
  ``possible_answer/`` file), its category from the file name (``BFCL_v4_<category>.json``).
- other ``*.jsonl``, and ``*.yaml`` / ``*.yml`` (a list of mappings, or ``{cases: [...]}``):
  tierwatch's own cases, the fields of :class:`~evals.records.CaseSpec` (``prompt`` may stand
  for a single user message).

:func:`parse_file` returns ``(cases, errors)``; with any error the cases must not be stored
(storing them, versioned and in one transaction, is the monitor's part). Nothing here touches
a database.
"""

from __future__ import annotations

import ast
import functools
import gzip
import io
import json
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from evals import constraints as constraint_checks
from evals.benchmarks import bfcl, humaneval
from evals.pysource import parse_module
from evals.records import CaseSpec

DATA_DIR = Path(__file__).parent / "data"
_FIELDS = {f.name for f in fields(CaseSpec)} | {"prompt"}
_ROLES = {"system", "user", "assistant"}
_KEY = re.compile(r"^[\w.:-]+(/[\w.:-]+)*$")  # segments of letters, digits, ._:- joined by /
MAX_KEY_CHARS = 120  # the stored case key's column
MAX_FILE_BYTES = 32 << 20  # the largest real file here (a BFCL category) is a few MiB
MAX_TEXT_BYTES = 64 << 20  # once decompressed: a 300 KB gzip bomb expanded to 829 MB before


def case_key_problem(key: object) -> str | None:
    """Why ``key`` cannot name a case, or None. A key is a URL path (``humaneval/111``) and a
    file name in exports, so ``../../etc/passwd``, ``/x`` or ``a//b`` are refused."""
    if not isinstance(key, str) or not key:
        return "required; a non-empty string"
    if len(key) > MAX_KEY_CHARS:
        return f"longer than {MAX_KEY_CHARS} characters"
    if not _KEY.match(key) or any(part in (".", "..") for part in key.split("/")):
        return (
            f"{key[:60]!r}: letters, digits and ._:- in parts joined by / (no . or .. part), "
            "e.g. coding/fizzbuzz"
        )
    return None


class ImportProblem(ValueError):
    """One bad field; ``str()`` is ``file:line: field: problem``."""


def _problem(path: str, line: int, field: str, problem: str) -> str:
    return f"{path}:{line}: {field}: {problem}"


def case_from_dict(row: dict[str, Any]) -> CaseSpec:
    """A tierwatch case from a mapping; ValueError("field: problem") on the first bad field."""
    if not isinstance(row, dict):
        raise ValueError(f"case: expected a mapping, got {type(row).__name__}")
    unknown = sorted(set(row) - _FIELDS)
    if unknown:
        raise ValueError(f"{unknown[0]}: not a case field")
    if problem := case_key_problem(row.get("key")):
        raise ValueError(f"key: {problem}")
    data = {k: v for k, v in row.items() if k != "prompt"}
    if "prompt" in row:
        if "messages" in row:
            raise ValueError("prompt: give prompt or messages, not both")
        if not isinstance(row["prompt"], str) or not row["prompt"].strip():
            raise ValueError("prompt: must be a non-empty string")
        data["messages"] = [{"role": "user", "content": row["prompt"]}]
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages: required, a non-empty list (or give prompt)")
    for i, m in enumerate(messages):
        if (
            not isinstance(m, dict)
            or m.get("role") not in _ROLES
            or not isinstance(m.get("content"), str)
        ):
            raise ValueError(f"messages[{i}]: needs role (system|user|assistant) and content")
    for name in (
        "category",
        "scenario",
        "unit_tests",
        "entry_point",
        "reference_solution",
        "weak_solution",
    ):
        if name in data and not isinstance(data[name], str):
            raise ValueError(f"{name}: must be a string")
    if len(data.get("category", "")) > 32:
        raise ValueError("category: at most 32 characters")
    if data.get("difficulty", "easy") not in ("easy", "hard"):
        raise ValueError("difficulty: easy or hard")
    max_tokens = data.get("max_tokens", 256)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError("max_tokens: a positive integer")
    if data.get("unit_tests"):
        _check_tests(data["unit_tests"])
    if "constraints" in data:
        if not isinstance(data["constraints"], list):
            raise ValueError("constraints: must be a list")
        constraint_checks.validate_all(data["constraints"])
    _check_tools(data)
    _check_format(data.get("response_format"))
    if not (
        data.get("unit_tests")
        or data.get("constraints")
        or "tool_answers" in data
        or data.get("response_format")
    ):
        raise ValueError(
            "case: nothing to check (give unit_tests, constraints, tool_answers or response_format)"
        )
    return CaseSpec(**data)


def _check_tests(tests: str) -> None:
    try:
        tree = parse_module(tests)
    except SyntaxError as exc:
        raise ValueError(f"unit_tests: syntax error at line {exc.lineno}: {exc.msg}") from None
    if not any(
        isinstance(n, ast.Assert) or isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
        for n in tree.body
    ):
        raise ValueError("unit_tests: no top-level assert and no test_* function")


def _check_tools(data: dict[str, Any]) -> None:
    tools = data.get("tools", [])
    if not isinstance(tools, list):
        raise ValueError("tools: must be a list")
    names = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise ValueError(f"tools[{i}].name: required string")
        try:
            jsonschema.Draft202012Validator.check_schema(tool.get("parameters") or {})
        except jsonschema.SchemaError as exc:
            raise ValueError(f"tools[{i}].parameters: not a JSON Schema: {exc.message}") from None
        names.add(tool["name"])
    answers = data.get("tool_answers")
    if answers is None:
        return
    if not tools:
        raise ValueError("tool_answers: given without tools")
    if not isinstance(answers, list):
        raise ValueError("tool_answers: a list of {function: {param: [values]}} ([] = no call)")
    for i, answer in enumerate(answers):
        if not isinstance(answer, dict) or len(answer) != 1:
            raise ValueError(f"tool_answers[{i}]: one {{function: {{param: [values]}}}}")
        ((name, params),) = answer.items()
        if name not in names:
            raise ValueError(f"tool_answers[{i}]: {name!r} is not among the tools")
        if not isinstance(params, dict) or not all(isinstance(v, list) for v in params.values()):
            raise ValueError(f"tool_answers[{i}].{name}: each param needs a list of values")


def _check_format(response_format: Any) -> None:
    if response_format is None:
        return
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "json_object":
        return
    if kind != "json_schema":
        raise ValueError("response_format.type: json_object or json_schema")
    schema = (response_format.get("json_schema") or {}).get("schema")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"response_format.json_schema.schema: {exc.message}") from None


class TooLarge(ValueError):
    """A file past ``MAX_FILE_BYTES``, or past ``MAX_TEXT_BYTES`` once decompressed."""


def _read_text(path: Path) -> str:
    """The file's text, read no further than the caps (apply_config's, for suite files)."""
    with path.open("rb") as f:
        raw = f.read(MAX_FILE_BYTES + 1)
    if len(raw) > MAX_FILE_BYTES:
        raise TooLarge(f"larger than {MAX_FILE_BYTES} bytes")
    if path.name.endswith(".gz"):
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as g:
            raw = g.read(MAX_TEXT_BYTES + 1)  # stops there, whatever the header claims
        if len(raw) > MAX_TEXT_BYTES:
            raise TooLarge(f"larger than {MAX_TEXT_BYTES} bytes once decompressed")
    return raw.decode("utf-8")


class _NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]
    """PyYAML's safe loader without anchors and aliases (489 bytes of aliases once stored a
    52 MB case that every run loaded)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise yaml.MarkedYAMLError(
                problem="anchors and aliases are not allowed", problem_mark=event.start_mark
            )
        return super().compose_node(parent, index)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _json_lines(path: Path, label: str, errors: list[str]) -> list[tuple[int, Any]]:
    rows = []
    for n, line in enumerate(_read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append((n, json.loads(line, parse_constant=_no_constant)))
        except json.JSONDecodeError as exc:
            errors.append(_problem(label, n, "line", f"not JSON: {exc.msg}"))
        except RecursionError:
            errors.append(_problem(label, n, "line", "nested too deeply"))
        except ValueError as exc:
            errors.append(_problem(label, n, "line", str(exc)))
    return rows


def _field_line(node: Any, field: str) -> int | None:
    """The line of ``field`` (``constraints[0].n``) inside a YAML node, as deep as it goes."""
    line = None
    for name, index in re.findall(r"([^.\[\]]+)|\[(\d+)\]", field):
        if name and isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value if k.value == name), None)
            if found is None:
                break
            line, node = found[0].start_mark.line + 1, found[1]
        elif index and isinstance(node, yaml.SequenceNode) and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _yaml_rows(path: Path, label: str, errors: list[str]) -> list[tuple[int, Any]]:
    try:
        # tierwatch's own data files (reviewed, in the repository) may share blocks by alias
        own = path.resolve().parent == DATA_DIR.resolve()
        node = yaml.compose(_read_text(path), Loader=yaml.SafeLoader if own else _NoAliasLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or exc
        errors.append(_problem(label, mark.line + 1 if mark else 1, "file", f"not YAML: {problem}"))
        return []
    except RecursionError:
        errors.append(_problem(label, 1, "file", "nested too deeply"))
        return []
    if isinstance(node, yaml.MappingNode):
        node = next((v for k, v in node.value if k.value == "cases"), None)
    if not isinstance(node, yaml.SequenceNode):
        errors.append(_problem(label, 1, "cases", "expected a list of cases"))
        return []
    return [
        (item.start_mark.line + 1, _Located(yaml.safe_load(yaml.serialize(item)), item))
        for item in node.value
    ]


class _Located(dict):  # type: ignore[type-arg]
    """A YAML case mapping that remembers its node, to name the line of a bad field."""

    def __init__(self, value: Any, node: Any) -> None:
        super().__init__(value if isinstance(value, dict) else {})
        self.value, self.node = value, node


def parse_file(
    path: str | Path, *, answers: str | Path | None = None, label: str | None = None
) -> tuple[list[CaseSpec], list[str]]:
    """All cases of one file, or the errors (``file:line: field: problem``), never half."""
    path = Path(path)
    label = label or path.name
    errors: list[str] = []
    name = path.name.lower()
    try:
        if name.endswith((".yaml", ".yml")):
            rows = _yaml_rows(path, label, errors)
        elif name.endswith((".jsonl", ".jsonl.gz", ".json")):
            rows = _json_lines(path, label, errors)
        else:
            return [], [_problem(label, 1, "file", "expected .jsonl, .jsonl.gz, .json or .yaml")]
    except TooLarge as exc:
        return [], [_problem(label, 1, "file", str(exc))]
    answer_rows: dict[Any, Any] = {}
    if answers is not None:
        answer_rows = {
            r.get("id"): r
            for _, r in _json_lines(Path(answers), Path(answers).name, errors)
            if isinstance(r, dict)
        }
    match = re.search(r"BFCL_v\d+_(\w+)\.json$", path.name)
    cases, keys = [], set()
    for line, row in rows:
        node = row.node if isinstance(row, _Located) else None
        row = row.value if isinstance(row, _Located) else row
        try:
            if isinstance(row, dict) and {"task_id", "prompt", "test"} <= set(row):
                case = humaneval.to_case(row)
            elif isinstance(row, dict) and {"question", "function"} <= set(row):
                category = match.group(1) if match else ""
                case = bfcl.to_case(row, category, answer_rows.get(row.get("id")))
            else:
                case = case_from_dict(row)
        except ValueError as exc:
            field, _, problem = str(exc).partition(": ")
            at = (_field_line(node, field) if node is not None else None) or line
            errors.append(_problem(label, at, field, problem or field))
            continue
        if case.key in keys:
            at = (_field_line(node, "key") if node is not None else None) or line
            errors.append(_problem(label, at, "key", f"duplicate key {case.key!r}"))
        keys.add(case.key)
        cases.append(case)
    if errors:  # in line order, whichever step found them
        numbered = re.compile(rf"^{re.escape(label)}:(\d+):")
        errors.sort(key=lambda e: int(m.group(1)) if (m := numbered.match(e)) else 0)
        return [], errors
    return cases, []


@functools.lru_cache(maxsize=1)
def _builtin() -> tuple[CaseSpec, ...]:
    cases = []
    for path in sorted(DATA_DIR.glob("*.yaml")):
        found, errors = parse_file(path)
        if errors:
            raise ValueError("\n".join(errors))
        cases += found
    return tuple(cases)


def builtin_cases(prefix: str = "") -> list[CaseSpec]:
    """tierwatch's own benchmark cases (``data/*.yaml``), optionally of one category prefix."""
    return [c for c in _builtin() if c.category.startswith(prefix)]
