"""The streaming client: one request in, one :class:`~evals.records.TimingRecord` out.

This module sends the request and says what went wrong; :mod:`evals._wire` gets the response's
bytes off the socket, each read with its time; :mod:`evals._sse` turns those timestamped bytes
into events and the record's texts, tokens and times.

Timing follows docs/measures.md. ``t0 = time.perf_counter()`` just before the request is sent;
every other time is milliseconds after t0 on the same clock:

- ``connect_ms``: the connection was ready: TCP (and TLS) done for a new connection, request
  headers sent for a reused keep-alive one (then it is only the pool wait).
- ``headers_ms``: response headers parsed. ``ttfb_ms``: the first body bytes were read.
- ``ttft_ms`` / ``e2e_ms``: the first / last SSE event that carries a generated token on any
  channel (content, reasoning, tool-call name or arguments). Role-only, empty, usage-only,
  keep-alive and comment events do not count.
- ``chunk_gaps_ms`` between consecutive token-bearing events and ``chunk_tokens``, the estimated
  tokens of each one (at least 1): bursts of several tokens reveal speculative decoding.
- ``tpot_ms = (E2E - TTFT) / (output_tokens - 1)`` when output_tokens >= 2, output tokens being
  ``usage.completion_tokens`` when the server sends it, else our estimate.

An event's timestamp is when the socket read that completed it returned (where each wire takes
it: :mod:`evals._wire`).

Failures never raise: every one is a record with ``ok=False``, one of ``records.ERROR_CLASSES``,
a short message with the API key scrubbed, and whatever times and text arrived before it.
OpenAI streams that end without ``data: [DONE]`` are accepted only if they carried a
``finish_reason`` *and* a ``usage`` object (some OpenAI-compatible servers omit ``[DONE]``; a
stream cut mid-way cannot have both); otherwise they are ``stream_incomplete``. An error inside
the stream (``malformed_stream``) wins over a later cut or timeout: it is the vendor's cause.

One retry, for stale keep-alive connections only. Some servers (llama.cpp's llama-server) close
the connection after every streamed response while announcing ``Keep-Alive``; when the close
arrives late the pool hands the dead connection to the next request, which dies before the
server read it ("Server disconnected"; docs/benchmarks.md, "Real engines"). Such a request is
sent again, once, on a new connection, exactly when the failed connection was a *reused* one and
not one response byte had arrived (RFC 9112 §9.3.1: the request was never processed); the record
is that second attempt (its own t0 and times) and carries ``RETRIED_MARKER`` in ``headers``. A
new connection that fails, a timeout, or a failure after any response byte stays a failed
sample. A response that says ``Connection: close`` is not pooled: both wires already close it.
"""

from __future__ import annotations

import asyncio
import email.utils
import errno
import ipaddress
import json
import socket
import ssl
import time
import zlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
import httpx

from evals._sse import Failure, Stream
from evals._wire import (
    HTTPCORE_MARKS,
    MARKS,
    HttpcoreClient,
    ProbeClient,
    StampingHandler,
    current_lane,
    ssl_context,
)
from evals.addresses import PrivateAddress, resolve_public
from evals.records import TEXT_KEPT_CHARS, TIER_CHARS, ChatRequest, EndpointSpec, TimingRecord
from evals.scrub import key_scrubber, scrub_record
from evals.toolcalls import anthropic_fields, openai_fields

__all__ = [
    "ANTHROPIC_VERSION",
    "KEPT_HEADERS",
    "KEPT_HEADER_PREFIXES",
    "NEVER_KEPT",
    "RETRIED_MARKER",
    "HttpcoreClient",
    "ProbeClient",
    "key_scrubber",
    "make_client",
    "parse_retry_after",
    "stream_chat",
]

