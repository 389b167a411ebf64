"""What failed in a run, in words a reader can act on: the top error classes of a tier with
their HTTP status and the vendor's own message, and whether the run's requests *mostly*
failed, which makes it a failed run ("fast tier: HTTP 401: You didn't provide an API key").

Why: a vendor that refuses every request (a missing key, a closed port) must not look like a
green run whose model writes broken code. A run whose requests mostly failed measured the
vendor's refusal, not its tiers, so it is failed with the reason, and the readers of finished
runs (baselines, speed-ups, drift, trend alerts) leave it out because it is not ``done``.

The messages are those already stored on the samples, which the client scrubbed of the key
(``evals.client.key_scrubber``); nothing here reads a key.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from evals.records import TIERS

MOSTLY = 0.5  # a tier whose failed share is above this failed the run
TOP = 3  # error groups kept per tier
MESSAGE_CHARS = 160

UNREACHABLE = {"connect": "vendor unreachable", "timeout": "vendor did not answer in time"}
STATUS_LINE = re.compile(r"^HTTP (\d{3}): ?(.*)$", re.DOTALL)


class VendorFailed(Exception):
    """The run's requests mostly failed; its message is the run's error as shown."""


def vendor_message(body: str, *, text: bool = True) -> str:
    """The vendor's sentence out of an error body: ``error.message``, ``message``, ``error`` or
    ``detail`` of a JSON body (OpenAI's and Anthropic's shapes), else the text itself (or
    nothing with ``text=False``: Test connection shows no body that is not such a field)."""
    whole = body.strip()
    try:
        data = json.loads(whole)
    except ValueError:
        data = None if text else _message_field(whole)
        if data is None:
            return whole[:MESSAGE_CHARS] if text else ""
    for path in (("error", "message"), ("message",), ("error",), ("detail",)):
        value: Any = data
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        if isinstance(value, str) and value.strip():
            return value.strip()[:MESSAGE_CHARS]
    return whole[:MESSAGE_CHARS] if text else ""


_MESSAGE = re.compile(r'"message"\s*:\s*("(?:[^"\\]|\\.){1,1000}")')


def _message_field(body: str) -> dict[str, str] | None:
    """``{"message": …}`` from a JSON body cut before its end (a stored error message is
    cut to ~300 characters), or None when it has no complete ``"message"`` string."""
    match = _MESSAGE.search(body)
    if match is None:
        return None
    try:
        said = json.loads(match.group(1))
    except ValueError:
        return None
    return {"message": said} if isinstance(said, str) else None


def describe(error_class: str, status: int | None, message: str) -> str:
    """One error in words: "HTTP 401: You didn't provide an API key", "vendor unreachable:
    ConnectError: [Errno 111] Connection refused"."""
    match = STATUS_LINE.match(message or "")
    if match:
        said = vendor_message(match.group(2))
        return f"HTTP {match.group(1)}" + (f": {said}" if said else "")
    if status and error_class in ("http_status", "rate_limited"):
        return f"HTTP {status}"
    head = UNREACHABLE.get(error_class, error_class or "error")
    detail = _plain_exception((message or "").strip())[:MESSAGE_CHARS]
    return f"{head}: {detail}" if detail and head != detail else head


_EXC_NAME = re.compile(r"^[A-Za-z_.]*(Error|Exception|Timeout)[A-Za-z_]*: ")


def _plain_exception(text: str) -> str:
    """A client library's exception in words: its class name dropped, aiohttp's "Cannot
    connect to host H:P ssl:default [Connect call failed ('H', P)]" as "cannot connect to H:P
    (connection refused)"."""
    text = _EXC_NAME.sub("", text)
    match = re.search(r"Cannot connect to host (\S+)(?: ssl:\S+)? \[(.*)\]", text)
    if match:
        why = match.group(2)
        why = "connection refused" if "Connect call failed" in why else why
        return f"cannot connect to {match.group(1)} ({why})"
    return text


def top_errors(samples: Iterable[Any], limit: int = TOP) -> list[dict[str, Any]]:
    """The most frequent failures of these samples, each ``{"class", "status", "message", "n"}``
    with ``message`` in words (``describe``); most frequent first."""
    counts: Counter[tuple[str, int | None, str]] = Counter()
    for s in samples:
        if s.ok:
            continue
        cls, status = s.error_class or "error", getattr(s, "http_status", None)
        counts[(cls, status, describe(cls, status, getattr(s, "error_message", "")))] += 1
    return [
        {"class": cls, "status": status, "message": message, "n": n}
        for (cls, status, message), n in counts.most_common(limit)
    ]


_TIER_ORDER = {tier: i for i, tier in enumerate(TIERS)}  # fast first, whatever the storage


def failure(tiers: Mapping[str, Any]) -> str | None:
    """The run's error when a tier's requests mostly failed, else None. ``tiers``: tier name →
    ``TierStats`` (its n, n_ok and top_errors)."""
    parts = []
    for name, stats in sorted(tiers.items(), key=lambda kv: _TIER_ORDER.get(kv[0], 9)):
        # a sample we could not store (store_error) is our failure, not the vendor's
        failed = stats.n - stats.n_ok - stats.errors.get("store_error", 0)
        if not stats.n or failed / stats.n <= MOSTLY:
            continue
        top = [e for e in stats.top_errors or () if e["class"] != "store_error"]
        said = top[0]["message"] if top else "requests failed"
        parts.append(f"{name} tier: {said} ({failed} of {stats.n} requests failed)")
    return "; ".join(parts) or None
