"""The streaming client: one request in, one :class:`~evals.records.TimingRecord` out.

Timing follows DESIGN.md exactly. ``t0 = time.perf_counter()`` just before the request is sent;
every other time is milliseconds after t0 on the same clock:

- ``connect_ms``: the connection was ready — httpcore's trace events
  ``connection.start_tls.complete`` (HTTPS) or ``connection.connect_tcp.complete`` (HTTP); for
  a reused keep-alive connection, ``http11.send_request_headers.started`` (pool wait only).
- ``headers_ms``: response headers parsed (``http11.receive_response_headers.complete``).
- ``ttfb_ms``: the first body bytes came out of the socket.
- ``ttft_ms`` / ``e2e_ms``: the first / last SSE event that carries a generated token on any
  channel (content, reasoning, tool-call name or arguments). Role-only, empty, usage-only,
  keep-alive and comment events do not count.
- ``chunk_gaps_ms`` between consecutive token-bearing events and ``chunk_tokens``, the estimated
  tokens of each one (at least 1): bursts of several tokens reveal speculative decoding.
- ``tpot_ms = (E2E - TTFT) / (output_tokens - 1)`` when output_tokens >= 2, output tokens being
  ``usage.completion_tokens`` when the server sends it, else our estimate.

An event's timestamp is when the bytes completing it were returned by the socket read. The SSE
parser is hand-written over raw bytes (``aiter_raw``, ``Accept-Encoding: identity``): one
``perf_counter()`` per read, then the events of that read are split on blank lines. Measured
against a raw-socket client in ``benchmarks/timing_fidelity.py`` (docs/benchmarks.md).

Failures never raise: every one is a record with ``ok=False``, one of ``records.ERROR_CLASSES``,
a short message with the API key scrubbed, and whatever times and text arrived before it.
OpenAI streams that end without ``data: [DONE]`` are accepted only if they carried a
``finish_reason`` *and* a ``usage`` object (some OpenAI-compatible servers omit ``[DONE]``; a
stream cut mid-way cannot have both); otherwise they are ``stream_incomplete``.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import httpx
import yarl

from evals.records import ChatRequest, EndpointSpec, TimingRecord
from evals.tokens import estimate_tokens

ANTHROPIC_VERSION = "2023-06-01"
# Response extension of AiohttpTransport: read body bytes without httpx's iterator layers.
READ_CHUNK = "tierwatch.read_chunk"
_DRAIN_AFTER_END_S = 1.0  # read the chunked terminator after [DONE] so the connection is reused
_SNIPPET = 200  # characters of an error body kept in the message
_ERROR_BODY_BYTES = 16_384  # at most this much of a non-2xx body is read
KEPT_HEADERS = frozenset(
    {
        "x-request-id", "request-id", "openai-processing-ms", "openai-version",
        "openai-organization", "anthropic-organization-id", "server", "date", "retry-after",
        "cf-cache-status", "cf-ray", "via", "x-cache", "age", "content-type",
        "x-envoy-upstream-service-time", "x-tierwatch-simulated", "x-served-model",
    }
)
KEPT_HEADER_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-", "x-tierwatch-")
NEVER_KEPT = frozenset({"authorization", "x-api-key", "set-cookie", "cookie", "api-key"})


class _Failure(Exception):
    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


def make_client(*, backend: str = "aiohttp", **kw: Any) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` for probing: HTTP/1.1, room for 256 concurrent streams.

    ``backend="aiohttp"`` (default) sends through :class:`AiohttpTransport`; ``"httpcore"`` is
    httpx's own transport (kept for comparison: see the transport's docstring for why it is not
    the default). Timeouts are set per request from the endpoint. Keyword arguments go to
    ``httpx.AsyncClient`` (``limits=``, ``verify=``, ``transport=``...).
    """
    limits = kw.setdefault(
        "limits",
        httpx.Limits(max_connections=256, max_keepalive_connections=64, keepalive_expiry=30.0),
    )
    kw.setdefault("timeout", httpx.Timeout(120.0))
    kw.setdefault("follow_redirects", False)
    if backend == "aiohttp" and "transport" not in kw:
        kw["transport"] = AiohttpTransport(limits=limits, verify=kw.pop("verify", True))
    elif backend != "aiohttp":
        kw.setdefault("http1", True)
        kw.setdefault("http2", False)
    return httpx.AsyncClient(**kw)


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx transport that sends through aiohttp (HTTP/1.1, keep-alive pool, TLS).

    Why: with httpx's default transport, httpcore's pool re-scans every connection at each
    request start and end (quadratic in open connections) and each socket read goes through
    anyio cancel scopes; at 200 concurrent streams that costs ~1 ms of CPU per SSE event and
    delays timestamps by 100+ ms. aiohttp reads in asyncio protocol callbacks with the llhttp C
    parser, like the raw-socket floor (figures in docs/benchmarks.md, "Timing fidelity").
    httpcore's trace events are emulated from aiohttp's TraceConfig so ``connect_ms`` and
    ``headers_ms`` keep their meaning. Proxies from the environment are httpx's business: it
    mounts its own transports for them.
    """

    def __init__(self, *, limits: httpx.Limits | None = None,
                 verify: bool | str | ssl.SSLContext = True) -> None:
        self._limits = limits or httpx.Limits()
        self._ssl = verify if isinstance(verify, ssl.SSLContext) else _ssl_context(verify)
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            traces = aiohttp.TraceConfig()
            traces.on_connection_create_end.append(_on_connected)
            traces.on_request_headers_sent.append(_on_headers_sent)
            connector = aiohttp.TCPConnector(
                limit=self._limits.max_connections or 0, limit_per_host=0, ssl=self._ssl,
                keepalive_timeout=self._limits.keepalive_expiry or 30.0,
            )
            self._session = aiohttp.ClientSession(
                connector=connector, trace_configs=[traces], auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
                timeout=aiohttp.ClientTimeout(total=None),
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._get_session()
        t = request.extensions.get("timeout") or {}
        timeout = aiohttp.ClientTimeout(total=None, connect=t.get("pool"),
                                        sock_connect=t.get("connect"), sock_read=t.get("read"))
        trace = request.extensions.get("trace")
        ctx = _TraceCtx(trace, request.url.scheme == "https")
        try:
            resp = await session.request(
                request.method, yarl.URL(str(request.url), encoded=True),
                headers=list(request.headers.multi_items()), data=await request.aread() or None,
                allow_redirects=False, timeout=timeout, trace_request_ctx=ctx,
            )
        except Exception as exc:
            raise _httpx_error(exc, request, connecting=True) from exc
        if trace is not None:
            await trace("http11.receive_response_headers.complete", {})
        stream = _AiohttpStream(resp, request)
        return httpx.Response(
            resp.status, headers=list(resp.raw_headers), stream=stream,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": (resp.reason or "").encode(),
                        READ_CHUNK: stream.read_chunk},
        )

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


@functools.lru_cache(maxsize=8)
def _ssl_context(verify: bool | str) -> ssl.SSLContext:
    """httpx's context (certifi's CAs), built once: loading the CA file takes ~50 ms."""
    return httpx.create_ssl_context(verify=verify)


class _TraceCtx:
    __slots__ = ("trace", "tls")

    def __init__(self, trace: Callable[..., Any] | None, tls: bool) -> None:
        self.trace, self.tls = trace, tls


async def _on_connected(_session: Any, ctx: Any, _params: Any) -> None:
    req = ctx.trace_request_ctx
    if isinstance(req, _TraceCtx) and req.trace is not None:
        name = "start_tls" if req.tls else "connect_tcp"  # aiohttp's "create" includes TLS
        await req.trace(f"connection.{name}.complete", {})


async def _on_headers_sent(_session: Any, ctx: Any, _params: Any) -> None:
    req = ctx.trace_request_ctx
    if isinstance(req, _TraceCtx) and req.trace is not None:
        await req.trace("http11.send_request_headers.complete", {})


class _AiohttpStream(httpx.AsyncByteStream):
    def __init__(self, resp: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._resp, self._request = resp, request

    async def read_chunk(self) -> bytes:
        """Whatever body bytes have arrived (waiting for some), b"" at the end."""
        try:
            return await self._resp.content.readany()
        except Exception as exc:
            raise _httpx_error(exc, self._request, connecting=False) from exc

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while chunk := await self.read_chunk():
            yield chunk

    async def aclose(self) -> None:
        self._resp.release()  # back to the pool if the body was read to its end, else closed


def _httpx_error(exc: Exception, request: httpx.Request, *, connecting: bool) -> Exception:
    """The httpx exception that httpx's own transport would raise for an aiohttp one (anything
    unforeseen becomes a generic ``TransportError``, classified ``protocol`` by the client)."""
    msg = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx.ConnectError(msg, request=request)
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(msg, request=request)
    if isinstance(exc, TimeoutError):  # aiohttp's read timeouts subclass it
        return httpx.ReadTimeout(msg, request=request)
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError):
        return httpx.RemoteProtocolError(msg, request=request)
    if isinstance(exc, aiohttp.ClientResponseError):  # unparseable status line or headers
        return httpx.RemoteProtocolError(msg, request=request)
    if isinstance(exc, aiohttp.InvalidURL):
        return httpx.UnsupportedProtocol(msg, request=request)
    if isinstance(exc, aiohttp.ClientOSError | OSError):
        cls = httpx.ConnectError if connecting else httpx.ReadError
        return cls(msg, request=request)
    return httpx.TransportError(f"{type(exc).__name__}: {msg}", request=request)


def _openai_body(endpoint: EndpointSpec, request: ChatRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": request.messages,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.seed is not None:
        body["seed"] = request.seed
    if request.logprobs:
        body["logprobs"] = True
        if request.top_logprobs:
            body["top_logprobs"] = request.top_logprobs
    body.update(endpoint.extra_body)
    return body


def _anthropic_body(endpoint: EndpointSpec, request: ChatRequest) -> dict[str, Any]:
    # Anthropic takes system prompts as a top-level field, not as a message.
    system = "\n\n".join(m["content"] for m in request.messages if m.get("role") == "system")
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": [m for m in request.messages if m.get("role") != "system"],
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "stream": True,
    }
    if system:
        body["system"] = system
    body.update(endpoint.extra_body)
    return body


def _build(client: httpx.AsyncClient, endpoint: EndpointSpec, request: ChatRequest,
           trace: Callable[..., Any]) -> httpx.Request:
    base = endpoint.base_url.rstrip("/")
    headers = {"Accept": "text/event-stream", "Accept-Encoding": "identity"}
    if endpoint.protocol == "anthropic":
        url, body = f"{base}/messages", _anthropic_body(endpoint, request)
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if endpoint.api_key:
            headers["x-api-key"] = endpoint.api_key
    else:
        url, body = f"{base}/chat/completions", _openai_body(endpoint, request)
        if endpoint.api_key:
            headers["Authorization"] = f"Bearer {endpoint.api_key}"
    return client.build_request(
        "POST", url, json=body, headers=headers, timeout=httpx.Timeout(endpoint.timeout_s),
        extensions={"trace": trace},
    )


def _scrub(message: str, endpoint: EndpointSpec) -> str:
    """One line, at most ~300 characters, the key replaced (vendors echo keys in 401 bodies)."""
    text = " ".join(str(message).split())
    key = endpoint.api_key
    if key:
        text = text.replace(key, "***")
        if len(key) >= 12:  # vendors echo masked keys: "sk-abc...wxyz"
            text = text.replace(key[:8], "***").replace(key[-6:], "***")
    return text[:300]


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date (RFC 9110)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _kept_headers(headers: httpx.Headers) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in headers.items():
        n = name.lower()
        if n in NEVER_KEPT:
            continue
        if n in KEPT_HEADERS or n.startswith(KEPT_HEADER_PREFIXES):
            out[n] = value[:200]
    return out


class _Stream:
    """Parser state of one response: SSE framing, then the protocol's events."""

    __slots__ = ("rec", "t0", "protocol", "buf", "token_times", "token_pieces", "done",
                 "usage_seen", "in_body", "tool_text", "logprobs", "text_parts", "reasoning_parts",
                 "nbytes", "limit")

    def __init__(self, rec: TimingRecord, protocol: str, limit: int) -> None:
        self.rec, self.protocol, self.limit = rec, protocol, limit
        self.t0: float | None = None
        self.in_body = False  # response headers were 2xx SSE: later failures cut the stream
        self.buf = b""
        self.token_times: list[float] = []
        self.token_pieces: list[str] = []
        self.done = False
        self.usage_seen = False
        self.tool_text: list[str] = []
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
        start = 0
        while True:
            end = buf.find(b"\n\n", start)
            if end < 0:
                break
            if not self.done:
                self._event(buf[start:end], now)
            start = end + 2
        self.buf = buf[start:]
        if over:
            raise _Failure("body_too_large", f"response body exceeded {self.limit} bytes")

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
                    raise _Failure("malformed_stream", "error event without data")
                return  # comment / keep-alive / event with no data
            data = b"\n".join(parts)
        if not data.strip():
            return
        if data == b"[DONE]":
            self.done = True
            return
        try:
            obj = json.loads(data)
        except ValueError:
            raise _Failure(
                "malformed_stream", f"unparseable data line: {data[:80].decode('utf-8', 'replace')}"
            ) from None
        if not isinstance(obj, dict):
            raise _Failure("malformed_stream", "data line is not a JSON object")
        if self.protocol == "anthropic":
            self._anthropic(obj, name, now)
        else:
            self._openai(obj, now)

    def _token(self, piece: str, now: float) -> None:
        # the token estimate waits for finish(): nothing but an append while bytes arrive
        self.token_times.append(now)
        self.token_pieces.append(piece)

    def _openai(self, obj: dict[str, Any], now: float) -> None:
        # Written for the common chunk {"choices": [{"delta": {"content": ...}}]}: this runs
        # once per event while other streams wait, so lookups are kept few.
        rec = self.rec
        if "error" in obj and obj["error"]:
            raise _Failure("malformed_stream", f"error in stream: {_short_error(obj['error'])}")
        if not rec.model_id and obj.get("model"):
            rec.model_id = str(obj["model"])
        if not rec.system_fingerprint and obj.get("system_fingerprint"):
            rec.system_fingerprint = str(obj["system_fingerprint"])
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
            raise _Failure("malformed_stream", f"error in stream: {_short_error(obj.get('error'))}")
        if kind == "message_start":
            msg = obj.get("message") or {}
            rec.model_id = str(msg.get("model") or rec.model_id)
            self._anthropic_usage(msg.get("usage") or {})
        elif kind == "content_block_start":
            block = obj.get("content_block") or {}
            piece = block.get("text") or block.get("thinking") or ""
            if block.get("type") == "tool_use" and block.get("name"):
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
            if piece:
                self._token(piece, now)
        elif kind == "message_delta":
            delta = obj.get("delta") or {}
            if delta.get("stop_reason"):
                rec.finish_reason = str(delta["stop_reason"])
            self._anthropic_usage(obj.get("usage") or {})
        elif kind == "message_stop":
            self.done = True

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
        self.usage_seen = True

    def finish(self) -> None:
        """Derived fields, also for failed records (they keep what arrived)."""
        rec, t0 = self.rec, self.t0
        if t0 is None:
            return
        rec.text = "".join(self.text_parts)
        rec.reasoning_text = "".join(self.reasoning_parts)
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
        return str(err.get("message") or err.get("type") or err)[:_SNIPPET]
    return str(err)[:_SNIPPET]


