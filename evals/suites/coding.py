"""The ``coding`` suite: ten cases run against unit tests in the sandbox; half long-tail.

Each case carries its unit tests, a reference solution (must pass) and, for the hard ones, a
weak solution (must fail): the simulated vendor's distilled tier answers with the weak one. The
cases are data (``data/coding.yaml``: code reads best as YAML block text); this module turns
them into ``CaseSpec`` with the fixed reply instruction and token budgets.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

from evals.records import CaseSpec, SuiteSpec
from evals.suites.text import user_message

DATA = "data/coding.yaml"
_REPLY = "\n\nReply with a single ```python code block and nothing else."
_FIELDS = ("key", "difficulty", "entry_point", "prompt", "unit_tests", "reference_solution")


def _case(raw: dict[str, Any], index: int) -> CaseSpec:
    missing = [f for f in _FIELDS if not isinstance(raw.get(f), str)]
    if missing or raw["difficulty"] not in ("easy", "hard"):
        raise ValueError(
            f"evals/suites/{DATA}, case {index} ({raw.get('key', '?')}): "
            f"{'missing or not text: ' + ', '.join(missing) if missing else 'difficulty'} "
            "(want key, difficulty easy|hard, entry_point, prompt, unit_tests, "
            "reference_solution; weak_solution optional)"
        )
    hard = raw["difficulty"] == "hard"
    weak = raw.get("weak_solution") or ""
    return CaseSpec(
        key=raw["key"],
        messages=user_message(raw["prompt"].strip() + _REPLY),
        category="coding",
        scenario="task",
        max_tokens=700 if hard else 400,
        difficulty=raw["difficulty"],
        unit_tests=raw["unit_tests"].strip() + "\n",
        entry_point=raw["entry_point"],
        reference_solution=raw["reference_solution"].strip() + "\n",
        weak_solution=weak.strip() + "\n" if weak else "",
    )


def build() -> SuiteSpec:
    text = resources.files("evals.suites").joinpath(DATA).read_text(encoding="utf-8")
    cases = [_case(raw, i) for i, raw in enumerate(yaml.safe_load(text)["cases"], start=1)]
    return SuiteSpec(
        "coding",
        1,
        "Ten coding cases run against unit tests in the sandbox; half are long-tail (multi-step "
        "debugging, a rare API, stacked constraints, cross-file consistency, ordering logic).",
        cases,
    )
