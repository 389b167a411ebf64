"""Texts as the two-sample test should see them: what is a formatting difference is removed.

A leading space on one tier's outputs, a trailing newline, or accents in decomposed (NFD)
rather than composed (NFC) form are serving-stack formatting, not a different model; the
character kernel would count every shifted position as a difference. So each text is put in
Unicode NFC (UAX #15) and stripped of surrounding whitespace before testing. Empty answers
(after that) are not texts to compare: they are counted per tier and tested as a rate of their
own (:func:`evals.stats.labels.rate_test`), as are failed requests. Any code point survives,
including lone surrogates and NUL (:func:`evals.stats.mmd.encode`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Hashable, Mapping, Sequence


def normalise(text: str) -> str:
    """NFC, then surrounding whitespace stripped."""
    return unicodedata.normalize("NFC", text).strip()


def prepare(
    samples: Mapping[Hashable, Sequence[str]],
) -> tuple[dict[Hashable, list[str]], int]:
    """(normalised non-empty texts per prompt, number of empty answers dropped)."""
    out, empty = {}, 0
    for key, texts in samples.items():
        kept = [t for t in (normalise(x) for x in texts) if t]
        empty += len(texts) - len(kept)
        out[key] = kept
    return out, empty