async def _read_snippet(resp: httpx.Response) -> str:
    data = b""
    async for chunk in resp.aiter_bytes():
        data += chunk
        if len(data) >= _ERROR_BODY_BYTES:
            break
    return data[:_ERROR_BODY_BYTES].decode("utf-8", "replace")[:_SNIPPET]


async def _exchange(client: httpx.AsyncClient, endpoint: EndpointSpec, request: ChatRequest,
                    stream: _Stream, marks: dict[str, float],
                    on_start: Callable[[float], None] | None) -> None:
    async def trace(name: str, info: dict[str, Any]) -> None:
        marks.setdefault(name, time.perf_counter())

    rec = stream.rec
    req = _build(client, endpoint, request, trace)
    rec.started_at = time.time()
    t0 = stream.t0 = marks["t0"] = time.perf_counter()
    if on_start is not None:
        on_start(t0)
    resp = await client.send(req, stream=True)
    try:
        marks.setdefault("http11.receive_response_headers.complete", time.perf_counter())
        rec.http_status = resp.status_code
        rec.headers = _kept_headers(resp.headers)
        if resp.status_code == 429:
            rec.retry_after_s = parse_retry_after(resp.headers.get("retry-after"))
            raise _Failure("rate_limited", f"HTTP 429: {await _read_snippet(resp)}")
        if not 200 <= resp.status_code < 300:
            raise _Failure("http_status", f"HTTP {resp.status_code}: {await _read_snippet(resp)}")
        ctype = resp.headers.get("content-type", "")
        if "text/event-stream" not in ctype.lower():
            snippet = await _read_snippet(resp)
            raise _Failure("malformed_stream", f"content-type {ctype or 'missing'!r}: {snippet}")
        stream.in_body = True
        await _read_stream(resp, stream, rec, t0)
    finally:
        await resp.aclose()


