"""The runtime rules of suites: the speed scenarios, the context a case needs, the nonce.

Why apart from the case data: the planner, the run service and the context filter need these
rules on every run; the cases are data they are applied to.

``{nonce}``: the ``long_cold`` cases begin with this placeholder. The runner replaces it per
request (:func:`fill_nonce`), so no two requests share even their first tokens and a prefix
cache cannot help; ``long_cached`` sends the same documents without it, so a prefix cache can.
The pair measures what prefix caching is worth on an endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evals.records import CaseSpec
from evals.tokens import estimate_tokens

NONCE = "{nonce}"


@dataclass(frozen=True)
class Scenario:
    """One cell of the speed matrix: how long the prompt is, how long the output, and whether
    requests share a prefix. ``prompt_tokens`` is the intended range (our token estimate)."""

    name: str
    description: str
    prompt_tokens: tuple[int, int]
    max_tokens: int
    prefix: str = "none"  # shared | unique | none
    min_context_tokens: int = 0  # skip on endpoints whose context window is smaller
    in_matrix: bool = True


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            "long_cached",
            "~1k-token document shared by every case, short answer: the vendor-favoured case "
            "where a prefix cache skips most of the prefill",
            (800, 1300),
            16,
            prefix="shared",
        ),
        Scenario(
            "long_cold",
            "the same documents preceded by a per-request nonce: a unique prefix, so the whole "
            "prompt is prefilled (cold start)",
            (800, 1300),
            16,
            prefix="unique",
        ),
        Scenario(
            "short_long_out",
            "short prompt, ~400-token answer: decode-bound, where TPOT dominates",
            (10, 100),
            400,
        ),
        Scenario("mid", "~300 tokens in, ~100 out: a typical chat turn", (200, 450), 100),
        Scenario(
            "xl_context",
            "~10k-token document, short answer; skipped when an endpoint's context window is "
            "smaller than min_context_tokens (estimate + margin for other tokenizers)",
            (8000, 12500),
            16,
            prefix="shared",
            min_context_tokens=16384,
        ),
        Scenario(
            "task",
            "capability cases (coding, long-tail): lengths vary with the task, so they are kept "
            "out of the speed matrix",
            (20, 1200),
            700,
            in_matrix=False,
        ),
        Scenario(
            "short",
            "short prompt, short answer: smoke and audit cases, not part of the speed matrix",
            (5, 120),
            64,
            in_matrix=False,
        ),
    ]
}


def prompt_estimate(messages: list[dict[str, Any]]) -> int:
    """Our tokenizer estimate of a prompt (``evals.tokens``); other tokenizers differ."""
    return sum(estimate_tokens(m["content"]) for m in messages if isinstance(m.get("content"), str))


def context_needed(messages: list[dict[str, Any]], max_tokens: int, scenario: str) -> int:
    """Tokens an endpoint's context window must hold for a case: the prompt (our estimate) plus
    ``max_tokens`` (servers reject prompt + max_tokens above the window), and at least the
    scenario's ``min_context_tokens`` (a margin for tokenizers that count more than ours)."""
    floor = SCENARIOS[scenario].min_context_tokens if scenario in SCENARIOS else 0
    return max(prompt_estimate(messages) + max_tokens, floor)


def fits_context(case: CaseSpec, context_window: int | None) -> bool:
    """Whether ``case`` can run on an endpoint with this context window (None: unknown, run)."""
    need = context_needed(case.messages, case.max_tokens, case.scenario)
    return context_window is None or context_window >= need


def fill_nonce(messages: list[dict[str, str]], nonce: str) -> list[dict[str, str]]:
    """A copy of ``messages`` with every ``{nonce}`` replaced; other text is left as it is."""
    return [
        {**m, "content": m["content"].replace(NONCE, nonce)}
        if isinstance(m.get("content"), str)
        else dict(m)
        for m in messages
    ]
