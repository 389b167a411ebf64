"""The long-tail half the source article asks for: where a distilled model loses to the model it
was distilled from. Four categories, eight cases each (``data/longtail.yaml``):

- ``long_tail/multi_step_debugging`` — find and fix several bugs in a given function;
- ``long_tail/rare_apis`` — standard-library corners (graphlib, decimal contexts, struct
  layouts, calendar, ipaddress, fractions, bisect, difflib);
- ``long_tail/stacked_constraints`` — five or six verifiable constraints at once;
- ``long_tail/cross_file`` — code that must follow another file's conventions (money format,
  status history, settings access, row layout, error classes, units, event names, paging);
  the tests load that file's code into the solution's globals first.

Code cases are checked by their unit tests in the sandbox, the others by their constraints.
"""

from __future__ import annotations

from typing import Any

from evals.benchmarks.importer import builtin_cases
from evals.constraints import check_all
from evals.records import CaseSpec
from evals.sandbox import extract_code, run_unit_tests

CATEGORIES = (
    "long_tail/multi_step_debugging",
    "long_tail/rare_apis",
    "long_tail/stacked_constraints",
    "long_tail/cross_file",
)


def load_cases() -> list[CaseSpec]:
    return builtin_cases("long_tail/")


def passes(case: CaseSpec, text: str, **sandbox: Any) -> bool:
    """Whether a reply passes the case: its code passes the unit tests, or its text meets
    every constraint."""
    if case.unit_tests:
        return run_unit_tests(extract_code(text), case.unit_tests, **sandbox).passed
    return check_all(text, case.constraints)[2] == []
