"""The streaming client: one request in, one :class:`~evals.records.TimingRecord` out.

Timing follows DESIGN.md exactly. ``t0 = time.perf_counter()`` just before the request is sent;
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

An event's timestamp is when the socket read that completed it returned: on the aiohttp wire
stamped in the protocol callback right after the ``recv``, on the httpx wire when the read
returns to the reading task. SSE framing is hand-written over raw bytes (``Accept-Encoding:
identity``): events cut on blank lines and kept with their time. Everything else (building and
sending the request, each event's JSON, the record) takes turns in a lane between socket polls
(:class:`_Lane`), so with hundreds of streams no read waits behind a wave of other work to be
stamped (error events still end reading at once).

Two wires, one measurement. :func:`make_client` returns a :class:`ProbeClient`, an ordinary
``httpx.AsyncClient`` whose streams ``stream_chat`` sends through aiohttp; any other httpx
client is used as it is. Why: httpcore's pool re-scans every connection at each request start
and end (quadratic in open connections) and each read passes anyio cancel scopes, which cost
~0.4 ms of CPU per SSE event at 200 concurrent streams and delayed timestamps by 100+ ms;
aiohttp reads in asyncio protocol callbacks with the llhttp C parser, like the raw-socket floor
(figures: docs/benchmarks.md, "Timing fidelity", from ``benchmarks/timing_fidelity.py``).

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
import contextvars
import email.utils
import errno
import functools
import json
import json.scanner
import ssl
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
import httpx
from aiohttp.client_proto import ResponseHandler
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from evals.records import ChatRequest, EndpointSpec, TimingRecord
from evals.tokens import estimate_tokens

ANTHROPIC_VERSION = "2023-06-01"
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
# connect_ms: the first of these marks that is present
_READY_MARKS = ("tls", "tcp", "headers_sent")
# in TimingRecord.headers of a record whose first attempt died on a stale pooled connection
RETRIED_MARKER = "x-tierwatch-retried-stale-connection"
_STALE_ERRNOS = frozenset({errno.ECONNRESET, errno.EPIPE, errno.ECONNABORTED})
_LANE_BUDGET_S = 50e-6  # deferred parsing per lane turn: about one start of a request or less
# the running stream_chat's connection marks, for the aiohttp wire's connector and request hooks
_MARKS: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "tierwatch_marks", default=None)


class _Lane:
    """Work that stamps no time takes turns here: one piece every other event-loop iteration.

    Why: when a wave of streams ends together (they started together), every one of them
    parses its events, builds its record and its caller starts the next request, all ready at
    once. asyncio runs every ready callback before it polls the sockets again, so the first
    tokens of streams started early in the wave waited behind the whole wave (10-25 ms at 200
    streams; docs/benchmarks.md, "Timing fidelity").

    How the order works (asyncio's ``_run_once``: poll, append the I/O callbacks, append the
    due timers, run what is queued). A read is stamped two steps after its bytes arrive: the
    protocol callback of the iteration that polled them, then the reading task's step in the
    next iteration. A piece is released by a zero-delay timer, which runs after that
    iteration's I/O callbacks, so the reading steps they queued run before the piece; and the
    next piece is released one iteration later, so bytes that arrive while a piece runs are
    polled in an iteration without a piece. A read waits behind at most the piece that was
    running when its bytes arrived.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting: deque[asyncio.Future[None] | Callable[[], None]] = deque()
        self.scheduled = False

    async def turn(self) -> None:
        """Wait for a turn; the piece is what the caller does until its next ``await``."""
        fut = self.loop.create_future()
        self._add(fut)
        await fut

    def defer(self, piece: Callable[[], None]) -> None:
        """Run ``piece`` (short, must not raise) in its turn."""
        self._add(piece)

    def _add(self, item: asyncio.Future[None] | Callable[[], None]) -> None:
        self.waiting.append(item)
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_later(0, self._release)

    def _release(self) -> None:
        # Deferred pieces (a few events' JSON each) run here, several per turn up to a budget,
        # so that each does not cost two loop iterations; a waiting task gets a turn alone.
        waiting, perf = self.waiting, time.perf_counter
        began = perf()
        ran = False
        try:
            while waiting:
                item = waiting[0]
                if isinstance(item, asyncio.Future):
                    if ran:
                        break
                    waiting.popleft()
                    if not item.done():  # a cancelled waiter gives its turn away
                        item.set_result(None)
                        break
                    continue
                waiting.popleft()
                ran = True
                item()
                if perf() - began > _LANE_BUDGET_S:
                    break
        finally:  # a piece that raised (the loop reports it) must not stall every stream
            if waiting:
                self.loop.call_soon(self._arm)  # next iteration: the piece runs, then the timer
            else:
                self.scheduled = False

    def _arm(self) -> None:
        self.loop.call_later(0, self._release)