ANTHROPIC_VERSION = "2023-06-01"
_DRAIN_AFTER_END_S = 1.0  # read the chunked terminator after [DONE] so the connection is reused
_ERROR_BODY_BYTES = 16_384  # at most this much of a non-2xx body is read
KEPT_HEADERS = frozenset(
    {
        "x-request-id",
        "request-id",
        "openai-processing-ms",
        "openai-version",
        "openai-organization",
        "anthropic-organization-id",
        "server",
        "date",
        "retry-after",
        "cf-cache-status",
        "cf-ray",
        "via",
        "x-cache",
        "age",
        "content-type",
        "x-envoy-upstream-service-time",
        "x-tierwatch-simulated",
        "x-served-model",
    }
)
# anthropic-fast-: fast mode's own rate limits (its 429s come with retry-after)
KEPT_HEADER_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-", "anthropic-fast-", "x-tierwatch-")
NEVER_KEPT = frozenset({"authorization", "x-api-key", "set-cookie", "cookie", "api-key"})
# connect_ms: the first of these marks that is present
_READY_MARKS = ("tls", "tcp", "headers_sent")
# in TimingRecord.headers of a record whose first attempt died on a stale pooled connection
RETRIED_MARKER = "x-tierwatch-retried-stale-connection"
_STALE_ERRNOS = frozenset({errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED})


def make_client(*, backend: str = "aiohttp", **kw: Any) -> httpx.AsyncClient:
    """A client for probing: HTTP/1.1, room for 256 concurrent streams.

    ``backend="aiohttp"`` (default) gives a :class:`ProbeClient`; ``"httpcore"`` an
    :class:`HttpcoreClient`, a plain ``httpx.AsyncClient`` (kept for comparison in the
    benchmark). Timeouts are set per request from the endpoint. Keyword arguments go to
    ``httpx.AsyncClient`` (``limits=``, ``verify=``).
    """
    kw.setdefault(
        "limits",
        httpx.Limits(max_connections=256, max_keepalive_connections=64, keepalive_expiry=30.0),
    )
    kw.setdefault("timeout", httpx.Timeout(120.0))
    kw.setdefault("follow_redirects", False)
    kw.setdefault("http1", True)
    kw.setdefault("http2", False)
    verify = kw.get("verify", True)
    if not isinstance(verify, ssl.SSLContext):
        kw["verify"] = ssl_context(verify)  # shared by both wires; built once per process
    if backend == "aiohttp":
        return ProbeClient(**kw)
    if backend != "httpcore":
        raise ValueError(f"unknown backend {backend!r}")
    return HttpcoreClient(**kw)


def _openai_body(endpoint: EndpointSpec, request: ChatRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": request.messages,
        endpoint.max_tokens_field: request.max_tokens,
        "temperature": request.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if not endpoint.send_temperature:  # the model takes only its default
        del body["temperature"]
    if endpoint.reasoning_effort:
        body["reasoning_effort"] = endpoint.reasoning_effort
    if request.seed is not None:
        body["seed"] = request.seed
    if request.logprobs:
        body["logprobs"] = True
        if request.top_logprobs:
            body["top_logprobs"] = request.top_logprobs
    body.update(openai_fields(request))
    body.update(endpoint.extra_body)
    return body


def _anthropic_body(endpoint: EndpointSpec, request: ChatRequest) -> dict[str, Any]:
    # Anthropic takes system prompts as a top-level field, not as a message.
    system = "\n\n".join(m["content"] for m in request.messages if m.get("role") == "system")
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": [m for m in request.messages if m.get("role") != "system"],
        "max_tokens": request.max_tokens,  # Anthropic has no other name for it
        "temperature": request.temperature,
        "stream": True,
    }
    if endpoint.thinking_budget:  # extended thinking takes only the default temperature
        body["thinking"] = {"type": "enabled", "budget_tokens": endpoint.thinking_budget}
    if not endpoint.send_temperature or endpoint.thinking_budget:
        del body["temperature"]
    if system:
        body["system"] = system
    body.update(anthropic_fields(request))
    body.update(endpoint.extra_body)
    return body


