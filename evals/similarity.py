"""Temperature-0 diagnostics: how alike two tiers' answers to the same prompt are.

These are diagnostics, not the verdict: the same model on two serving stacks diverges at
temperature 0 (batch-variant kernels), so they are always read beside base-vs-base pairs.
The ratio is rapidfuzz's normalised Indel similarity, 1 − (insertions + deletions) /
(len a + len b) — symmetric, unlike difflib's SequenceMatcher whose default autojunk makes
ratio(a, b) ≠ ratio(b, a) on long texts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import Indel

# Words and single punctuation marks: closer to model tokens than whitespace splitting, so
# "foo," and "foo." differ on the punctuation token, not on the word.
TOKEN_RE = re.compile(r"\w+|[^\w\s]")
DEFAULT_PREFIX_K = 20


def indel_ratio(a: str, b: str) -> float:
    """Normalised Indel similarity in [0, 1]; 1 for identical texts (two empty ones too)."""
    return float(Indel.normalized_similarity(a, b))


def first_divergence(a: str, b: str) -> int | None:
    """Index of the first differing character, None when identical; when one text is a
    prefix of the other, the length of the shorter one."""
    if a == b:
        return None
    x = np.frombuffer(a.encode("utf-32-le"), dtype="<u4")
    y = np.frombuffer(b.encode("utf-32-le"), dtype="<u4")
    n = min(x.size, y.size)
    diff = np.flatnonzero(x[:n] != y[:n])
    return int(diff[0]) if diff.size else n


def prefix_token_match(a: str, b: str, k: int = DEFAULT_PREFIX_K) -> bool:
    """Whether the first k tokens (``TOKEN_RE``) agree; texts shorter than k tokens must
    agree on all their tokens and have as many."""
    return TOKEN_RE.findall(a)[:k] == TOKEN_RE.findall(b)[:k]


def compare_pairs(pairs: Sequence[tuple[str, str]], k: int = DEFAULT_PREFIX_K) -> dict[str, Any]:
    """Summary of many (a, b) answer pairs, plus the per-pair lists for plotting.

    ``first_divergence_p50`` is the median over the pairs that do diverge (identical pairs
    have no divergence position); ``n_diverging`` says how many that is.
    """
    n = len(pairs)
    if n == 0:
        return {
            "n": 0,
            "mean_ratio": None,
            "median_ratio": None,
            "exact_match_rate": None,
            "prefix_match_rate": None,
            "first_divergence_p50": None,
            "n_diverging": 0,
            "ratios": [],
            "first_divergence": [],
        }
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    ratios = process.cpdist(a, b, scorer=Indel.normalized_similarity, dtype=np.float64)
    divergence = [first_divergence(x, y) for x, y in pairs]
    diverging = [d for d in divergence if d is not None]
    return {
        "n": n,
        "mean_ratio": float(np.mean(ratios)),
        "median_ratio": float(np.median(ratios)),
        "exact_match_rate": (n - len(diverging)) / n,
        "prefix_match_rate": float(np.mean([prefix_token_match(x, y, k) for x, y in pairs])),
        "first_divergence_p50": float(np.median(diverging)) if diverging else None,
        "n_diverging": len(diverging),
        "ratios": ratios.tolist(),
        "first_divergence": divergence,
    }
