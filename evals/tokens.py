"""An offline estimate of how many tokens a text holds.

Why an estimate: the exact count needs the vendor's tokenizer. ``tiktoken`` downloads its
vocabulary files at run time, which this project cannot rely on (no network besides package
registries, no model files), and every vendor tokenizes differently anyway. docs/measures.md takes
the server's ``usage.completion_tokens`` first and this count as a cross-check (flag a >10%
difference), so an estimate within ~10-15% on English prose and code is what is needed.

How: the pre-tokenizer of GPT-style BPE vocabularies (cl100k's split regex, approximated with
the standard ``re`` module, which lacks ``\\p{L}``) cuts the text into words with their leading
space, runs of at most 3 digits, punctuation runs and whitespace runs. Common English words are
one token after that split; long words become ~1 token per 4 characters (the usual rule of
thumb for BPE on English), and non-ASCII letters (CJK and the like) ~1 token each.
"""

from __future__ import annotations

import functools
import re

# cl100k: '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*|
#          \s*[\r\n]|\s+(?!\S)|\s+      ([^\W\d_] is "a letter" in ``re``)
_PRETOKEN = re.compile(
    r"'(?:[sdmtSDMT]|ll|ve|re|LL|VE|RE)"
    r"|[^\r\n\w]?[^\W\d_]+"
    r"|\d{1,3}"
    r"| ?(?:[^\s\w]|_)+[\r\n]*"
    r"|\s*[\r\n]"
    r"|\s+(?!\S)"
    r"|\s+"
)
_SHORT = 8  # a piece up to this many ASCII characters (leading space included) is one token
_PER_TOKEN = 4  # characters per token for longer ASCII pieces


def _piece_count(piece: str) -> int:
    if len(piece) <= _SHORT and piece.isascii():
        return 1
    non_ascii = sum(1 for c in piece if not c.isascii())
    ascii_chars = len(piece) - non_ascii
    return max(1, -(-ascii_chars // _PER_TOKEN) + non_ascii)


def estimate_tokens(text: str) -> int:
    """Estimated number of BPE tokens in ``text`` (0 for the empty string)."""
    if len(text) <= 32:  # streamed deltas: few distinct short strings, counted once each
        return _estimate_short(text)
    return sum(_piece_count(p) for p in _PRETOKEN.findall(text))


@functools.lru_cache(maxsize=16_384)
def _estimate_short(text: str) -> int:
    return sum(_piece_count(p) for p in _PRETOKEN.findall(text))


def token_pieces(text: str) -> list[str]:
    """``text`` cut into token-sized pieces, as many as :func:`estimate_tokens` counts.

    ``"".join(token_pieces(t)) == t`` and ``len(token_pieces(t)) == estimate_tokens(t)``; the
    simulated demo vendor streams these pieces so that its usage counts agree with the estimate.
    """
    out: list[str] = []
    for piece in _PRETOKEN.findall(text):
        n = _piece_count(piece)
        if n == 1:
            out.append(piece)
            continue
        # split into n nearly equal parts (n >= 2 here, so every part is non-empty)
        size, extra = divmod(len(piece), n)
        start = 0
        for i in range(n):
            end = start + size + (1 if i < extra else 0)
            out.append(piece[start:end])
            start = end
    return out
