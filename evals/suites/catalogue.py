"""The built-in suites by name, and the lookup of a built-in case from a request's text."""

from __future__ import annotations

import hashlib
from typing import Any

from evals.records import CaseSpec, SuiteSpec
from evals.suites import audit, coding, long_tail, scenarios, smoke

BUILTIN_SUITES: dict[str, SuiteSpec] = {
    s.name: s
    for s in (smoke.build(), coding.build(), long_tail.build(), scenarios.build(), audit.build())
}


def get_suite(name: str) -> SuiteSpec:
    """A built-in suite by name; KeyError lists the names there are."""
    try:
        return BUILTIN_SUITES[name]
    except KeyError:
        raise KeyError(f"no built-in suite {name!r}; have: {', '.join(BUILTIN_SUITES)}") from None


def _last_user_text(messages: list[dict[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # OpenAI content parts
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content if isinstance(content, str) else None
    return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_BY_TEXT: dict[str, CaseSpec] = {}
for _suite in BUILTIN_SUITES.values():
    for _case in _suite.cases:
        _text = _last_user_text(_case.messages)
        if _text is not None:
            _BY_TEXT.setdefault(_digest(_text), _case)


def find_case(messages: list[dict[str, Any]]) -> CaseSpec | None:
    """The built-in case whose last user message equals this request's, else None.

    Used by the simulated demo vendor to answer coding cases with their reference or weak
    solution. O(1): a dict keyed on the SHA-256 of the text. ``long_cold`` requests carry a
    filled nonce and so are not found (the demo vendor has no need to).
    """
    text = _last_user_text(messages)
    return None if text is None else _BY_TEXT.get(_digest(text))