def _responses_body(endpoint: EndpointSpec, request: ChatRequest) -> dict[str, Any]:
    # The same messages as input items; the token limit is max_output_tokens; tools are flat
    # ({"type": "function", "name", "parameters"}) and a structured format is text.format.
    body: dict[str, Any] = {
        "model": endpoint.model,
        "input": request.messages,
        "max_output_tokens": request.max_tokens,
        "temperature": request.temperature,
        "stream": True,
    }
    if not endpoint.send_temperature:
        del body["temperature"]
    if endpoint.reasoning_effort:
        body["reasoning"] = {"effort": endpoint.reasoning_effort}
    if request.tools:
        body["tools"] = [{"type": "function", **f} for f in request.tools]
    if request.response_format:
        fmt = request.response_format
        schema = fmt.get("json_schema") if fmt.get("type") == "json_schema" else None
        body["text"] = {"format": {"type": "json_schema", **schema} if schema else fmt}
    body.update(endpoint.extra_body)
    return body


def build_request(
    endpoint: EndpointSpec, request: ChatRequest
) -> tuple[str, dict[str, str], bytes]:
    """The request exactly as sent: URL, headers (the key included) and the JSON body. The
    presets' fixtures (``tests/data/presets``) are this, for a one-message probe."""
    base = endpoint.base_url.rstrip("/")
    headers = {
        **endpoint.extra_headers,  # first: the client's own below win (validation refuses them)
        "Accept": "text/event-stream",
        "Accept-Encoding": "identity",
        "Content-Type": "application/json",
    }
    if endpoint.protocol == "anthropic":
        url, body = f"{base}/messages", _anthropic_body(endpoint, request)
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if endpoint.api_key:
            headers["x-api-key"] = endpoint.api_key
    else:
        url, body = (
            (f"{base}/responses", _responses_body(endpoint, request))
            if endpoint.protocol == "responses"
            else (f"{base}/chat/completions", _openai_body(endpoint, request))
        )
        if endpoint.api_key:
            headers["Authorization"] = f"Bearer {endpoint.api_key}"
    return url, headers, json.dumps(body).encode()


async def _via_aiohttp(
    session: aiohttp.ClientSession,
    proxy: dict[str, Any],
    url: str,
    headers: dict[str, str],
    body: bytes,
    stream: Stream,
    marks: dict[str, Any],
) -> None:
    # No per-request ClientTimeout: stream_chat's one deadline covers connect and reads, and
    # aiohttp's sock_read would re-arm a timer at every socket read.
    token = MARKS.set(marks)
    try:
        async with session.post(
            url, data=body, headers=headers, allow_redirects=False, **proxy
        ) as resp:
            marks.setdefault("headers", time.perf_counter())
            content = resp.content
            proto = resp.connection.protocol if resp.connection is not None else None
            stamps = None
            if isinstance(proto, StampingHandler):
                proto.reader, stamps = content, proto.stamps
                stamps.clear()
            try:
                await _take_response(
                    resp.status, resp.headers, content.readany, stream, content.at_eof, stamps
                )
            finally:
                if isinstance(proto, StampingHandler):
                    proto.reader = None
                    proto.stamps.clear()
    finally:
        MARKS.reset(token)


async def _via_httpx(
    client: httpx.AsyncClient,
    endpoint: EndpointSpec,
    url: str,
    headers: dict[str, str],
    body: bytes,
    stream: Stream,
    marks: dict[str, Any],
) -> None:
    async def trace(name: str, info: dict[str, Any]) -> None:
        if name in HTTPCORE_MARKS:
            marks.setdefault(HTTPCORE_MARKS[name], time.perf_counter())
            if name == "http11.send_request_headers.started" and "tcp" not in marks:
                marks["reused"] = True  # httpcore connects inside the request that needs it

    extensions: dict[str, Any] = {"trace": trace}
    if endpoint.public_only:
        url, headers, extensions = await _pinned(url, headers, extensions)
    req = client.build_request(
        "POST",
        url,
        content=body,
        headers=headers,
        timeout=httpx.Timeout(endpoint.timeout_s),
        extensions=extensions,
    )
    resp = await client.send(req, stream=True)
    try:
        marks.setdefault("headers", time.perf_counter())
        chunks = resp.aiter_raw().__aiter__()  # decoded in _take_response, as on aiohttp
        await _take_response(resp.status_code, resp.headers, lambda: anext(chunks, b""), stream)
    finally:
        await resp.aclose()


