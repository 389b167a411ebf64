"""Test connection: one short request per endpoint through the product's own client, before a
pair is trusted to run on a schedule.

Why: a wrong key variable, base URL or model name showed up only as a failed run, minutes after
saving, if anyone looked. One request now says what the vendor answered: the HTTP status, the
tier it says it served, the model id, the usage, the time to first token, or its error in the
words a failed run uses (``monitor.derived.failures.describe``).

The request goes through ``evals.client.stream_chat`` with the endpoint's own spec (its key read
from the variable it names, its extra body and headers), so what passes here is what a probe
sends; an endpoint that is not local connects to public addresses only, checked after the
host is resolved (``evals.addresses``), and no redirect is followed. What a failed test shows
is the status and at most a vendor API's JSON error message, never the body of whatever
answered (``_words``); the audit log gets one entry per test with the outcome in words and
none of the body.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from evals.addresses import REFUSED
from evals.client import make_client, stream_chat
from evals.records import ChatRequest, TimingRecord
from monitor.derived.failures import STATUS_LINE, UNREACHABLE, describe, vendor_message
from monitor.models import ConfigChange, Endpoint

PROMPT = [{"role": "user", "content": "Reply with one word: ready"}]
_PROTOCOL_WORDS = "chat"
MAX_TOKENS = 16


@dataclass(frozen=True)
class Check:
    """What one test request of an endpoint found, in words for the page and the command."""

    endpoint: str
    ok: bool
    status: int | None = None
    served_tier: str = ""
    model_id: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    ttft_ms: float | None = None
    message: str = ""  # the failure in words; empty when the vendor answered
    logged: str = ""  # the failure as the audit log keeps it: no word of the server's body

    @property
    def summary(self) -> str:
        """One line: "ok · HTTP 200 · model m · tier priority · 9+2 tokens · TTFT 84 ms"."""
        if not self.ok:
            return f"failed: {self.message}"
        parts = ["ok", f"HTTP {self.status}" if self.status else "", f"model {self.model_id}"]
        parts.append(f"tier {self.served_tier}" if self.served_tier else "tier not said")
        if self.prompt_tokens is not None or self.completion_tokens is not None:
            parts.append(f"{self.prompt_tokens or 0}+{self.completion_tokens or 0} tokens")
        if self.ttft_ms is not None:
            parts.append(f"TTFT {self.ttft_ms:,.0f} ms")
        return " · ".join(p for p in parts if p)

    @property
    def kept(self) -> str:
        """The audit log's line: the summary of an answer, a failure without the vendor's
        words (the status, the class, or our own reason)."""
        return self.summary if self.ok else f"failed: {self.logged or self.message}"


def _words(rec: TimingRecord) -> tuple[str, str]:
    """The failure for the page, and for the audit log, with nothing of the server's body but
    a JSON error message of at most ``MESSAGE_CHARS`` characters.

    Why: Test connection aims at a host someone typed. Its reply, shown on the page and kept
    in the log, would let anyone read whatever answers there (a metadata service, an internal
    page) if the body were echoed, so only a vendor API's error field is shown ("HTTP 401:
    Incorrect API key"), else the status alone, and the log keeps the status alone. The
    client library's words about the connection (refused, timed out, an address refused
    before connecting) are ours, not the server's, and are kept."""
    error_class = rec.error_class or "error"
    if error_class in ("http_status", "rate_limited"):
        match = STATUS_LINE.match(rec.error_message or "")
        said = vendor_message(match.group(2), text=False) if match else ""
        said = "".join(c if c.isprintable() else " " for c in said)
        head = f"HTTP {rec.http_status}"
        return (f"{head}: {said}" if said else head), head
    if REFUSED in (rec.error_message or ""):  # evals.addresses: nothing was sent
        inside = re.search(r"\[(.*" + REFUSED + r")\]", rec.error_message)
        words = f"refused before connecting: {inside.group(1) if inside else rec.error_message}"
        return words, words
    if error_class in UNREACHABLE:
        words = describe(error_class, rec.http_status, rec.error_message)
        return words, UNREACHABLE[error_class]
    status = f" (HTTP {rec.http_status})" if rec.http_status else ""
    words = f"the reply is not a usable {_PROTOCOL_WORDS} stream: {error_class}{status}"
    return words, words


def _from_record(name: str, rec: TimingRecord) -> Check:
    message, logged = _words(rec) if not rec.ok else ("", "")
    return Check(
        endpoint=name,
        ok=rec.ok,
        status=rec.http_status,
        served_tier=rec.served_tier,
        model_id=rec.model_id,
        prompt_tokens=rec.prompt_tokens,
        completion_tokens=rec.completion_tokens,
        ttft_ms=rec.ttft_ms,
        message=message,
        logged=logged,
    )


async def _send(endpoint: Endpoint) -> TimingRecord:
    async with make_client() as client:
        return await stream_chat(
            client, endpoint.spec(), ChatRequest(messages=PROMPT, max_tokens=MAX_TOKENS)
        )


def check(endpoint: Endpoint) -> Check:
    """One request to ``endpoint`` (saved or not: the onboarding form tests before saving). A
    key variable that is named but unset, or a header secret missing, fails here by name and
    sends nothing, as a run would."""
    try:
        if endpoint.api_key_env and not endpoint.api_key():
            return Check(
                endpoint.name,
                ok=False,
                message=f"API key not set: the variable {endpoint.api_key_env} is empty "
                "or unset in the web process's environment; nothing was sent",
            )
        endpoint.request_headers()
    except ValueError as exc:  # a badly named variable, a control character, a header secret
        return Check(endpoint.name, ok=False, message=f"{exc}; nothing was sent")
    return _from_record(endpoint.name, asyncio.run(_send(endpoint)))


def record(checks: list[Check], *, user=None, source: str) -> None:
    """One audit-log entry per test: who tested which endpoint, and what it answered in words
    (no headers, no body, no key: ``Check.kept``)."""
    who = user if user is not None and getattr(user, "is_authenticated", False) else None
    for c in checks:
        ConfigChange.objects.create(
            user=who,
            username=who.get_username() if who else "",
            source=source[:200],
            action="tested",
            model="endpoint",
            object_id=c.endpoint[:60],
            object_repr=c.endpoint[:200],
            diff={"test connection": [None, c.kept[:500]]},
        )
