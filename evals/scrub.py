"""Scrubbing the endpoint's API key out of everything a vendor or the sandbox sends back.

A vendor may echo the key anywhere (a 401 body, a header, ``service_tier``, a tool call's
arguments, the text, the code the sandbox runs), and not only verbatim: URL-encoded, in
base64 inside an ``Authorization`` value or a JSON object, in hex, reversed, with zero-width
characters between its letters or a Unicode hyphen for its ``-``. Fields are also cut to their
column's length, sometimes before they reach here, so a *piece* of the key must go too.

Three layers, each for what the one before cannot see:

1. encoded forms, matched directly: URL-encoded, hex, the last 6 characters of a masked key
   ("sk-abcd...wxyz"), and base64 of the key at each of the
   three byte alignments it can have inside a longer value (only the base64 groups made of
   key bytes alone, which are the same whatever surrounds the key);
2. any run of at least ``WINDOW`` consecutive characters of the key or of the key reversed,
   letter case ignored, zero-width characters allowed between them and any Unicode dash for
   a ``-``, full-width forms for its letters and digits: covers the verbatim key, a cut key
   and a masked key ("sk-abcd...wxyz");
3. a fail-closed net: the string folded (NFKC, invisible characters dropped, dashes unified,
   ``%XX`` and ``\\uXXXX`` decoded) is searched again; a string that still holds a piece of
   the key is withheld whole (``WITHHELD``).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import re
import unicodedata
import urllib.parse
from collections.abc import Callable
from typing import Any

MASK = "***"
WITHHELD = "*** (withheld: it held the endpoint's key in a form that could not be cut out)"
WINDOW = 8  # consecutive characters of the key that count as a piece of it
# format characters that render as nothing, and the Unicode dashes a "-" may be swapped for
_INVISIBLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0"
    "\ufffd\udc80-\udcff"  # what an undecodable byte between the letters becomes
)
_DASHES = "\\-\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\u2e3a\u2e3b\ufe58\ufe63\uff0d"
_INVISIBLE_RE = re.compile(f"[{_INVISIBLE}]")
_DASH_RE = re.compile(f"[{_DASHES}]")
_UNICODE_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")


class KeyScrubber:
    """Callable on a string; ``spans`` says where the key is (for texts split in tokens).

    Layer 2 searches a *skeleton* of the text (dashes and full-width forms made plain, lower
    case, invisible characters dropped) with plain ``str.find`` and maps what it finds back to
    the text's positions: a regex allowing a variant at each letter was far slower on the long
    texts of a coding answer."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._encoded = sorted({f.lower() for f in _encoded_forms(key)}, key=len, reverse=True)
        self._window = min(WINDOW, len(key))
        low = key.lower()
        self._windows = sorted(
            {
                t[i : i + self._window]
                for t in (low, low[::-1])
                for i in range(len(t) - self._window + 1)
            }
        )

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Merged ``(start, end)`` ranges of ``text`` that hold the key or a piece of it."""
        low = _plain(text)
        found = list(_finds(low, self._encoded))
        kept: list[int] | None = None
        if _INVISIBLE_RE.search(low):
            kept = [i for i, c in enumerate(low) if not _INVISIBLE_RE.match(c)]
            low = "".join(low[i] for i in kept)
        for start, end in _finds(low, self._windows):
            found.append((kept[start], kept[end - 1] + 1) if kept is not None else (start, end))
        merged: list[tuple[int, int]] = []
        for start, end in sorted(found):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged

    def still_holds(self, text: str) -> bool:
        """Does the folded text hold a piece of the key (the net of layer 3)?"""
        folded = fold(text)
        return any(w in folded for w in self._windows)

    def __call__(self, text: str) -> str:
        if not text:
            return text
        out, at = [], 0
        for start, end in self.spans(text):
            out += [text[at:start], MASK]
            at = end
        out.append(text[at:])
        cleaned = "".join(out)
        return WITHHELD if self.still_holds(cleaned) else cleaned


def fold(text: str) -> str:
    """``text`` as a reader would see it: escapes decoded, invisibles dropped, dashes unified,
    compatibility forms (full-width letters) made plain, lower case."""
    text = _UNICODE_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
    if "%" in text:
        text = urllib.parse.unquote_plus(text)
    text = unicodedata.normalize("NFKC", text)
    text = _DASH_RE.sub("-", _INVISIBLE_RE.sub("", text))
    return text.lower()


_PLAIN = {ord(d): "-" for d in _DASHES.replace("\\", "")} | {
    c: chr(c - 0xFEE0)
    for c in range(0xFF01, 0xFF5F)  # full-width ASCII
}


def _plain(text: str) -> str:
    """``text`` with dashes and full-width forms made plain, lower case, one character for
    one (so positions stay those of ``text``)."""
    low = text.translate(_PLAIN).lower()
    if len(low) != len(text):  # a letter whose lower case is two characters (İ)
        low = "".join(c if len(c.lower()) != 1 else c.lower() for c in text.translate(_PLAIN))
    return low


def _finds(text: str, needles: list[str]) -> list[tuple[int, int]]:
    out = []
    for needle in needles:
        at = text.find(needle)
        while at != -1:
            out.append((at, at + len(needle)))
            at = text.find(needle, at + 1)
    return out


def _encoded_forms(key: str) -> set[str]:
    raw = key.encode()
    forms = {urllib.parse.quote(key, safe=""), urllib.parse.quote_plus(key), raw.hex()}
    if len(key) >= 12:  # the first 8 / last 6 characters: how vendors show a masked key
        forms |= {key[:8], key[-6:]}
    for alignment in range(3):  # the key starting at byte 0, 1 or 2 of a base64 group
        start = (3 - alignment) % 3
        whole = raw[start : start + 3 * ((len(raw) - start) // 3)]
        if len(whole) >= 6:
            forms.add(base64.b64encode(whole).decode())
            forms.add(base64.urlsafe_b64encode(whole).decode())
    return {f for f in forms if f and f != key}


@functools.lru_cache(maxsize=64)
def key_scrubber(key: str | None) -> Callable[[str], str]:
    """The scrubber of ``key`` (stripped, as it is sent); the identity when there is none."""
    key = (key or "").strip()
    if not key:
        return lambda text: text
    return KeyScrubber(key)


def scrub_value(value: Any, key: str | None) -> Any:
    """Every string in ``value`` (dict keys and values, lists, tuples) scrubbed of ``key``."""
    scrub = key_scrubber(key)

    def deep(v: Any) -> Any:
        if isinstance(v, str):
            return scrub(v)
        if isinstance(v, dict):
            return {deep(k): deep(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [deep(x) for x in v]
        return v

    return deep(value)


def _token(entry: dict[str, Any]) -> str:
    token = entry.get("token")
    return token if isinstance(token, str) else ""


def scrub_logprobs(entries: list[dict[str, Any]], key: str | None) -> list[dict[str, Any]] | None:
    """Per-token entries scrubbed as one joined text: a key split across tokens is found in the
    join, and every token it touches is masked; then each entry is scrubbed on its own (the
    alternatives in ``top_logprobs`` cannot be joined). ``None`` when the join still holds a
    piece of the key after that."""
    scrubber = key_scrubber(key)
    if not isinstance(scrubber, KeyScrubber) or not entries:
        return entries
    tokens: list[str] = [_token(e) for e in entries]
    joined = "".join(tokens)
    spans = scrubber.spans(joined)
    masked = set()
    if spans:
        at = 0
        for i, token in enumerate(tokens):
            end = at + len(token)
            if any(s < end and at < e for s, e in spans):
                masked.add(i)
            at = end
    out = []
    for i, entry in enumerate(entries):
        entry = scrub_value(entry, key)
        if i in masked:
            entry = {**entry, "token": MASK, "top_logprobs": []}
        out.append(entry)
    rejoined = "".join(_token(e) for e in out)
    return None if scrubber.still_holds(rejoined) else out


def scrub_json_text(text: str, key: str | None) -> str:
    """A JSON document in a string (tool-call arguments): scrubbed as text, and kept valid
    JSON when the key was inside one of its strings."""
    scrubbed = key_scrubber(key)(text)
    if scrubbed == text:
        return text
    try:
        return json.dumps(scrub_value(json.loads(text), key))
    except (ValueError, RecursionError):
        return scrubbed


def scrub_record(rec: Any, key: str | None) -> None:
    """Every string field of a dataclass record, and every string inside its dict and list
    fields, scrubbed in place; ``logprobs`` as a joined text, ``tool_calls`` kept JSON."""
    if not (key or "").strip():
        return
    for f in dataclasses.fields(rec):
        value = getattr(rec, f.name)
        if f.name == "logprobs" and isinstance(value, list):
            setattr(rec, f.name, scrub_logprobs(value, key))
        elif f.name == "tool_calls" and isinstance(value, list):
            setattr(rec, f.name, [_scrub_call(c, key) for c in value])
        elif isinstance(value, str | dict | list | tuple):
            setattr(rec, f.name, scrub_value(value, key))


def _scrub_call(call: Any, key: str | None) -> Any:
    if not isinstance(call, dict):
        return scrub_value(call, key)
    out = scrub_value({k: v for k, v in call.items() if k != "arguments_json"}, key)
    if isinstance(call.get("arguments_json"), str):
        out["arguments_json"] = scrub_json_text(call["arguments_json"], key)
    return out
