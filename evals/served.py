"""Which samples stand for the tier that was bought: the one gating rule (docs/measures.md,
"Gating on the tier served").

A vendor may serve a request on another tier than the one asked for (OpenAI's Priority
processing answers ``service_tier: "default"`` past its ramp limit; Anthropic's fast mode
reports ``usage.speed: "standard"``). Such a sample measures the other tier: averaged into the
fast tier's speed-up, it makes the fast tier look slower than it is when served, and into the
verdict it mixes two models' answers. So every figure about *the tier* (speed-ups, claims, the
audit verdict, capability) reads only the samples this rule keeps; the downgrade rate and
availability still count every sample, since being downgraded is itself what the user
measures.

Four states of one sample against its endpoint's expected tier:

- ``unchecked``: the endpoint expects no tier; nothing to gate.
- ``confirmed``: the vendor reported the expected tier.
- ``downgraded``: the vendor reported another tier. Left out unless the pair includes them.
- ``unconfirmed``: the vendor reported nothing. **Kept**: a missing field proves nothing
  either way (as in ``evals.latency.downgrades``), and a vendor that never reports would
  otherwise have no figures at all. The page says so instead: the speed-up is then of what
  the user was given, not of the tier.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Literal

State = Literal["unchecked", "confirmed", "downgraded", "unconfirmed"]
STATES: tuple[State, ...] = ("unchecked", "confirmed", "downgraded", "unconfirmed")


def served_state(served: str | None, expected: str | None) -> State:
    """The state of one sample: the tier it reported (``""``/None: none) against the tier its
    endpoint expects (``""``/None: not checked)."""
    if not expected:
        return "unchecked"
    if not served:
        return "unconfirmed"
    return "confirmed" if served == expected else "downgraded"


def counts_for_tier(
    served: str | None, expected: str | None, *, include_downgraded: bool = False
) -> bool:
    """Whether a sample counts in the tier's figures (speed-ups, claims, verdict, capability):
    everything but a downgraded sample, which counts only when the pair asks for it."""
    return include_downgraded or served_state(served, expected) != "downgraded"


def tally(pairs: Iterable[tuple[str | None, str | None]]) -> dict[str, int]:
    """State → samples, over (served, expected) pairs; every state present (0 when none)."""
    counts = Counter(served_state(s, e) for s, e in pairs)
    return {state: counts.get(state, 0) for state in STATES}


def never_confirmed(counts: dict[str, int]) -> bool:
    """True when a tier was expected and the vendor reported a tier for none of its samples:
    the speed-up is of what the user was given, not of the tier."""
    return counts.get("unconfirmed", 0) > 0 and not (
        counts.get("confirmed", 0) or counts.get("downgraded", 0)
    )


NEVER_CONFIRMED = (
    "this vendor never reports the tier served: the speed-up is of what you were given, "
    "not of the tier"
)
