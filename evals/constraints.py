"""Verifiable constraints on a reply's text, for "stacked constraints" cases.

Why: the source article names adherence to many constraints at once as a place where a distilled
model loses to the model it was distilled from, while a single-constraint prompt hides it. Each
check is a plain predicate ``(text, **params) -> bool`` that needs no model to judge, so the
pass rate of both tiers is exact (the IFEval idea: Zhou et al. 2023, "Instruction-Following
Evaluation for Large Language Models", verifiable instructions).

A constraint is a dict: ``{"kind": "max_words", "n": 50}``. Words are whitespace-separated
tokens; bullets are lines starting with ``-``, ``*`` or ``•`` (after indentation) or ``1.``-style
numbers when ``numbered`` is true.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"^\s*```", re.MULTILINE)
_BULLET = re.compile(r"^\s*(?:[-*•])\s+\S", re.MULTILINE)
_NUMBERED = re.compile(r"^\s*\d+[.)]\s+\S", re.MULTILINE)


def strip_fence(text: str) -> str:
    """Text without one surrounding ``` fence (models often wrap JSON in one)."""
    match = re.fullmatch(r"\s*```[\w-]*\n(.*?)\n?```\s*", text, re.DOTALL)
    return match.group(1) if match else text


def _contains(text: str, term: str, case_sensitive: bool) -> bool:
    return term in text if case_sensitive else term.lower() in text.lower()


def _count_ok(count: int, n: int | None, min: int | None, max: int | None) -> bool:
    return (
        (n is None or count == n)
        and (min is None or count >= min)
        and (max is None or count <= max)
    )


def max_words(text: str, n: int) -> bool:
    return len(text.split()) <= n


def min_words(text: str, n: int) -> bool:
    return len(text.split()) >= n


def max_chars(text: str, n: int) -> bool:
    return len(text.strip()) <= n


def must_include(text: str, terms: list[str], case_sensitive: bool = False) -> bool:
    return all(_contains(text, t, case_sensitive) for t in terms)


def must_not_include(text: str, terms: list[str], case_sensitive: bool = False) -> bool:
    return not any(_contains(text, t, case_sensitive) for t in terms)


def starts_with(text: str, prefix: str) -> bool:
    return text.strip().startswith(prefix)


def ends_with(text: str, suffix: str) -> bool:
    return text.strip().endswith(suffix)


def json_valid(text: str, required_keys: list[str] | None = None) -> bool:
    """The whole reply (or its one surrounding fence) is JSON; with keys, an object having them."""
    try:
        value = json.loads(strip_fence(text))
    except ValueError:
        return False
    if required_keys:
        return isinstance(value, dict) and all(k in value for k in required_keys)
    return True


def bullet_count(
    text: str,
    n: int | None = None,
    min: int | None = None,
    max: int | None = None,
    numbered: bool = False,
) -> bool:
    pattern = _NUMBERED if numbered else _BULLET
    return _count_ok(len(pattern.findall(text)), n, min, max)


def code_block_count(
    text: str,
    n: int | None = None,
    min: int | None = None,
    max: int | None = None,
) -> bool:
    return _count_ok(len(_FENCE.findall(text)) // 2, n, min, max)


def all_lowercase(text: str) -> bool:
    return text == text.lower() and any(c.isalpha() for c in text)


def no_commas(text: str) -> bool:
    return "," not in text and "，" not in text


def line_count(
    text: str,
    n: int | None = None,
    min: int | None = None,
    max: int | None = None,
) -> bool:
    return _count_ok(len([ln for ln in text.strip().splitlines() if ln.strip()]), n, min, max)


def matches_regex(text: str, pattern: str) -> bool:
    return re.search(pattern, text, re.MULTILINE) is not None


@dataclass(frozen=True)
class Check:
    fn: Callable[..., bool]
    required: dict[str, type]
    optional: dict[str, type]
    needs_one_of: tuple[str, ...] = ()  # at least one of these optional params must be given


_COUNT: dict[str, type] = {"n": int, "min": int, "max": int}
CHECKS: dict[str, Check] = {
    "max_words": Check(max_words, {"n": int}, {}),
    "min_words": Check(min_words, {"n": int}, {}),
    "max_chars": Check(max_chars, {"n": int}, {}),
    "must_include": Check(must_include, {"terms": list}, {"case_sensitive": bool}),
    "must_not_include": Check(must_not_include, {"terms": list}, {"case_sensitive": bool}),
    "starts_with": Check(starts_with, {"prefix": str}, {}),
    "ends_with": Check(ends_with, {"suffix": str}, {}),
    "json_valid": Check(json_valid, {}, {"required_keys": list}),
    "bullet_count": Check(bullet_count, {}, {**_COUNT, "numbered": bool}, ("n", "min", "max")),
    "code_block_count": Check(code_block_count, {}, _COUNT, ("n", "min", "max")),
    "line_count": Check(line_count, {}, _COUNT, ("n", "min", "max")),
    "all_lowercase": Check(all_lowercase, {}, {}),
    "no_commas": Check(no_commas, {}, {}),
    "matches_regex": Check(matches_regex, {"pattern": str}, {}),
}


def validate(constraint: dict[str, Any], index: int = 0) -> None:
    """Raise ValueError naming the bad field of one constraint spec."""
    where = f"constraints[{index}]"
    if not isinstance(constraint, dict):
        raise ValueError(f"{where}: must be a mapping, got {type(constraint).__name__}")
    kind = constraint.get("kind")
    if kind not in CHECKS:
        raise ValueError(f"{where}.kind: unknown kind {kind!r}; known: {', '.join(CHECKS)}")
    check = CHECKS[kind]
    params = {k: v for k, v in constraint.items() if k != "kind"}
    allowed = check.required | check.optional
    for name in params:
        if name not in allowed:
            raise ValueError(f"{where}.{name}: not a field of {kind}")
    for name in check.required:
        if name not in params:
            raise ValueError(f"{where}.{name}: required by {kind}")
    for name, value in params.items():
        expected = allowed[name]
        # bool is an int in Python; a count given as True is still a mistake.
        wrong_bool = isinstance(value, bool) and expected is not bool
        if wrong_bool or not isinstance(value, expected):
            raise ValueError(f"{where}.{name}: expected {expected.__name__}, got {value!r}")
        if expected is list and not all(isinstance(v, str) for v in params[name]):
            raise ValueError(f"{where}.{name}: expected a list of strings")
        if expected is int and params[name] < 0:
            raise ValueError(f"{where}.{name}: must be >= 0")
    if check.needs_one_of and not any(p in params for p in check.needs_one_of):
        raise ValueError(f"{where}.{check.needs_one_of[0]}: {kind} needs one of n, min, max")
    if kind == "matches_regex":
        try:
            re.compile(params["pattern"])
        except re.error as exc:
            raise ValueError(f"{where}.pattern: invalid regex: {exc}") from exc


def validate_all(constraints: list[dict[str, Any]]) -> None:
    for i, constraint in enumerate(constraints):
        validate(constraint, i)


def describe(constraint: dict[str, Any]) -> str:
    """A short human label: ``max_words(n=50)``."""
    params = ", ".join(f"{k}={v!r}" for k, v in constraint.items() if k != "kind")
    return f"{constraint['kind']}({params})"


def check_all(text: str, constraints: list[dict[str, Any]]) -> tuple[int, int, list[str]]:
    """(n_passed, n_total, failures) of ``text`` against every constraint; specs are validated
    first, so a typo in a case raises instead of counting as the model's failure."""
    validate_all(constraints)
    failures = []
    for constraint in constraints:
        params = {k: v for k, v in constraint.items() if k != "kind"}
        if not CHECKS[constraint["kind"]].fn(text, **params):
            failures.append(describe(constraint))
    return len(constraints) - len(failures), len(constraints), failures
