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

# Anthropic content blocks of tools the vendor runs itself (web search, code execution, MCP):
# generated tokens, but no call the client must answer, so not among the record's tool calls
SERVER_TOOL_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use"})
# Responses API events that carry reasoning, not the answer (TTFT of the answer leaves them out)
REASONING_EVENTS = frozenset(
    {"response.reasoning_text.delta", "response.reasoning_summary_text.delta"}
)


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
        "named_tier",
        "calls",
        "refusal_parts",
        "server_blocks",
        "server_tools",
        "end_mark",
        "answer_time",
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
        # the tier one of those named (header or field): it wins over the protocol's own report,
        # e.g. Anthropic's usage.speed "fast" beside its usage.service_tier "standard"
        self.named_tier = ""
        # the substring that may end the stream (besides "data: [DONE]"), checked per event
        self.end_mark = b"response.completed" if protocol == "responses" else b"message_stop"
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
        self.answer_time: float | None = None  # the first token that is not reasoning
        self.done = False  # the end marker arrived
        self.stop = False  # stop reading: the end marker or an error event arrived
        self.usage_seen = False
        self.tool_text: list[str] = []
        self.calls = ToolCallAssembler()  # the tool calls themselves, for the record
        self.text_parts: list[str] = []
        self.reasoning_parts: list[str] = []
        self.refusal_parts: list[str] = []  # OpenAI delta.refusal: the model declined
        self.server_blocks: set[Any] = set()  # Anthropic block indices the vendor runs itself
        self.server_tools: list[dict[str, str]] = []
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
        start, events, times, end_mark = 0, self.events, self.times, self.end_mark
        while not self.stop:
            end = buf.find(b"\n\n", start)
            if end < 0:
                break
            raw = buf[start:end]
            start = end + 2
            events.append(raw)
            times.append(now)
            if raw.endswith(b"[DONE]") or end_mark in raw:
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
        if self.protocol == "responses":
            return (
                raw.startswith(b"event: response.completed")
                or b'"type": "response.completed"' in raw
                or b'"type":"response.completed"' in raw
            )
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
        elif self.protocol == "responses":
            self._responses(obj, name, now)
        else:
            self._openai(obj, now)
        if self.tier_fields:
            self.named_tier = self.named_tier or _dotted_tier(obj, self.tier_fields)
            if self.named_tier:
                self.rec.served_tier = self.named_tier

    def take_tier_headers(self, headers: Any) -> None:
        """The served tier from a response header named in ``tier_fields``, if any: headers
        come first, so a header report wins over body fields."""
        for name in self.tier_fields:
            value = headers.get(name)
            if value:
                self.rec.served_tier = self.named_tier = str(value)
                return

    def _token(self, piece: str, now: float, answer: bool = True) -> None:
        # the token estimate waits for finish(): nothing but an append while bytes arrive
        self.token_times.append(now)
        self.token_pieces.append(piece)
        if answer and self.answer_time is None:  # text, refusal or tool call: not reasoning
            self.answer_time = now

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
            rec.served_tier = str(obj["service_tier"])
        for choice in obj.get("choices") or ():
            if choice.get("index", 0) == 0:  # only the first choice is measured
                self._openai_choice(choice, now)
        usage = obj.get("usage")
        if not usage and "x_groq" in obj:  # Groq: usage only in its extension object
            usage = _field(obj["x_groq"], dict, "x_groq").get("usage")
        if usage:
            _field(usage, dict, "usage")
            self.usage_seen = True
            rec.prompt_tokens = _count(usage, "prompt_tokens", rec.prompt_tokens)
            rec.completion_tokens = _count(usage, "completion_tokens", rec.completion_tokens)
            details = usage.get("prompt_tokens_details") or {}
            if details.get("cached_tokens") is not None:
                rec.cached_tokens = _count(details, "cached_tokens", None)
        if "timings" in obj and isinstance(obj["timings"], dict):
            rec.server_timings = obj["timings"]  # llama.cpp server

    def _openai_choice(self, choice: dict[str, Any], now: float) -> None:
        delta = choice.get("delta") or {}
        content = delta.get("content") or choice.get("text") or ""
        thinking = ""
        if content.__class__ is not str:  # typed parts (Mistral), or a type-confused value
            content, thinking = _content_parts(content)
            if thinking:
                self.reasoning_parts.append(thinking)
        if content:
            self.text_parts.append(content)
        generated = content + thinking
        answer = bool(content)
        if len(delta) > 1 or not generated:  # more than {content}: role, reasoning, tools
            reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
            refusal = delta.get("refusal") or ""
            tool = ""
            for call in delta.get("tool_calls") or ():
                call = _field(call, dict, "delta.tool_calls[]")
                fn = _field(call.get("function") or {}, dict, "delta.tool_calls[].function")
                piece = _text(fn.get("name"), "function.name")
                piece += _text(fn.get("arguments"), "function.arguments")
                self.calls.openai(call)
                tool += piece
            if reasoning:
                self.reasoning_parts.append(_text(reasoning, "delta.reasoning"))
            if refusal:
                self.refusal_parts.append(_text(refusal, "delta.refusal"))
            if tool:
                self.tool_text.append(tool)
            generated += reasoning + refusal + tool
            answer = answer or bool(refusal or tool)
        if generated:
            self._token(generated, now, answer)
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
            block = _field(obj.get("content_block") or {}, dict, "content_block")
            btype = block.get("type")
            piece = ""
            if btype == "tool_use" and block.get("name"):
                piece = _text(block["name"], "content_block.name")
                self.calls.anthropic_start(obj.get("index"), block)
                self.tool_text.append(piece)
            elif btype in SERVER_TOOL_BLOCKS:  # the vendor runs it: not the client's call
                piece = _text(block.get("name"), "content_block.name")
                self.server_blocks.add(obj.get("index"))
                self.server_tools.append({"type": btype, "name": piece})
                self.tool_text.append(piece)
            elif btype == "fallback":  # the vendor says another model answers from here on
                to = _field(block.get("to") or {}, dict, "content_block.to")
                served = _text(to.get("model"), "content_block.to.model")
                if served:
                    rec.fallback_from = rec.model_id
                    rec.model_id = served
            elif btype in ("text", "thinking"):
                piece = _text(block.get(btype), f"content_block.{btype}")
                parts = self.reasoning_parts if btype == "thinking" else self.text_parts
                if piece:
                    parts.append(piece)
            if piece:
                self._token(piece, now, btype != "thinking")
        elif kind == "content_block_delta":
            delta = _field(obj.get("delta") or {}, dict, "delta")
            dtype = delta.get("type")
            piece = ""
            if dtype == "text_delta":
                piece = _text(delta.get("text"), "delta.text")
                self.text_parts.append(piece)
            elif dtype == "thinking_delta":
                piece = _text(delta.get("thinking"), "delta.thinking")
                self.reasoning_parts.append(piece)
            elif dtype == "input_json_delta":
                piece = _text(delta.get("partial_json"), "delta.partial_json")
                self.tool_text.append(piece)
                if obj.get("index") not in self.server_blocks:
                    self.calls.anthropic_delta(obj.get("index"), piece)
            if piece:
                self._token(piece, now, dtype != "thinking_delta")
        elif kind == "message_delta":
            delta = _field(obj.get("delta") or {}, dict, "delta")
            if delta.get("stop_reason"):
                rec.finish_reason = str(delta["stop_reason"])
            self._anthropic_usage(obj.get("usage") or {})

    def _responses(self, obj: dict[str, Any], name: str, now: float) -> None:
        """OpenAI's Responses API: typed events, tokens in ``*.delta`` events, the usage,
        model and served tier in the final ``response`` object (``response.completed``, or
        ``response.incomplete`` with its reason)."""
        kind = obj.get("type") or name
        piece = ""
        if kind == "response.output_text.delta":
            piece = _text(obj.get("delta"), "delta")
            self.text_parts.append(piece)
        elif kind in REASONING_EVENTS:
            piece = _text(obj.get("delta"), "delta")
            self.reasoning_parts.append(piece)
        elif kind == "response.refusal.delta":
            piece = _text(obj.get("delta"), "delta")
            self.refusal_parts.append(piece)
        elif kind == "response.output_item.added":
            item = _field(obj.get("item") or {}, dict, "item")
            if item.get("type") == "function_call":
                piece = _text(item.get("name"), "item.name")
                self.calls.anthropic_start(obj.get("output_index"), {"name": piece})
                self.tool_text.append(piece)
        elif kind == "response.function_call_arguments.delta":
            piece = _text(obj.get("delta"), "delta")
            self.calls.anthropic_delta(obj.get("output_index"), piece)
            self.tool_text.append(piece)
        elif kind in ("response.failed", "error") or obj.get("error"):
            resp = obj.get("response")
            err = obj.get("error") or (resp.get("error") if isinstance(resp, dict) else None)
            err = err or obj.get("message")
            raise Failure("malformed_stream", f"error in stream: {_short_error(err)}")
        elif kind in ("response.created", "response.completed", "response.incomplete"):
            self._responses_final(_field(obj.get("response") or {}, dict, "response"), kind)
        if piece:
            self._token(piece, now, kind not in REASONING_EVENTS)

    def _responses_final(self, resp: dict[str, Any], kind: str) -> None:
        rec = self.rec
        if resp.get("model"):
            rec.model_id = str(resp["model"])
        if kind == "response.created":  # its service_tier echoes the request: not the served
            return
        if resp.get("service_tier"):
            rec.served_tier = str(resp["service_tier"])
        if kind == "response.incomplete":
            details = resp.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            rec.finish_reason = str(reason or "incomplete")
        else:
            rec.finish_reason = str(resp.get("status") or "completed")
        usage = resp.get("usage")
        if usage:
            _field(usage, dict, "response.usage")
            self.usage_seen = True
            rec.prompt_tokens = _count(usage, "input_tokens", rec.prompt_tokens)
            rec.completion_tokens = _count(usage, "output_tokens", rec.completion_tokens)
            details = usage.get("input_tokens_details") or {}
            if isinstance(details, dict) and details.get("cached_tokens") is not None:
                rec.cached_tokens = _count(details, "cached_tokens", None)

    def _anthropic_usage(self, usage: Any) -> None:
        # Anthropic's input_tokens exclude cached ones; prompt_tokens here includes them, as in
        # OpenAI's usage, so the two protocols compare. No cache field: cached tokens unknown.
        rec = self.rec
        _field(usage, dict, "usage")
        rec.completion_tokens = _count(usage, "output_tokens", rec.completion_tokens)
        if usage.get("input_tokens") is not None:
            uncached = _count(usage, "input_tokens", None) or 0
            cached = _count(usage, "cache_read_input_tokens", None)
            created = _count(usage, "cache_creation_input_tokens", None) or 0
            rec.prompt_tokens = uncached + (cached or 0) + created
            if cached is not None:
                rec.cached_tokens = cached
        if usage.get("service_tier") and not rec.served_tier:  # Anthropic: standard|priority
            rec.served_tier = str(usage["service_tier"])
        self.usage_seen = True

    def refused(self) -> str:
        """The refusal, when the model declined: OpenAI's ``delta.refusal`` text, or an
        Anthropic ``stop_reason: refusal`` (then whatever text came before it); "" if not."""
        if self.refusal_parts:
            return "".join(self.refusal_parts)
        if self.protocol == "anthropic" and self.rec.finish_reason == "refusal":
            return "".join(self.text_parts) or "(no text)"
        return ""

    def finish(self) -> None:
        """Derived fields, also for failed records (they keep what arrived)."""
        rec, t0 = self.rec, self.t0
        if t0 is None:
            return
        rec.text = "".join(self.text_parts) + "".join(self.refusal_parts)
        rec.reasoning_text = "".join(self.reasoning_parts)
        rec.tool_calls = self.calls.result()
        rec.server_tools = self.server_tools
        times = self.token_times
        if times:
            rec.ttft_ms = (times[0] - t0) * 1000.0
        if self.answer_time is not None:
            rec.ttft_answer_ms = (self.answer_time - t0) * 1000.0
            rec.e2e_ms = (times[-1] - t0) * 1000.0
            rec.chunk_gaps_ms = [(b - a) * 1000.0 for a, b in zip(times, times[1:], strict=False)]
            rec.chunk_tokens = [max(1, estimate_tokens(p)) for p in self.token_pieces]
        # usage.completion_tokens counts reasoning and tool-call tokens too: so does the estimate
        everything = rec.text + rec.reasoning_text + "".join(self.tool_text)  # refusal included
        rec.estimated_tokens = estimate_tokens(everything)
        out = rec.output_tokens
        if rec.ttft_ms is not None and rec.e2e_ms is not None and out is not None and out >= 2:
            rec.tpot_ms = (rec.e2e_ms - rec.ttft_ms) / (out - 1)
        if self.logprobs:
            rec.logprobs = self.logprobs


