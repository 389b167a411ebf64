"""The wires: a response's bytes off the socket, each socket read with its time.

An event's timestamp is when the socket read that completed it returned: on the aiohttp wire
stamped in the protocol callback right after the ``recv``, on the httpx wire when the read
returns to the reading task. Everything else (building and sending the request, each event's
JSON, the record) takes turns in a lane between socket polls (:class:`Lane`), so with hundreds
of streams no read waits behind a wave of other work to be stamped (error events still end
reading at once).

Two wires, one measurement. :func:`evals.client.make_client` returns a :class:`ProbeClient`, an
ordinary ``httpx.AsyncClient`` whose streams ``stream_chat`` sends through aiohttp; any other
httpx client is used as it is. Why: httpcore's pool re-scans every connection at each request
start and end (quadratic in open connections) and each read passes anyio cancel scopes, which
cost ~0.4 ms of CPU per SSE event at 200 concurrent streams and delayed timestamps by 100+ ms;
aiohttp reads in asyncio protocol callbacks with the llhttp C parser, like the raw-socket floor
(figures: docs/benchmarks.md, "Timing fidelity", from ``benchmarks/timing_fidelity.py``).

The times themselves are defined in :mod:`evals.client`; this module imports neither it nor
:mod:`evals._sse`.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import ssl
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

import aiohttp
import httpx
from aiohttp.client_proto import ResponseHandler
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from evals.addresses import PrivateAddress, refuse_private

_LANE_BUDGET_S = 50e-6  # deferred parsing per lane turn: about one start of a request or less
# the running stream_chat's connection marks, for the aiohttp wire's connector and request hooks
MARKS: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "tierwatch_marks", default=None
)


class Lane:
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


_LANES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Lane] = weakref.WeakKeyDictionary()


def current_lane() -> Lane:
    loop = asyncio.get_running_loop()
    lane = _LANES.get(loop)
    if lane is None:
        lane = _LANES[loop] = Lane(loop)
    return lane


class StampingHandler(ResponseHandler):
    """aiohttp's protocol, stamping each socket read of a stream's body as it is received.

    The stamp is taken in the protocol callback, right after the ``recv``, instead of in the
    reading task's next step: with hundreds of streams, that step may wait behind other ready
    work in the event loop, the callback does not (see :class:`Lane`).
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
    connections stamp body reads in the protocol callback (:class:`StampingHandler`).

    ``public_only`` (the connector of endpoints not marked local): every address a host
    resolves to is checked (``evals.addresses.refuse_private``) before aiohttp connects, and
    aiohttp connects to those resolved addresses, with the name kept for TLS (SNI, the
    certificate) and the Host header: no second lookup between the check and the connection.
    The proxies the environment names (``trusted``) are the deployment's own and not checked;
    through one, the target is checked by a lookup of ours and the proxy resolves it again
    (the proxy's own egress rules are what pins it then)."""

    def __init__(
        self, *, public_only: bool = False, trusted: set[str] | None = None, **kw: Any
    ) -> None:
        super().__init__(**kw)
        self._factory = functools.partial(StampingHandler, loop=self._loop)  # type: ignore[assignment]
        self._public_only = public_only
        self._trusted = trusted if trusted is not None else set()

    async def _resolve_host(self, host: str, port: int, traces: Any = None) -> Any:
        hosts = await super()._resolve_host(host, port, traces)
        if self._public_only and host not in self._trusted:
            refuse_private(host, [h["host"] for h in hosts])
        return hosts

    async def _create_connection(
        self, req: aiohttp.ClientRequest, traces: Any, timeout: aiohttp.ClientTimeout
    ) -> Any:
        if self._public_only and req.proxy is not None and req.url.raw_host:
            try:
                await self._resolve_host(req.url.raw_host, req.port or 443)
            except PrivateAddress as exc:
                raise aiohttp.ClientConnectorDNSError(req.connection_key, exc) from exc
        proto = await super()._create_connection(req, traces, timeout)
        marks = MARKS.get()
        if marks is not None:
            marks.setdefault("tls" if req.is_ssl() else "tcp", time.perf_counter())
        return proto


class _TimedRequest(aiohttp.ClientRequest):
    """Marks a pooled (reused) connection and when the request head was handed to it."""

    async def send(self, conn: Any) -> aiohttp.ClientResponse:
        marks = MARKS.get()
        if marks is not None and "tcp" not in marks and "tls" not in marks:
            marks["reused"] = True  # set before writing: a write may fail on a stale connection
        resp = await super().send(conn)
        if marks is not None:
            marks.setdefault("headers_sent", time.perf_counter())
        return resp


class ProbeClient(httpx.AsyncClient):
    """An ``httpx.AsyncClient`` (usable for anything) that also owns an aiohttp session which
    :func:`evals.client.stream_chat` uses for its streams (why: see the module docstring).

    Proxies come from the environment (``HTTP(S)_PROXY``, ``NO_PROXY``) as in httpx, looked up
    once per request URL and kept for the client's life: aiohttp's own ``trust_env`` looks them
    up (and reads ``.netrc``) in a worker thread at every request, two thread hops per stream.
    """

    def __init__(
        self,
        *,
        limits: httpx.Limits | None = None,
        verify: bool | str | ssl.SSLContext = True,
        **kw: Any,
    ) -> None:
        limits = limits or httpx.Limits(max_connections=256, max_keepalive_connections=64)
        super().__init__(limits=limits, verify=verify, **kw)
        self._probe_limits = limits
        self._probe_ssl = verify if isinstance(verify, ssl.SSLContext) else ssl_context(verify)
        # per (new connection per request, public addresses only): a local endpoint's
        # connections are never pooled with those of an endpoint that may not reach them
        self._sessions: dict[tuple[bool, bool], aiohttp.ClientSession] = {}
        self._proxies: dict[str, dict[str, Any]] = {}  # per request URL (a few per endpoint)
        self._proxy_hosts: set[str] = set()  # the environment's proxies: not address-checked

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
                    if proxy.raw_host:
                        self._proxy_hosts.add(proxy.raw_host)
                    if auth is not None:
                        kwargs["proxy_headers"] = {"Proxy-Authorization": auth.encode()}
            self._proxies[url] = kwargs
        return kwargs

    def aiohttp_session(self, *, public_only: bool = False) -> aiohttp.ClientSession:
        """The session, created on first use inside the running event loop; with
        ``public_only`` one that connects to public addresses only (:class:`_TimedConnector`)."""
        return self._session_for(force_close=False, public_only=public_only)

    def fresh_session(self, *, public_only: bool = False) -> aiohttp.ClientSession:
        """A session that opens a new connection for every request and closes it after: for the
        retry after a stale keep-alive connection (see :mod:`evals.client`)."""
        return self._session_for(force_close=True, public_only=public_only)

    def _session_for(self, *, force_close: bool, public_only: bool) -> aiohttp.ClientSession:
        session = self._sessions.get((force_close, public_only))
        if session is None or session.closed:
            session = self._new_session(force_close=force_close, public_only=public_only)
            self._sessions[(force_close, public_only)] = session
        return session

    def _new_session(self, *, force_close: bool, public_only: bool) -> aiohttp.ClientSession:
        pooling: dict[str, Any] = (
            {"force_close": True}
            if force_close
            else {"keepalive_timeout": self._probe_limits.keepalive_expiry or 30.0}
        )
        connector = _TimedConnector(
            public_only=public_only,
            trusted=self._proxy_hosts,
            limit=self._probe_limits.max_connections or 0,
            limit_per_host=0,
            ssl=self._probe_ssl,
            **pooling,
        )
        return aiohttp.ClientSession(
            connector=connector,
            request_class=_TimedRequest,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(total=None),
            trust_env=False,  # proxies: proxy_kwargs(), once per request URL
        )

    async def _close_sessions(self) -> None:
        for session in self._sessions.values():
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
            verify=self._probe_ssl,
            trust_env=self.trust_env,
            http1=True,
            http2=False,
            follow_redirects=False,
            limits=httpx.Limits(max_keepalive_connections=0),
        )


@functools.lru_cache(maxsize=8)
def ssl_context(verify: bool | str) -> ssl.SSLContext:
    """httpx's context (certifi's CAs), built once: loading the CA file takes ~50 ms."""
    return httpx.create_ssl_context(verify=verify)


HTTPCORE_MARKS = {
    "connection.start_tls.complete": "tls",
    "connection.connect_tcp.complete": "tcp",
    "http11.send_request_headers.started": "headers_sent",
    "http11.receive_response_headers.complete": "headers",
}
