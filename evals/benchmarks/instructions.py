"""Instruction following: tierwatch's own prompts with verifiable instructions, scored the way
IFEval scores them (Zhou et al. 2023, "Instruction-Following Evaluation for Large Language
Models", section 3).

Each case (``data/instructions.yaml``, category ``instructions/verifiable``) stacks a few
instructions; each is a constraint of :mod:`evals.constraints`. Four accuracies:

- **prompt-level**: share of prompts whose every instruction is followed;
- **instruction-level**: share of all instructions followed;
- **strict**: on the reply as sent; **loose**: an instruction counts as followed if it holds on
  any of IFEval's eight transformed replies: the reply, without its first line, without its last
  line, without both, each with markdown emphasis (``*``) removed. Loose forgives a chatty
  preamble ("Sure, here it is:") or a sign-off that a strict reading counts as a violation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from evals.benchmarks.importer import builtin_cases
from evals.constraints import CHECKS, validate_all
from evals.records import CaseSpec

CATEGORY = "instructions/verifiable"


def load_cases() -> list[CaseSpec]:
    return builtin_cases(CATEGORY)


def loose_variants(text: str) -> list[str]:
    """IFEval's eight loose readings of a reply."""
    lines = text.split("\n")
    base = [
        text,
        "\n".join(lines[1:]).strip(),
        "\n".join(lines[:-1]).strip(),
        "\n".join(lines[1:-1]).strip(),
    ]
    return base + [v.replace("*", "") for v in base]


def _follows(text: str, constraint: dict[str, Any]) -> bool:
    params = {k: v for k, v in constraint.items() if k != "kind"}
    return bool(CHECKS[constraint["kind"]].fn(text, **params))


@dataclass(frozen=True)
class InstructionResult:
    strict: list[bool]  # per instruction
    loose: list[bool]

    @property
    def prompt_strict(self) -> bool:
        return all(self.strict)

    @property
    def prompt_loose(self) -> bool:
        return all(self.loose)


def check(case: CaseSpec, text: str) -> InstructionResult:
    validate_all(case.constraints)
    variants = [v for v in loose_variants(text) if v.strip()]
    strict = [_follows(text, c) for c in case.constraints]
    loose = [
        s or any(_follows(v, c) for v in variants)
        for s, c in zip(strict, case.constraints, strict=True)
    ]
    return InstructionResult(strict, loose)


@dataclass(frozen=True)
class Accuracy:
    n_prompts: int
    n_instructions: int
    prompt_strict: float | None
    prompt_loose: float | None
    instruction_strict: float | None
    instruction_loose: float | None


def accuracy(results: Iterable[InstructionResult]) -> Accuracy:
    rows = list(results)
    flat_s = [x for r in rows for x in r.strict]
    flat_l = [x for r in rows for x in r.loose]

    def share(values: list[bool]) -> float | None:
        return sum(values) / len(values) if values else None

    return Accuracy(
        n_prompts=len(rows),
        n_instructions=len(flat_s),
        prompt_strict=share([r.prompt_strict for r in rows]),
        prompt_loose=share([r.prompt_loose for r in rows]),
        instruction_strict=share(flat_s),
        instruction_loose=share(flat_l),
    )
