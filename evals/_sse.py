"""Server-sent events: a response body's timestamped bytes in, the record's fields out.

SSE framing is hand-written over raw bytes (``Accept-Encoding: identity``): events cut on blank
lines and kept with the time of the socket read that completed them (:mod:`evals._wire` takes
those times). OpenAI and Anthropic events are then interpreted into the
:class:`~evals.records.TimingRecord`'s text, tokens, usage and times (TTFT, E2E, chunk gaps,
TPOT, as defined in :mod:`evals.client`'s docstring). Errors are raised as :class:`Failure`
with one of ``records.ERROR_CLASSES``; :func:`evals.client.stream_chat` turns them into a
failed record. Nothing here touches a socket: this module imports neither the client nor the
wires (the lane appears only as a type).
"""

from __future__ import annotations

import json
import json.scanner
from typing import TYPE_CHECKING, Any

from evals.records import TimingRecord
from evals.tokens import estimate_tokens
from evals.toolcalls import ToolCallAssembler

if TYPE_CHECKING:
    from evals._wire import Lane

SNIPPET_CHARS = 200  # characters of an error body kept in the message


class Failure(Exception):
    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


class Stream:
    """One response body: SSE framing while bytes arrive, the protocol's events afterwards.

    While the stream runs, :meth:`feed` does only what the raw-socket floor does: stamp the
    read, cut complete events on blank lines, keep ``(time, bytes)``, and watch for the end
    marker (``data: [DONE]`` / ``message_stop``) and for error events (which end reading at
    once). The JSON is parsed in the lane (:class:`evals._wire.Lane`), between reads, while
    the stream runs; :meth:`parse` takes what is left at the end. So no event waits behind
    another's JSON parsing to be timestamped, and the end of a stream costs little: a wave of
    streams that end together restarts in less time than a scripted first token takes.
    """

    __slots__ = (
        "rec",
        "t0",
        "protocol",
        "buf",
        "events",
        "times",
        "token_times",
        "token_pieces",
        "done",
        "stop",
        "usage_seen",
        "in_body",
        "tool_text",
        "logprobs",
        "text_parts",
        "reasoning_parts",
        "nbytes",
        "limit",
        "lane",
        "parsed",
        "failure",
        "queued",
        "tier_fields",
        "calls",
    )

    def __init__(
        self,
        rec: TimingRecord,
        protocol: str,
        limit: int,
        lane: Lane | None = None,
        tier_fields: tuple[str, ...] = (),
    ) -> None:
        self.rec, self.protocol, self.limit, self.lane = rec, protocol, limit, lane
        # header names / dotted JSON keys reporting the served tier (the endpoint's config)
        self.tier_fields = tier_fields
        self.parsed = 0  # events[:parsed] are interpreted
        self.failure: Exception | None = None  # the first bad event's; parsing stopped there
        self.queued = False  # a parse piece waits in the lane
        self.t0: float | None = None
        self.in_body = False  # response headers were 2xx SSE: later failures cut the stream
        self.buf = b""
        # events and their times in two lists: no tuple per event for the garbage collector
        # to track (its pauses delay timestamps too)
        self.events: list[bytes] = []
        self.times: list[float] = []
        self.token_times: list[float] = []
        self.token_pieces: list[str] = []
        self.done = False  # the end marker arrived
        self.stop = False  # stop reading: the end marker or an error event arrived
        self.usage_seen = False
        self.tool_text: list[str] = []
        self.calls = ToolCallAssembler()  # the tool calls themselves, for the record
        self.text_parts: list[str] = []
        self.reasoning_parts: list[str] = []
        self.logprobs: list[dict[str, Any]] = []
        self.nbytes = 0

    def feed(self, chunk: bytes, now: float) -> None:
        """Take one socket read: every event it completes is stamped ``now``."""
        self.nbytes += len(chunk)
        over = self.nbytes > self.limit
        if over:  # keep the events that fit under the limit, then stop
            chunk = chunk[: max(0, len(chunk) - (self.nbytes - self.limit))]
        buf = self.buf + chunk if self.buf else chunk
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        start, events, times = 0, self.events, self.times
        while not self.stop:
            end = buf.find(b"\n\n", start)
            if end < 0:
                break
            raw = buf[start:end]
            start = end + 2
            events.append(raw)
            times.append(now)
            if raw.endswith(b"[DONE]") or b"message_stop" in raw:
                self.done = self.stop = self._is_end(raw)
            elif b"error" in raw:
                self.stop = self._is_error(raw)
        self.buf = buf[start:]
        if self.lane is not None and not self.queued and len(events) > self.parsed:
            self.queued = True
            self.lane.defer(self._parse_pending)
        if over:
            raise Failure("body_too_large", f"response body exceeded {self.limit} bytes")

    def _is_end(self, raw: bytes) -> bool:
        if self.protocol == "anthropic":
            return (
                raw.startswith(b"event: message_stop")
                or b'"type": "message_stop"' in raw
                or b'"type":"message_stop"' in raw
            )
        return raw.startswith(b"data:") and raw[5:].strip() == b"[DONE]"

    def _is_error(self, raw: bytes) -> bool:
        """An error event (rare: only events mentioning "error" get this JSON parse)."""
        if raw.startswith(b"event: error"):
            return True
        data = raw[6:] if raw.startswith(b"data: ") else raw
        try:
            obj = json.loads(data)
        except ValueError:
            return False
        return isinstance(obj, dict) and (bool(obj.get("error")) or obj.get("type") == "error")

    def parse(self) -> None:
        """Interpret the events not yet interpreted, in order; raises the first bad one's
        ``Failure`` (or parse error), also when a lane piece met it."""
        self._parse_pending()
        if self.failure is not None:
            raise self.failure

    def _parse_pending(self) -> None:
        self.queued = False
        events, times = self.events, self.times
        while self.parsed < len(events) and self.failure is None:
            i = self.parsed  # feed() kept nothing after the end marker
            self.parsed += 1
            try:
                self._event(events[i], times[i])
            except (Failure, ValueError, TypeError, KeyError, AttributeError, UnicodeError) as exc:
                self.failure = exc

    def _event(self, raw: bytes, now: float) -> None:
        name = ""
        if raw.startswith(b"data: ") and b"\n" not in raw:  # the common case, no allocation
            data = raw[6:]
        else:
            parts: list[bytes] = []
            for line in raw.split(b"\n"):
                if line.startswith(b"data:"):
                    parts.append(line[6:] if line[5:6] == b" " else line[5:])
                elif line.startswith(b"event:"):
                    name = line[6:].strip().decode("utf-8", "replace")
            if not parts:
                if name == "error":
                    raise Failure("malformed_stream", "error event without data")
                return  # comment / keep-alive / event with no data
            data = b"\n".join(parts)
        if data[:1] != b"{":
            stripped = data.strip()
            if not stripped or stripped == b"[DONE]":
                return
        try:
            obj = _json_object(data)
        except ValueError:
            raise Failure(
                "malformed_stream", f"unparseable data line: {data[:80].decode('utf-8', 'replace')}"
            ) from None
        if not isinstance(obj, dict):
            raise Failure("malformed_stream", "data line is not a JSON object")
        if self.protocol == "anthropic":
            self._anthropic(obj, name, now)
        else:
            self._openai(obj, now)
        if self.tier_fields and not self.rec.served_tier:
            self.rec.served_tier = _dotted_tier(obj, self.tier_fields)

    def take_tier_headers(self, headers: Any) -> None:
        """The served tier from a response header named in ``tier_fields``, if any: headers
        come first, so a header report wins over body fields."""
        for name in self.tier_fields:
            value = headers.get(name)
            if value:
                self.rec.served_tier = str(value)[:40]
                return

    def _token(self, piece: str, now: float) -> None:
        # the token estimate waits for finish(): nothing but an append while bytes arrive
        self.token_times.append(now)
        self.token_pieces.append(piece)

    def _openai(self, obj: dict[str, Any], now: float) -> None:
        # Written for the common chunk {"choices": [{"delta": {"content": ...}}]}: this runs
        # once per event while other streams wait, so lookups are kept few.
        rec = self.rec
        if "error" in obj and obj["error"]:
            raise Failure("malformed_stream", f"error in stream: {_short_error(obj['error'])}")
        if not rec.model_id and obj.get("model"):
            rec.model_id = str(obj["model"])
        if not rec.system_fingerprint and obj.get("system_fingerprint"):
            rec.system_fingerprint = str(obj["system_fingerprint"])
        if not rec.served_tier and obj.get("service_tier"):  # OpenAI: the tier that served
            rec.served_tier = str(obj["service_tier"])[:40]
        for choice in obj.get("choices") or ():
            if choice.get("index", 0) == 0:  # only the first choice is measured
                self._openai_choice(choice, now)
        usage = obj.get("usage")
        if usage:
            self.usage_seen = True
            rec.prompt_tokens = usage.get("prompt_tokens", rec.prompt_tokens)
            rec.completion_tokens = usage.get("completion_tokens", rec.completion_tokens)
            details = usage.get("prompt_tokens_details") or {}
            if details.get("cached_tokens") is not None:
                rec.cached_tokens = details["cached_tokens"]
        if "timings" in obj and isinstance(obj["timings"], dict):
            rec.server_timings = obj["timings"]  # llama.cpp server

    def _openai_choice(self, choice: dict[str, Any], now: float) -> None:
        delta = choice.get("delta") or {}
        content = delta.get("content") or choice.get("text") or ""
        if content:
            self.text_parts.append(content)
        generated = content
        if len(delta) > 1 or not content:  # more than {content}: role, reasoning, tools
            reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
            tool = ""
            for call in delta.get("tool_calls") or ():
                self.calls.openai(call)
                fn = call.get("function") or {}
                tool += (fn.get("name") or "") + (fn.get("arguments") or "")
            if reasoning:
                self.reasoning_parts.append(reasoning)
            if tool:
                self.tool_text.append(tool)
            generated += reasoning + tool
        if generated:
            self._token(generated, now)
        if choice.get("finish_reason"):
            self.rec.finish_reason = str(choice["finish_reason"])
        lp = choice.get("logprobs")
        if lp and lp.get("content"):
            self.logprobs.extend(_logprob_entry(x) for x in lp["content"])

    def _anthropic(self, obj: dict[str, Any], name: str, now: float) -> None:
        rec = self.rec
        kind = obj.get("type") or name
        if kind == "error" or obj.get("error"):
            raise Failure("malformed_stream", f"error in stream: {_short_error(obj.get('error'))}")
        if kind == "message_start":
            msg = obj.get("message") or {}
            rec.model_id = str(msg.get("model") or rec.model_id)
            self._anthropic_usage(msg.get("usage") or {})
        elif kind == "content_block_start":
            block = obj.get("content_block") or {}
            piece = block.get("text") or block.get("thinking") or ""
            if block.get("type") == "tool_use" and block.get("name"):
                self.calls.anthropic_start(obj.get("index"), block)
                self.tool_text.append(block["name"])
                piece = block["name"]
            elif piece:
                parts = self.reasoning_parts if block.get("type") == "thinking" else self.text_parts
                parts.append(piece)
            if piece:
                self._token(piece, now)
        elif kind == "content_block_delta":
            delta = obj.get("delta") or {}
            dtype = delta.get("type")
            piece = ""
            if dtype == "text_delta":
                piece = delta.get("text") or ""
                self.text_parts.append(piece)
            elif dtype == "thinking_delta":
                piece = delta.get("thinking") or ""
                self.reasoning_parts.append(piece)
            elif dtype == "input_json_delta":
                piece = delta.get("partial_json") or ""
                self.tool_text.append(piece)
                self.calls.anthropic_delta(obj.get("index"), piece)
            if piece:
                self._token(piece, now)
        elif kind == "message_delta":
            delta = obj.get("delta") or {}
            if delta.get("stop_reason"):
                rec.finish_reason = str(delta["stop_reason"])
            self._anthropic_usage(obj.get("usage") or {})

    def _anthropic_usage(self, usage: dict[str, Any]) -> None:
        # Anthropic's input_tokens exclude cached ones; prompt_tokens here includes them, as in
        # OpenAI's usage, so the two protocols compare.
        rec = self.rec
        if "output_tokens" in usage:
            rec.completion_tokens = usage["output_tokens"]
        if "input_tokens" in usage:
            cached = usage.get("cache_read_input_tokens") or 0
            created = usage.get("cache_creation_input_tokens") or 0
            rec.prompt_tokens = usage["input_tokens"] + cached + created
            rec.cached_tokens = cached
        if usage.get("service_tier") and not rec.served_tier:  # Anthropic: standard|priority
            rec.served_tier = str(usage["service_tier"])[:40]
        self.usage_seen = True

    def finish(self) -> None:
        """Derived fields, also for failed records (they keep what arrived)."""
        rec, t0 = self.rec, self.t0
        if t0 is None:
            return
        rec.text = "".join(self.text_parts)
        rec.reasoning_text = "".join(self.reasoning_parts)
        rec.tool_calls = self.calls.result()
        times = self.token_times
        if times:
            rec.ttft_ms = (times[0] - t0) * 1000.0
            rec.e2e_ms = (times[-1] - t0) * 1000.0
            rec.chunk_gaps_ms = [(b - a) * 1000.0 for a, b in zip(times, times[1:], strict=False)]
            rec.chunk_tokens = [max(1, estimate_tokens(p)) for p in self.token_pieces]
        # usage.completion_tokens counts reasoning and tool-call tokens too: so does the estimate
        everything = rec.text + rec.reasoning_text + "".join(self.tool_text)
        rec.estimated_tokens = estimate_tokens(everything)
        out = rec.output_tokens
        if rec.ttft_ms is not None and rec.e2e_ms is not None and out is not None and out >= 2:
            rec.tpot_ms = (rec.e2e_ms - rec.ttft_ms) / (out - 1)
        if self.logprobs:
            rec.logprobs = self.logprobs