async def _read_stream(resp: httpx.Response, stream: _Stream, rec: TimingRecord,
                       t0: float) -> None:
    encoded = resp.headers.get("content-encoding", "identity").lower() not in ("", "identity")
    read: Callable[[], Awaitable[bytes]] | None = resp.extensions.get(READ_CHUNK)
    if read is None or encoded:  # any other transport: httpx's iterators
        chunks = (resp.aiter_bytes() if encoded else resp.aiter_raw()).__aiter__()

        def read() -> Awaitable[bytes]:
            return anext(chunks, b"")

    perf = time.perf_counter
    while chunk := await read():
        now = perf()
        if rec.ttfb_ms is None:
            rec.ttfb_ms = (now - t0) * 1000.0
        stream.feed(chunk, now)
        if stream.done:
            break
    else:
        _check_unterminated(stream)
        return
    # Finished: read the chunked terminator so the connection goes back to the pool.
    try:
        async with asyncio.timeout(_DRAIN_AFTER_END_S):
            while await read():
                pass
    except (TimeoutError, httpx.HTTPError):
        pass


def _check_unterminated(stream: _Stream) -> None:
    rec = stream.rec
    if stream.protocol == "openai" and rec.finish_reason and stream.usage_seen:
        return  # accepted: see the module docstring
    marker = "message_stop" if stream.protocol == "anthropic" else "[DONE]"
    raise _Failure("stream_incomplete", f"stream ended before {marker}")


