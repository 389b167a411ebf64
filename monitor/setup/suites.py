"""Suites in the database from the built-in ones in ``evals.suites`` (idempotent)."""

from __future__ import annotations

from django.db import transaction

from evals.records import CaseSpec, SuiteSpec
from evals.suites import get_suite
from monitor.models import Case, Pair, Suite


def case_fields(spec: CaseSpec) -> dict:
    """The Case columns of a spec; reference solutions stay in ``evals`` (demo vendor only)."""
    return {
        "category": spec.category,
        "scenario": spec.scenario,
        "difficulty": spec.difficulty,
        "messages": spec.messages,
        "max_tokens": spec.max_tokens,
        "unit_tests": spec.unit_tests,
        "entry_point": spec.entry_point,
        "constraints": spec.constraints,
        "tools": spec.tools,
        "tool_answers": spec.tool_answers,
        "response_format": spec.response_format,
        "agent": spec.agent,
    }


@transaction.atomic
def save_suite(*, spec: SuiteSpec) -> Suite:
    suite, _ = Suite.objects.update_or_create(
        name=spec.name, version=spec.version, defaults={"description": spec.description}
    )
    for case in spec.cases:
        Case.objects.update_or_create(suite=suite, key=case.key, defaults=case_fields(case))
    return suite


def sync_builtin_suite(*, name: str) -> Suite:
    return save_suite(spec=get_suite(name))


def audit_suite(pair: Pair) -> Suite:
    """Audits use the newest built-in ``audit`` suite (≥ 25 short open prompts, what the MMD
    test needs) when it is in the database, else the pair's own suite."""
    return Suite.objects.filter(name="audit").order_by("-version").first() or pair.suite
