"""The built-in suites: smoke, coding, long_tail, scenarios (the speed matrix) and audit.

Why these: the source article says half of a verification prompt set must be long-tail
(multi-step reasoning and debugging, rare APIs and old versions, many stacked constraints,
cross-file consistency), because that is where a distilled model loses to the model it imitates;
and that speed must be measured per scenario, because a vendor's "6x" comes from the favourable
one (long cached context, short output). ``audit`` feeds the two-sample test at temperature 1
(Gao, Liang & Guestrin, ICLR 2025: >= 25 prompts with short outputs).

Layout: the rules every run applies (scenarios, context needed, nonce) are in ``rules``; the
synthetic long texts in ``text``; the case data one module per suite (``smoke``, ``coding``,
``long_tail``, ``scenarios``, ``audit``, each with ``build()``); the catalogue by name and the
case lookup in ``catalogue``. This package re-exports what callers use.

Every text is fixed: the long prompts are generated from a seeded RNG, so a suite's version
names its exact content. Edit a case, bump its suite's version.
"""

from evals.suites.catalogue import BUILTIN_SUITES, find_case, get_suite
from evals.suites.rules import (
    NONCE,
    SCENARIOS,
    Scenario,
    context_needed,
    fill_nonce,
    fits_context,
    prompt_estimate,
)

__all__ = [
    "BUILTIN_SUITES",
    "NONCE",
    "SCENARIOS",
    "Scenario",
    "context_needed",
    "fill_nonce",
    "find_case",
    "fits_context",
    "get_suite",
    "prompt_estimate",
]