async def stream_chat(client: httpx.AsyncClient, endpoint: EndpointSpec, request: ChatRequest,
                      *, on_start: Callable[[float], None] | None = None) -> TimingRecord:
    """Send one streaming chat request and time it; never raises for request failures.

    ``on_start`` receives t0 (``time.perf_counter()``) for callers that compare absolute times
    with another process on the same clock (the timing-fidelity benchmark).
    """
    rec = TimingRecord(ok=False)
    marks: dict[str, float] = {}
    stream = _Stream(rec, endpoint.protocol, endpoint.max_body_bytes)
    error: tuple[str, str] | None = None
    try:
        async with asyncio.timeout(endpoint.timeout_s):
            await _exchange(client, endpoint, request, stream, marks, on_start)
    except _Failure as exc:
        error = (exc.error_class, str(exc))
    except TimeoutError:
        error = ("timeout", f"no complete answer within {endpoint.timeout_s:g} s")
    except httpx.TimeoutException as exc:
        error = ("timeout", f"{type(exc).__name__}: {exc}")
    except httpx.ConnectError as exc:
        error = ("connect", f"{type(exc).__name__}: {exc}")
    except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
        # cut after the headers: the stream is incomplete; before: the server spoke no HTTP
        cls = "stream_incomplete" if stream.in_body else "protocol"
        error = (cls, f"{type(exc).__name__}: {exc}")
    except httpx.HTTPError as exc:
        error = ("protocol", f"{type(exc).__name__}: {exc}")
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeError) as exc:
        error = ("protocol", f"{type(exc).__name__}: {exc}")
    _fill_marks(rec, marks)
    stream.finish()
    if error is None:
        rec.ok = True
    else:
        rec.error_class, rec.error_message = error[0], _scrub(error[1], endpoint)
    return rec


def _fill_marks(rec: TimingRecord, marks: dict[str, float]) -> None:
    t0 = marks.get("t0")
    if t0 is None:
        return
    ready = (
        marks.get("connection.start_tls.complete")
        or marks.get("connection.connect_tcp.complete")
        or marks.get("http11.send_request_headers.started")
        or marks.get("http11.send_request_headers.complete")
    )
    if ready is not None:
        rec.connect_ms = (ready - t0) * 1000.0
    headers = marks.get("http11.receive_response_headers.complete")
    if headers is not None:
        rec.headers_ms = (headers - t0) * 1000.0