_MAX_COUNT = 2**31 - 1  # a token count a sample's integer column can hold


def _kind(value: Any) -> str:
    """The value named in a malformed-stream message, whole: the client scrubs the key out of
    the message before cutting it (``evals.client._scrub``), so no cut leaves a piece of it."""
    return f"{type(value).__name__} {str(value)!r}"


def _text(value: Any, where: str) -> str:
    """A text piece of an event, or a malformed stream naming the field: never a non-string
    that would fail later, outside every ``try`` (joining the texts)."""
    if value.__class__ is str:
        return value
    if value is None:
        return ""
    raise Failure("malformed_stream", f"{where} is {_kind(value)}, not text")


def _field(value: Any, kind: type, where: str) -> Any:
    if isinstance(value, kind):
        return value
    raise Failure("malformed_stream", f"{where} is {_kind(value)}, not {kind.__name__}")


def _count(obj: dict[str, Any], key: str, default: int | None) -> int | None:
    """A token count from a usage object: absent or null keeps ``default`` (unknown stays
    unknown); a non-integer, or one past what the column holds, is a malformed stream."""
    value = obj.get(key)
    if value is None:
        return default
    if value.__class__ is not int:
        raise Failure("malformed_stream", f"usage.{key} is {_kind(value)}, not a count")
    if value > _MAX_COUNT:  # a negative one is the column's to refuse (store_error)
        raise Failure("malformed_stream", f"usage.{key} is {value}, out of range")
    return value


