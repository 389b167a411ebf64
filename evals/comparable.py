"""Which temperature-0 answers can be compared: the one rule behind every similarity.

Two answers are comparable when their requests were the same: same case (and run), same
repetition, and a prompt without a per-request nonce. A case whose messages carry
``evals.suites.NONCE`` (long_cold: a unique prefix so no cache can help) sent each request a
different prompt, so its answers may differ for that reason alone and are never paired.

- fast vs base: the fast and base answers of the same case and repetition (batch 0).
- base vs base (the noise floor): two independent base draws of the same case, batch 0 against
  batch 1 (audits) or, without a second batch, repetition 0 against repetition 1 (probes with
  repeat ≥ 2).

Pairs come in a fixed order (by group, then repetition), so a caller can zip them with
``compare_pairs``'s per-pair lists.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from evals.suites import NONCE


class Answer(Protocol):
    tier: str
    batch: int
    repetition: int
    ok: bool
    text: str


A = TypeVar("A", bound=Answer)
Messages = Sequence[Mapping[str, Any]]


def has_nonce(messages: Messages) -> bool:
    """Whether each request of these messages gets its own nonce (a different prompt)."""
    return any(NONCE in str(m.get("content", "")) for m in messages)


def comparable_pairs(
    answers: Iterable[A], *, group: Callable[[A], Hashable], messages: Callable[[A], Messages]
) -> dict[str, list[tuple[A, A]]]:
    """``{"fast_vs_base": [(fast, base)…], "base_vs_base": [(base, other base)…]}``.

    ``group`` names what the two tiers must share besides the repetition (the case; with the
    run when answers of several runs are mixed); ``messages`` gives an answer's case messages,
    for the nonce rule. Failed answers are left out."""
    slots: dict[tuple[str, int, Hashable], dict[int, A]] = defaultdict(dict)
    for a in answers:
        if a.ok and not has_nonce(messages(a)):
            slots[(a.tier, a.batch, group(a))][a.repetition] = a
    fast_base: list[tuple[A, A]] = []
    base_base: list[tuple[A, A]] = []
    for (tier, batch, key), reps in sorted(slots.items(), key=lambda kv: repr(kv[0][2])):
        if tier != "base" or batch != 0:
            continue
        fast = slots.get(("fast", 0, key), {})
        fast_base += [(fast[r], reps[r]) for r in sorted(reps) if r in fast]
        other = slots.get(("base", 1, key))
        if other:
            base_base += [(reps[r], other[r]) for r in sorted(reps) if r in other]
        elif 0 in reps and 1 in reps:
            base_base.append((reps[0], reps[1]))
    return {"fast_vs_base": fast_base, "base_vs_base": base_base}