_LANES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Lane] = (
    weakref.WeakKeyDictionary())


def _lane() -> _Lane:
    loop = asyncio.get_running_loop()
    lane = _LANES.get(loop)
    if lane is None:
        lane = _LANES[loop] = _Lane(loop)
    return lane


class _Failure(Exception):
    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class


class _StampingHandler(ResponseHandler):
    """aiohttp's protocol, stamping each socket read of a stream's body as it is received.

    The stamp is taken in the protocol callback, right after the ``recv``, instead of in the
    reading task's next step: with hundreds of streams, that step may wait behind other ready
    work in the event loop, the callback does not (see :class:`_Lane`).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.reader: aiohttp.StreamReader | None = None  # the body being stamped
        # per socket read: body bytes received so far, then its time (flat: no tuples to track)
        self.stamps: list[float] = []

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        super().data_received(data)
        if self.reader is not None:
            total = self.reader.total_bytes
            if not self.stamps or self.stamps[-2] < total:
                self.stamps += (total, now)


class _TimedConnector(aiohttp.TCPConnector):
    """Marks when a new connection is ready (aiohttp's "create" includes TLS). Cheaper than a
    ``TraceConfig``, which awaits a signal coroutine per trace event (~10 per request). Its
    connections stamp body reads in the protocol callback (:class:`_StampingHandler`)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._factory = functools.partial(_StampingHandler, loop=self._loop)

    async def _create_connection(self, req: aiohttp.ClientRequest, traces: Any,
                                 timeout: aiohttp.ClientTimeout) -> Any:
        proto = await super()._create_connection(req, traces, timeout)
        marks = _MARKS.get()
        if marks is not None:
            marks.setdefault("tls" if req.is_ssl() else "tcp", time.perf_counter())
        return proto


class _TimedRequest(aiohttp.ClientRequest):
    """Marks a pooled (reused) connection and when the request head was handed to it."""

    async def send(self, conn: Any) -> aiohttp.ClientResponse:
        marks = _MARKS.get()
        if marks is not None and "tcp" not in marks and "tls" not in marks:
            marks["reused"] = True  # set before writing: a write may fail on a stale connection
        resp = await super().send(conn)
        if marks is not None:
            marks.setdefault("headers_sent", time.perf_counter())
        return resp


class ProbeClient(httpx.AsyncClient):
    """An ``httpx.AsyncClient`` (usable for anything) that also owns an aiohttp session which
    :func:`stream_chat` uses for its streams (why: see the module docstring).

    Proxies come from the environment (``HTTP(S)_PROXY``, ``NO_PROXY``) as in httpx, looked up
    once per request URL and kept for the client's life: aiohttp's own ``trust_env`` looks them
    up (and reads ``.netrc``) in a worker thread at every request, two thread hops per stream.
    """

    def __init__(self, *, limits: httpx.Limits | None = None,
                 verify: bool | str | ssl.SSLContext = True, **kw: Any) -> None:
        limits = limits or httpx.Limits(max_connections=256, max_keepalive_connections=64)
        super().__init__(limits=limits, verify=verify, **kw)
        self._probe_limits = limits
        self._probe_ssl = verify if isinstance(verify, ssl.SSLContext) else _ssl_context(verify)
        self._session: aiohttp.ClientSession | None = None
        self._fresh: aiohttp.ClientSession | None = None
        self._proxies: dict[str, dict[str, Any]] = {}  # per request URL (a few per endpoint)

    def proxy_kwargs(self, url: str) -> dict[str, Any]:
        """``proxy=`` (and its credentials) for a request to ``url``; ``{}`` when direct."""
        kwargs = self._proxies.get(url)
        if kwargs is None:
            kwargs = {}
            if self.trust_env:
                try:
                    proxy, auth = get_env_proxy_for_url(URL(url))
                except LookupError:
                    pass
                else:
                    kwargs["proxy"] = proxy
                    if auth is not None:
                        kwargs["proxy_headers"] = {"Proxy-Authorization": auth.encode()}
            self._proxies[url] = kwargs
        return kwargs

    def aiohttp_session(self) -> aiohttp.ClientSession:
        """The session, created on first use inside the running event loop."""
        if self._session is None or self._session.closed:
            self._session = self._new_session(force_close=False)
        return self._session

    def fresh_session(self) -> aiohttp.ClientSession:
        """A session that opens a new connection for every request and closes it after: for the
        retry after a stale keep-alive connection (see the module docstring)."""
        if self._fresh is None or self._fresh.closed:
            self._fresh = self._new_session(force_close=True)
        return self._fresh

    def _new_session(self, *, force_close: bool) -> aiohttp.ClientSession:
        pooling: dict[str, Any] = {"force_close": True} if force_close else {
            "keepalive_timeout": self._probe_limits.keepalive_expiry or 30.0}
        connector = _TimedConnector(
            limit=self._probe_limits.max_connections or 0, limit_per_host=0,
            ssl=self._probe_ssl, **pooling,
        )
        return aiohttp.ClientSession(
            connector=connector, request_class=_TimedRequest, auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(), timeout=aiohttp.ClientTimeout(total=None),
            trust_env=False,  # proxies: proxy_kwargs(), once per request URL
        )

    async def _close_sessions(self) -> None:
        for session in (self._session, self._fresh):
            if session is not None:
                await session.close()

    async def aclose(self) -> None:
        await super().aclose()
        await self._close_sessions()

    async def __aexit__(self, *exc: Any) -> None:
        await super().__aexit__(*exc)
        await self._close_sessions()


class HttpcoreClient(httpx.AsyncClient):
    """A plain ``httpx.AsyncClient`` (httpcore's pool) that keeps its TLS context, so that the
    retry after a stale keep-alive connection can open a new connection the same way."""

    def __init__(self, *, verify: ssl.SSLContext, **kw: Any) -> None:
        super().__init__(verify=verify, **kw)
        self._probe_ssl = verify

    def one_off(self) -> httpx.AsyncClient:
        """A client with no pooled connection, whose connection is closed after its response."""
        return httpx.AsyncClient(
            verify=self._probe_ssl, trust_env=self.trust_env, http1=True, http2=False,
            follow_redirects=False, limits=httpx.Limits(max_keepalive_connections=0),
        )


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
        kw["verify"] = _ssl_context(verify)  # shared by both wires; built once per process
    if backend == "aiohttp":
        return ProbeClient(**kw)
    if backend != "httpcore":
        raise ValueError(f"unknown backend {backend!r}")
    return HttpcoreClient(**kw)


@functools.lru_cache(maxsize=8)
def _ssl_context(verify: bool | str) -> ssl.SSLContext:
    """httpx's context (certifi's CAs), built once: loading the CA file takes ~50 ms."""
    return httpx.create_ssl_context(verify=verify)


_HTTPCORE_MARKS = {
    "connection.start_tls.complete": "tls",
    "connection.connect_tcp.complete": "tcp",
    "http11.send_request_headers.started": "headers_sent",
    "http11.receive_response_headers.complete": "headers",
}


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


def _request_parts(endpoint: EndpointSpec, request: ChatRequest
                   ) -> tuple[str, dict[str, str], bytes]:
    base = endpoint.base_url.rstrip("/")
    headers = {"Accept": "text/event-stream", "Accept-Encoding": "identity",
               "Content-Type": "application/json"}
    if endpoint.protocol == "anthropic":
        url, body = f"{base}/messages", _anthropic_body(endpoint, request)
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if endpoint.api_key:
            headers["x-api-key"] = endpoint.api_key
    else:
        url, body = f"{base}/chat/completions", _openai_body(endpoint, request)
        if endpoint.api_key:
            headers["Authorization"] = f"Bearer {endpoint.api_key}"
    return url, headers, json.dumps(body).encode()


async def _via_aiohttp(session: aiohttp.ClientSession, proxy: dict[str, Any], url: str,
                       headers: dict[str, str], body: bytes, stream: _Stream,
                       marks: dict[str, Any]) -> None:
    # No per-request ClientTimeout: stream_chat's one deadline covers connect and reads, and
    # aiohttp's sock_read would re-arm a timer at every socket read.
    token = _MARKS.set(marks)
    try:
        async with session.post(url, data=body, headers=headers, allow_redirects=False,
                                **proxy) as resp:
            marks.setdefault("headers", time.perf_counter())
            content = resp.content
            proto = resp.connection.protocol if resp.connection is not None else None
            stamps = None
            if isinstance(proto, _StampingHandler):
                proto.reader, stamps = content, proto.stamps
                stamps.clear()
            try:
                await _take_response(resp.status, resp.headers, content.readany, stream,
                                     content.at_eof, stamps)
            finally:
                if isinstance(proto, _StampingHandler):
                    proto.reader = None
                    proto.stamps.clear()
    finally:
        _MARKS.reset(token)


async def _via_httpx(client: httpx.AsyncClient, endpoint: EndpointSpec, url: str,
                     headers: dict[str, str], body: bytes, stream: _Stream,
                     marks: dict[str, Any]) -> None:
    async def trace(name: str, info: dict[str, Any]) -> None:
        if name in _HTTPCORE_MARKS:
            marks.setdefault(_HTTPCORE_MARKS[name], time.perf_counter())
            if name == "http11.send_request_headers.started" and "tcp" not in marks:
                marks["reused"] = True  # httpcore connects inside the request that needs it

    req = client.build_request("POST", url, content=body, headers=headers,
                               timeout=httpx.Timeout(endpoint.timeout_s),
                               extensions={"trace": trace})
    resp = await client.send(req, stream=True)
    try:
        marks.setdefault("headers", time.perf_counter())
        encoded = resp.headers.get("content-encoding", "identity").lower() not in ("", "identity")
        chunks = (resp.aiter_bytes() if encoded else resp.aiter_raw()).__aiter__()
        await _take_response(resp.status_code, resp.headers, lambda: anext(chunks, b""), stream)
    finally:
        await resp.aclose()


async def _take_response(status: int, headers: Mapping[str, str],
                         read: Callable[[], Awaitable[bytes]], stream: _Stream,
                         at_eof: Callable[[], bool] | None = None,
                         stamps: list[float] | None = None) -> None:
    """Status, headers and body of either wire, the same way. ``at_eof`` (aiohttp) says the
    body's end was already read, which spares the drain its timer. ``stamps`` (aiohttp): the
    time each socket read arrived, as body bytes so far then time, taken by the protocol;
    bytes without one (those that came with the headers) take the time the read returned."""
    rec = stream.rec
    rec.http_status = status
    rec.headers = _kept_headers(headers)
    if status == 429:
        rec.retry_after_s = parse_retry_after(headers.get("retry-after"))
        raise _Failure("rate_limited", f"HTTP 429: {await _read_snippet(read)}")
    if not 200 <= status < 300:
        raise _Failure("http_status", f"HTTP {status}: {await _read_snippet(read)}")
    ctype = headers.get("content-type", "")
    if "text/event-stream" not in ctype.lower():
        snippet = await _read_snippet(read)
        raise _Failure("malformed_stream", f"content-type {ctype or 'missing'!r}: {snippet}")
    stream.in_body = True
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


async def _read_snippet(read: Callable[[], Awaitable[bytes]]) -> str:
    data = b""
    while len(data) < _ERROR_BODY_BYTES and (chunk := await read()):
        data += chunk
    return data[:_ERROR_BODY_BYTES].decode("utf-8", "replace")[:_SNIPPET]


def _kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in headers.items():
        n = name.lower()
        if n in NEVER_KEPT:
            continue
        if n in KEPT_HEADERS or n.startswith(KEPT_HEADER_PREFIXES):
            out[n] = value[:200]
    return out


def _check_unterminated(stream: _Stream) -> None:
    rec = stream.rec
    if stream.done or not stream.in_body:
        return
    if stream.protocol == "openai" and rec.finish_reason and stream.usage_seen:
        return  # accepted: see the module docstring
    marker = "message_stop" if stream.protocol == "anthropic" else "[DONE]"
    raise _Failure("stream_incomplete", f"stream ended before {marker}")


def _classify(exc: BaseException, in_body: bool, timeout_s: float) -> tuple[str, str]:
    """Error class and message of an exception from either wire (or the overall deadline)."""
    msg = f"{type(exc).__name__}: {exc}"
    cut = "stream_incomplete" if in_body else "protocol"  # after the headers vs before
    if isinstance(exc, _Failure):
        return exc.error_class, str(exc)
    if isinstance(exc, aiohttp.ClientConnectorError | httpx.ConnectError | aiohttp.InvalidURL
                  | httpx.UnsupportedProtocol | httpx.InvalidURL):
        return "connect", msg
    if isinstance(exc, httpx.TimeoutException):
        return "timeout", msg
    if isinstance(exc, TimeoutError):  # asyncio.timeout, and aiohttp's own timeouts
        if type(exc) is TimeoutError:
            msg = f"no complete answer within {timeout_s:g} s"
        return "timeout", msg
    if isinstance(exc, aiohttp.ClientPayloadError | aiohttp.ServerDisconnectedError
                  | httpx.RemoteProtocolError | httpx.ReadError | aiohttp.ClientOSError):
        return cut, msg
    return "protocol", msg


async def stream_chat(client: httpx.AsyncClient, endpoint: EndpointSpec, request: ChatRequest,
                      *, on_start: Callable[[float], None] | None = None) -> TimingRecord:
    """Send one streaming chat request and time it; never raises for request failures.

    ``on_start`` receives t0 (``time.perf_counter()``) for callers that compare absolute times
    with another process on the same clock (the timing-fidelity benchmark); after a retry on a
    new connection (module docstring) it is called again: the last t0 is the record's. The
    overall deadline ``endpoint.timeout_s`` covers both attempts.
    """
    rec = TimingRecord(ok=False)
    lane = _lane()
    stream = _Stream(rec, endpoint.protocol, endpoint.max_body_bytes, lane)
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
            session = client.fresh_session() if fresh else client.aiohttp_session()
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
        url, headers, body = _request_parts(endpoint, request)
        async with asyncio.timeout(endpoint.timeout_s):
            try:
                await attempt(url, headers, body, fresh=False)
            except (httpx.HTTPError, aiohttp.ClientError, OSError) as exc:
                if not _died_stale(exc, marks):
                    raise
                retried = True
                marks.clear()  # nothing else of the dead attempt was kept: no response byte
                await attempt(url, headers, body, fresh=True)
    except (_Failure, TimeoutError, httpx.HTTPError, aiohttp.ClientError, httpx.InvalidURL,
            ValueError, TypeError, KeyError, AttributeError, UnicodeError, OSError) as exc:
        error = _classify(exc, stream.in_body, endpoint.timeout_s)
    await lane.turn()  # the connection is back in the pool; the rest of the parsing and the
    # record: one piece
    _fill_marks(rec, stream.t0, marks)
    try:  # the events that arrived, even when the request failed later
        stream.parse()
        if error is None:
            _check_unterminated(stream)
    except _Failure as exc:
        if error is None or error[0] != "body_too_large":  # the vendor's own error is the cause
            error = (exc.error_class, str(exc))
    except (ValueError, TypeError, KeyError, AttributeError, UnicodeError) as exc:
        error = error or ("protocol", f"{type(exc).__name__}: {exc}")
    stream.finish()
    if retried:
        rec.headers[RETRIED_MARKER] = "1"
    else:  # the marker is ours alone, even if a server sends a header of that name
        rec.headers.pop(RETRIED_MARKER, None)
    if error is None:
        rec.ok = True
    else:
        rec.error_class, rec.error_message = error[0], _scrub(error[1], endpoint)
    return rec


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


class _Stream:
    """One response body: SSE framing while bytes arrive, the protocol's events afterwards.

    While the stream runs, :meth:`feed` does only what the raw-socket floor does: stamp the
    read, cut complete events on blank lines, keep ``(time, bytes)``, and watch for the end
    marker (``data: [DONE]`` / ``message_stop``) and for error events (which end reading at
    once). The JSON is parsed in the lane (:class:`_Lane`), between reads, while the stream
    runs; :meth:`parse` takes what is left at the end. So no event waits behind another's JSON
    parsing to be timestamped, and the end of a stream costs little: a wave of streams that
    end together restarts in less time than a scripted first token takes.
    """

    __slots__ = ("rec", "t0", "protocol", "buf", "events", "times", "token_times",
                 "token_pieces", "done", "stop", "usage_seen", "in_body", "tool_text", "logprobs",
                 "text_parts", "reasoning_parts", "nbytes", "limit", "lane", "parsed", "failure",
                 "queued")

    def __init__(self, rec: TimingRecord, protocol: str, limit: int,
                 lane: _Lane | None = None) -> None:
        self.rec, self.protocol, self.limit, self.lane = rec, protocol, limit, lane
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
            raise _Failure("body_too_large", f"response body exceeded {self.limit} bytes")

    def _is_end(self, raw: bytes) -> bool:
        if self.protocol == "anthropic":
            return raw.startswith(b"event: message_stop") or b'"type": "message_stop"' in raw \
                or b'"type":"message_stop"' in raw
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
        ``_Failure`` (or parse error), also when a lane piece met it."""
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
            except (_Failure, ValueError, TypeError, KeyError, AttributeError,
                    UnicodeError) as exc:
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
                    raise _Failure("malformed_stream", "error event without data")
                return  # comment / keep-alive / event with no data
            data = b"\n".join(parts)
        if data[:1] != b"{":
            stripped = data.strip()
            if not stripped or stripped == b"[DONE]":
                return
        try:
            obj = _json_object(data)
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


_SCAN = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[attr-defined]


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