def _content_parts(content: Any) -> tuple[str, str]:
    """``delta.content`` as a list of typed parts, as (text, thinking). Mistral's magistral
    sends ``[{"type": "thinking", "thinking": [{"type": "text", "text": ...}]}]`` and
    ``[{"type": "text", "text": ...}]``; other part types (images, references) carry no
    generated text. Anything but a list here is a malformed stream."""
    if not isinstance(content, list):
        raise Failure("malformed_stream", f"delta.content is {_kind(content)}, not text")
    text = thinking = ""
    for part in content:
        if part.__class__ is str:
            text += part
            continue
        _field(part, dict, "delta.content[]")
        kind = part.get("type")
        if kind == "thinking":
            inner = part.get("thinking")
            for piece in inner if isinstance(inner, list) else [inner]:
                if isinstance(piece, dict):
                    piece = piece.get("text")
                thinking += _text(piece, "delta.content[].thinking")
        elif kind == "text" or kind is None:
            text += _text(part.get("text"), "delta.content[].text")
    return text, thinking


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
            return str(value)
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
    """The message of an in-stream error, uncut: the client cuts it only once the key is
    scrubbed out (``evals.client._scrub``); cut here, a key across the cut would keep a piece
    too short for the scrubber to know."""
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)
    return str(err)