_SCAN = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def _json_object(data: bytes) -> Any:
    """``json.loads(data)``, in half the time for the usual ``{...}`` event (the C scanner
    straight on the text: no encoding sniffing, no wrapper calls); anything else, and every
    error, goes through ``json.loads`` itself."""
    if data[:1] == b"{":
        try:
            text = data.decode()
            obj, end = _SCAN(text, 0)
        except (StopIteration, ValueError):
            pass
        else:
            if end == len(text) or not text[end:].strip():
                return obj
    return json.loads(data)


def _dotted_tier(obj: dict[str, Any], paths: tuple[str, ...]) -> str:
    """The first of ``paths`` ("a.b.c") present in ``obj`` as a scalar, else ""."""
    for path in paths:
        value: Any = obj
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, (str, int, float)) and value != "":
            return str(value)[:40]
    return ""


def _logprob_entry(x: dict[str, Any]) -> dict[str, Any]:
    return {
        "token": x.get("token"),
        "logprob": x.get("logprob"),
        "top_logprobs": [
            {"token": t.get("token"), "logprob": t.get("logprob")}
            for t in x.get("top_logprobs") or ()
        ],
    }


def _short_error(err: Any) -> str:
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)[:SNIPPET_CHARS]
    return str(err)[:SNIPPET_CHARS]