async def _pinned(
    url: str, headers: dict[str, str], extensions: dict[str, Any]
) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The httpx wire's request to public addresses only: the host resolved and every address
    checked (``evals.addresses.resolve_public``), then the URL aimed at the first of them with
    the name kept as the Host header and the TLS server name (httpcore's ``sni_hostname``), so
    the connection goes to the address that was checked. (The aiohttp wire does the same in its
    connector, once per new connection through its DNS cache: ``evals._wire``; this wire, the
    comparison path, looks up at every request.)"""
    parts = httpx.URL(url)
    try:
        ipaddress.ip_address(parts.host)
        literal = True
    except ValueError:
        literal = False
    resolved = await resolve_public(
        parts.host, parts.port or (443 if parts.scheme == "https" else 80)
    )
    if literal:
        return url, headers, extensions
    pinned = parts.copy_with(host=resolved[0])
    host = parts.host if parts.port is None else f"{parts.host}:{parts.port}"
    return (
        str(pinned),
        {**headers, "Host": host},
        {**extensions, "sni_hostname": parts.host},
    )


async def _take_response(
    status: int,
    headers: Mapping[str, str],
    read: Callable[[], Awaitable[bytes]],
    stream: Stream,
    at_eof: Callable[[], bool] | None = None,
    stamps: list[float] | None = None,
) -> None:
    """Status, headers and body of either wire, the same way. ``at_eof`` (aiohttp) says the
    body's end was already read, which spares the drain its timer. ``stamps`` (aiohttp): the
    time each socket read arrived, as body bytes so far then time, taken by the protocol;
    bytes without one (those that came with the headers) take the time the read returned."""
    rec = stream.rec
    rec.http_status = status
    rec.headers = _kept_headers(headers)
    stream.take_tier_headers(headers)
    if status == 429:
        rec.retry_after_s = parse_retry_after(headers.get("retry-after"))
        raise Failure("rate_limited", f"HTTP 429: {await _read_snippet(read)}")
    if not 200 <= status < 300:
        raise Failure("http_status", f"HTTP {status}: {await _read_snippet(read)}")
    ctype = headers.get("content-type", "")
    if "text/event-stream" not in ctype.lower():
        snippet = await _read_snippet(read)
        raise Failure("malformed_stream", f"content-type {ctype or 'missing'!r}: {snippet}")
    stream.in_body = True
    decoder = _decoder(headers.get("content-encoding", ""))
    if decoder is not None:
        read, stamps = _decoded(read, decoder), None  # stamps count encoded bytes: not these
    t0, perf = stream.t0 or 0.0, time.perf_counter
    while chunk := await read():
        now = perf()
        if stamps:  # this read may join several socket reads: each part keeps its own time
            before, done = stream.nbytes, 0
            for k in range(0, len(stamps), 2):
                total, when = stamps[k], stamps[k + 1]
                upto = min(int(total) - before, len(chunk))
                if upto > done:
                    if rec.ttfb_ms is None:
                        rec.ttfb_ms = (min(when, now) - t0) * 1000.0
                    stream.feed(chunk[done:upto], when)
                    done = upto
                    if stream.stop:
                        break
            stamps.clear()
            if done < len(chunk) and not stream.stop:
                stream.feed(chunk[done:], now)
        else:
            if rec.ttfb_ms is None:
                rec.ttfb_ms = (now - t0) * 1000.0
            stream.feed(chunk, now)
        if stream.stop:
            break
    if not stream.done or (at_eof is not None and at_eof()):
        return  # stopped early (parse() and _check_unterminated say why) or already drained
    try:  # read the chunked terminator so the connection goes back to the pool
        async with asyncio.timeout(_DRAIN_AFTER_END_S):
            while await read():
                pass
    except (TimeoutError, httpx.HTTPError, aiohttp.ClientError):
        pass


def _decoder(encoding: str) -> Any:
    """A decompressor for a body sent compressed despite ``Accept-Encoding: identity`` (some
    vendors gzip their streams anyway), or None for an identity body. Both wires get the raw
    bytes and decode here, so they agree; an encoding without a decoder here is its own class,
    not a stream blamed for being cut."""
    names = [e.strip().lower() for e in encoding.split(",") if e.strip()]
    names = [n for n in names if n != "identity"]
    if not names:
        return None
    if names in (["gzip"], ["x-gzip"]):
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    if names == ["deflate"]:
        return _Deflate()
    raise Failure(
        "unsupported_encoding", f"body sent with content-encoding {encoding[:40]!r}: not decoded"
    )


class _Deflate:
    """HTTP "deflate": zlib-wrapped as the RFC says, or raw deflate as some servers send."""

    def __init__(self) -> None:
        self.inner: Any = None

    def decompress(self, data: bytes) -> bytes:
        if self.inner is None:
            raw = bool(data) and (data[0] & 0x0F) != 8  # no zlib header: raw deflate
            self.inner = zlib.decompressobj(-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
        return self.inner.decompress(data)  # type: ignore[no-any-return]


def _decoded(read: Callable[[], Awaitable[bytes]], decoder: Any) -> Callable[[], Awaitable[bytes]]:
    async def decoded_read() -> bytes:
        while chunk := await read():
            try:
                out = decoder.decompress(chunk)
            except zlib.error as exc:
                msg = f"compressed body does not decode: {exc}"
                raise Failure("malformed_stream", msg) from None
            if out:
                return out  # type: ignore[no-any-return]
        return b""

    return decoded_read


async def _read_snippet(read: Callable[[], Awaitable[bytes]]) -> str:
    data = b""
    while len(data) < _ERROR_BODY_BYTES and (chunk := await read()):
        data += chunk
    # whole: the message is cut only once scrubbed of the key (``_scrub``), so no cut hides
    # a piece of the key from the scrubber
    return data[:_ERROR_BODY_BYTES].decode("utf-8", "replace")


def _kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in headers.items():
        n = name.lower()
        if n in NEVER_KEPT:
            continue
        if n in KEPT_HEADERS or n.startswith(KEPT_HEADER_PREFIXES):
            out[n] = value  # cut to 200 characters once scrubbed of the key (_bound_record)
    return out


def _check_unterminated(stream: Stream) -> None:
    rec = stream.rec
    if stream.done or not stream.in_body:
        return
    if stream.protocol == "openai" and rec.finish_reason and stream.usage_seen:
        return  # accepted: see the module docstring
    if stream.protocol == "responses" and rec.finish_reason and rec.finish_reason != "completed":
        return  # response.incomplete (e.g. max_output_tokens): a terminal event of its own
    marker = {"anthropic": "message_stop", "responses": "response.completed"}.get(
        stream.protocol, "[DONE]"
    )
    raise Failure("stream_incomplete", f"stream ended before {marker}")


def _classify(exc: BaseException, in_body: bool, timeout_s: float) -> tuple[str, str]:
    """Error class and message of an exception from either wire (or the overall deadline)."""
    msg = f"{type(exc).__name__}: {exc}"
    cut = "stream_incomplete" if in_body else "protocol"  # after the headers vs before
    if isinstance(exc, Failure):
        return exc.error_class, str(exc)
    if isinstance(
        exc,
        aiohttp.ClientConnectorError
        | PrivateAddress
        | socket.gaierror
        | httpx.ConnectError
        | aiohttp.InvalidURL
        | httpx.UnsupportedProtocol
        | httpx.InvalidURL,
    ):
        return "connect", msg
    if isinstance(exc, httpx.TimeoutException):
        return "timeout", msg
    if isinstance(exc, TimeoutError):  # asyncio.timeout, and aiohttp's own timeouts
        if type(exc) is TimeoutError:
            msg = f"no complete answer within {timeout_s:g} s"
        return "timeout", msg
    if isinstance(
        exc,
        aiohttp.ClientPayloadError
        | aiohttp.ServerDisconnectedError
        | httpx.RemoteProtocolError
        | httpx.ReadError
        | aiohttp.ClientOSError,
    ):
        return cut, msg
    return "protocol", msg


async def stream_chat(
    client: httpx.AsyncClient,
    endpoint: EndpointSpec,
    request: ChatRequest,
    *,
    on_start: Callable[[float], None] | None = None,
) -> TimingRecord:
    """Send one streaming chat request and time it; never raises for request failures.

    ``on_start`` receives t0 (``time.perf_counter()``) for callers that compare absolute times
    with another process on the same clock (the timing-fidelity benchmark); after a retry on a
    new connection (module docstring) it is called again: the last t0 is the record's. The
    overall deadline ``endpoint.timeout_s`` covers both attempts.
    """
    rec = TimingRecord(ok=False)
    lane = current_lane()
    stream = Stream(
        rec, endpoint.protocol, endpoint.max_body_bytes, lane, endpoint.served_tier_fields
    )
    marks: dict[str, Any] = {}
    error: tuple[str, str] | None = None
    retried = False

    async def attempt(url: str, headers: dict[str, str], body: bytes, *, fresh: bool) -> None:
        def start() -> None:  # t0 after any client set-up, just before the request goes out
            rec.started_at = time.time()
            stream.t0 = time.perf_counter()
            if on_start is not None:
                on_start(stream.t0)

        if isinstance(client, ProbeClient):
            public_only = endpoint.public_only
            session = (
                client.fresh_session(public_only=public_only)
                if fresh
                else client.aiohttp_session(public_only=public_only)
            )
            proxy = client.proxy_kwargs(url)
            start()
            await _via_aiohttp(session, proxy, url, headers, body, stream, marks)
        elif fresh and isinstance(client, HttpcoreClient):
            async with client.one_off() as one_off:
                start()
                await _via_httpx(one_off, endpoint, url, headers, body, stream, marks)
        else:  # another httpx client: its pool has dropped the dead connection, new not sure
            start()
            await _via_httpx(client, endpoint, url, headers, body, stream, marks)

    await lane.turn()  # building and sending the request: one piece
    try:
        url, headers, body = build_request(endpoint, request)
        async with asyncio.timeout(endpoint.timeout_s):
            try:
                await attempt(url, headers, body, fresh=False)
            except (httpx.HTTPError, aiohttp.ClientError, OSError) as exc:
                if not _died_stale(exc, marks):
                    raise
                retried = True
                marks.clear()  # nothing else of the dead attempt was kept: no response byte
                await attempt(url, headers, body, fresh=True)
    except (
        Failure,
        TimeoutError,
        httpx.HTTPError,
        aiohttp.ClientError,
        httpx.InvalidURL,
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
        UnicodeError,
        OSError,
    ) as exc:
        error = _classify(exc, stream.in_body, endpoint.timeout_s)
    await lane.turn()  # the connection is back in the pool; the rest of the parsing and the
    # record: one piece
    _fill_marks(rec, stream.t0, marks)
    try:  # the events that arrived, even when the request failed later
        stream.parse()
        if error is None:
            _check_unterminated(stream)
    except Failure as exc:
        if error is None or error[0] != "body_too_large":  # the vendor's own error is the cause
            error = (exc.error_class, str(exc))
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeError) as exc:
        error = error or ("protocol", f"{type(exc).__name__}: {exc}")
    refusal = stream.refused() if error is None else ""
    if refusal:  # an answer, but not one: its own class, its text kept (never an empty ok)
        error = ("refusal", f"the model refused: {refusal}")
    if error is None and not stream.token_times and not rec.finish_reason:
        error = ("empty_stream", "the stream ended with no token and no finish reason")
    try:
        stream.finish()
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeError, OverflowError) as exc:
        error = ("protocol", f"{type(exc).__name__}: {exc}")  # never out of stream_chat
    if retried:
        rec.headers[RETRIED_MARKER] = "1"
    else:  # the marker is ours alone, even if a server sends a header of that name
        rec.headers.pop(RETRIED_MARKER, None)
    if error is None:
        rec.ok = True
    else:
        rec.error_class, rec.error_message = error[0], _scrub(error[1], endpoint)
    for secret in (endpoint.api_key, *endpoint.secrets):  # every secret before any cut, so
        scrub_record(rec, secret)  # no cut leaves a piece of one
    _bound_record(rec)
    if rec.error_class == "body_too_large":
        rec.error_message = _keep_prefix(rec, rec.error_message)
    return rec


def _keep_prefix(rec: TimingRecord, message: str) -> str:
    """An oversized body keeps a bounded prefix of its texts, and its message says so."""
    cut = [
        f"{name} {len(getattr(rec, name))} chars"
        for name in ("text", "reasoning_text")
        if len(getattr(rec, name)) > TEXT_KEPT_CHARS
    ]
    rec.text = rec.text[:TEXT_KEPT_CHARS]
    rec.reasoning_text = rec.reasoning_text[:TEXT_KEPT_CHARS]
    if rec.logprobs is not None:
        rec.logprobs = rec.logprobs[: TEXT_KEPT_CHARS // 16]
    if cut:
        message += f"; kept the first {TEXT_KEPT_CHARS} chars of {', '.join(cut)}"
    return message


def _died_stale(exc: BaseException, marks: Mapping[str, Any]) -> bool:
    """Did a reused pooled connection die before one response byte arrived?

    Then the server had closed it without reading the request, which may be sent again
    (RFC 9112 §9.3.1). Each wire says "no byte" its own way. aiohttp gives
    ``ServerDisconnectedError`` the response head it had begun to parse (its default string
    when none had begun). httpcore says "without sending a response" while its parser waits for
    the status line, which also covers a status line cut after a few bytes (httpcore does not
    tell them apart; no server was seen to do that). A reset or broken pipe is the same close
    seen as an error; neither wire says whether a head had begun then.
    """
    if not marks.get("reused") or "headers" in marks:
        return False
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return False
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return isinstance(exc.message, str)
    if isinstance(exc, httpx.RemoteProtocolError):
        return "without sending a response" in str(exc)
    if isinstance(exc, aiohttp.ClientConnectionResetError):
        return True  # raised only while writing the request: the transport was closing
    if isinstance(exc, aiohttp.ClientOSError | httpx.ReadError | httpx.WriteError):
        cause: BaseException | None = exc
        for _ in range(6):  # httpx: ReadError <- httpcore.ReadError <- anyio <- OSError
            if cause is None:
                break
            if isinstance(cause, OSError) and cause.errno in _STALE_ERRNOS:
                return True
            cause = cause.__cause__ or cause.__context__
    return False


def _fill_marks(rec: TimingRecord, t0: float | None, marks: dict[str, Any]) -> None:
    if t0 is None:
        return
    ready = next((marks[m] for m in _READY_MARKS if m in marks), None)
    if ready is not None:
        rec.connect_ms = (ready - t0) * 1000.0
    if "headers" in marks:
        rec.headers_ms = (marks["headers"] - t0) * 1000.0


def _scrub(message: str, endpoint: EndpointSpec) -> str:
    """One line, at most ~300 characters, the key replaced (vendors echo keys in 401 bodies),
    and every header secret too."""
    text = " ".join(str(message).split())
    for secret in (endpoint.api_key, *endpoint.secrets):
        text = key_scrubber(secret)(text)
    return text[:300]


def _bound_record(rec: TimingRecord) -> None:
    """The server's strings cut to their columns' lengths. Called only once every string of
    the record (every field, every string inside its JSON values, the logprobs as one joined
    text) is scrubbed of every secret (``evals.scrub``): a key across a cut would otherwise
    keep a piece too short for the scrubber to know."""
    rec.served_tier = rec.served_tier[:TIER_CHARS]
    rec.model_id = rec.model_id[:200]
    rec.system_fingerprint = rec.system_fingerprint[:200]
    if rec.finish_reason is not None:
        rec.finish_reason = rec.finish_reason[:32]
    rec.headers = {k: v[:200] for k, v in rec.headers.items()}


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
