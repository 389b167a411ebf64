"""Reading the per-token logprobs a server returns (OpenAI's ``logprobs.content`` shape: each
entry a ``token``, its ``logprob`` and ``top_logprobs``), at a character position of the text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Entry = Mapping[str, Any]


def token_at(logprobs: Sequence[Entry] | None, pos: int) -> Entry | None:
    """The entry of the token covering character ``pos`` of the text the tokens spell (the last
    token when ``pos`` is at the very end); None without logprobs."""
    if not logprobs:
        return None
    end = 0
    for entry in logprobs:
        end += len(entry.get("token") or "")
        if end > pos:
            return entry
    return logprobs[-1]


def top_margin(entry: Entry | None) -> float | None:
    """Logprob of the best candidate minus the second best at one token: a near tie (well under
    1 nat) is where numerics flip a greedy choice. None with fewer than two candidates."""
    ranked = sorted(
        (
            t["logprob"]
            for t in (entry or {}).get("top_logprobs") or ()
            if t.get("logprob") is not None
        ),
        reverse=True,
    )
    return ranked[0] - ranked[1] if len(ranked) >= 2 else None


def logprob_gap(
    base_lp: Sequence[Entry] | None, fast_lp: Sequence[Entry] | None, pos: int
) -> dict[str, Any] | None:
    """At the first divergence: each tier's chosen token and logprob, and how much more the
    base tier preferred its own token over the fast tier's, ``gap`` = log p_base(own) −
    log p_base(fast's token) in nats (None when fast's token is not among base's top
    logprobs). A near tie (gap well under 1 nat) is what numerics flip; a confident different
    token is what a different model chooses."""
    base, fast = token_at(base_lp, pos), token_at(fast_lp, pos)
    if base is None or fast is None:
        return None
    top = {t.get("token"): t.get("logprob") for t in base.get("top_logprobs") or ()}
    alt = top.get(fast.get("token"))
    own = base.get("logprob")
    ranked = sorted((v for v in top.values() if v is not None), reverse=True)
    return {
        "base_token": base.get("token"),
        "base_logprob": own,
        "fast_token": fast.get("token"),
        "fast_logprob": fast.get("logprob"),
        "gap": (own - alt) if own is not None and alt is not None else None,
        "base_margin": (ranked[0] - ranked[1]) if len(ranked) >= 2 else None,
        "base_top": list(base.get("top_logprobs") or ())[:5],
        "fast_top": list(fast.get("top_logprobs") or ())[:5],
    }
