"""evals.client against real local servers: the demo vendor and the scripted server."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from evals.client import RETRIED_MARKER, make_client, parse_retry_after, stream_chat
from evals.records import ERROR_CLASSES, ChatRequest, TimingRecord
from evals.vendors import scripted as scripted_server
from tests.evals.calls import ASK, KEY, endpoint, run


class ScriptedInThread:
    """The scripted server on its own loop in a thread; ``log`` reads its write log."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        started = asyncio.run_coroutine_threadsafe(scripted_server.start(), self.loop)
        self.server, self.port, self.state = started.result(timeout=10)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def log(self, request_id: str) -> dict[str, Any]:
        return self.state.log[request_id]

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedInThread]:
    server = ScriptedInThread()
    yield server
    server.close()


def script(**kw: Any) -> dict[str, Any]:
    return {"script": {"ttft_ms": 5, "gap_ms": 1, "n_tokens": 6, **kw}}


def assert_failed(rec: TimingRecord, error_class: str) -> None:
    assert not rec.ok and rec.error_class == error_class, (rec.error_class, rec.error_message)
    assert rec.error_class in ERROR_CLASSES and rec.error_message
    assert KEY not in rec.error_message and KEY[-6:] not in rec.error_message


@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
def test_it_records_a_complete_openai_stream(vendor, backend):
    rec = run(endpoint(vendor, "demo-base"), backend=backend)
    assert rec.ok and rec.error_class is None and rec.http_status == 200
    assert rec.connect_ms is not None and rec.headers_ms is not None
    assert rec.connect_ms <= rec.headers_ms <= rec.ttfb_ms <= rec.ttft_ms <= rec.e2e_ms
    assert len(rec.chunk_gaps_ms) == len(rec.chunk_tokens) - 1 >= 1
    assert rec.completion_tokens == sum(rec.chunk_tokens) == rec.estimated_tokens
    assert rec.tpot_ms == pytest.approx((rec.e2e_ms - rec.ttft_ms) / (rec.completion_tokens - 1))
    assert rec.prompt_tokens and rec.prompt_tokens > 0 and rec.cached_tokens == 0
    assert rec.model_id == "demo-base" and rec.system_fingerprint == "fp_demo_base"
    assert rec.headers["x-tierwatch-simulated"] == "true" and "x-request-id" in rec.headers
    assert rec.finish_reason == "stop" and rec.text and rec.started_at > 0


def test_it_records_an_anthropic_stream(vendor):
    rec = run(endpoint(vendor, "demo-fast", "anthropic"))
    assert rec.ok and rec.model_id == "demo-fast" and rec.finish_reason == "end_turn"
    assert rec.ttft_ms is not None and rec.ttft_ms <= rec.e2e_ms
    assert len(rec.chunk_gaps_ms) == len(rec.chunk_tokens) - 1
    assert rec.completion_tokens == rec.estimated_tokens
    # bursts (speculative decoding): several tokens per event, estimated per event
    assert max(rec.chunk_tokens) > 1 and len(rec.chunk_tokens) < rec.completion_tokens
    assert rec.headers["x-tierwatch-simulated"] == "true" and "request-id" in rec.headers


def test_both_protocols_get_the_same_answer_to_the_same_prompt(vendor):
    openai = run(endpoint(vendor, "demo-base"))
    assert openai.text == run(endpoint(vendor, "demo-base", "anthropic")).text


def test_it_keeps_logprobs_when_asked(vendor):
    request = ChatRequest(messages=ASK.messages, max_tokens=20, logprobs=True, top_logprobs=2)
    rec = run(endpoint(vendor, "demo-base"), request)
    assert rec.ok and rec.logprobs and len(rec.logprobs) == rec.completion_tokens
    first = rec.logprobs[0]
    assert first["token"] and first["logprob"] <= 0 and len(first["top_logprobs"]) == 2


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
@pytest.mark.parametrize(
    "model,error_class",
    [
        ("demo-broken-html", "http_status"),
        ("demo-ratelimit", "rate_limited"),
        ("demo-garbage", "malformed_stream"),
        ("demo-truncated", "stream_incomplete"),
    ],
)
def test_it_handles_each_fault_with_its_class(vendor, protocol, model, error_class):
    rec = run(endpoint(vendor, model, protocol))
    assert_failed(rec, error_class)
    assert rec.headers["x-tierwatch-simulated"] == "true"  # what arrived is kept


def test_it_handles_an_html_page_with_status_and_snippet(vendor):
    rec = run(endpoint(vendor, "demo-broken-html"))
    assert rec.http_status == 502
    assert "502" in rec.error_message and "Bad Gateway" in rec.error_message


def test_it_keeps_retry_after_of_a_429(vendor):
    assert run(endpoint(vendor, "demo-ratelimit")).retry_after_s == 2.0


def test_it_keeps_the_partial_text_of_a_truncated_stream(vendor):
    rec = run(endpoint(vendor, "demo-truncated"))
    full = run(endpoint(vendor, "demo-base"))
    assert rec.text and full.text.startswith(rec.text) and len(rec.text) < len(full.text)
    assert rec.ttft_ms is not None and rec.chunk_tokens and rec.model_id == "demo-base"


def test_it_handles_a_json_answer_to_a_stream_request(vendor):
    rec = run(endpoint(vendor, "demo-base", extra_body={"stream": False}))
    assert_failed(rec, "malformed_stream")
    assert "application/json" in rec.error_message


def test_it_handles_an_unknown_model(vendor):
    rec = run(endpoint(vendor, "no-such-model"))
    assert_failed(rec, "http_status")
    assert rec.http_status == 404


def test_it_handles_a_closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert_failed(run(endpoint(f"http://127.0.0.1:{port}/v1", "demo-base")), "connect")


def test_it_handles_an_unresolvable_host():
    assert_failed(run(endpoint("http://no-such-host.invalid/v1", "demo-base")), "connect")


def test_it_times_out_on_the_overall_deadline_despite_keep_alives(vendor):
    rec = run(endpoint(vendor, "demo-slow", timeout_s=0.5))
    assert_failed(rec, "timeout")
    assert rec.headers_ms is not None and rec.ttft_ms is None  # keep-alives are not tokens


def test_it_stops_reading_a_body_past_the_byte_limit(vendor):
    rec = run(endpoint(vendor, "demo-base", max_body_bytes=600))
    assert_failed(rec, "body_too_large")
    assert rec.text and rec.ttft_ms is not None


def test_role_only_empty_and_comment_events_are_not_tokens(scripted):
    t0: list[float] = []
    ep = endpoint(
        scripted.url,
        "scripted",
        extra_body=script(ttft_ms=40, role_chunk=True, comment_ms=5, empty_chunk_ms=10),
    )
    rec = run(ep, t0=t0)
    assert rec.ok and len(rec.chunk_tokens) == 6 and rec.text.startswith("tok0 ")
    events = scripted.log(rec.headers["x-request-id"])["events"]
    first_token_ns = next(t for kind, t in events if kind == "token")
    not_tokens_ns = [t for kind, t in events if kind in ("role", "empty", "comment")]
    ttft_ns = (t0[0] + rec.ttft_ms / 1000) * 1e9  # same clock: CLOCK_MONOTONIC
    assert len(not_tokens_ns) == 3 and max(not_tokens_ns) < first_token_ns <= ttft_ns


def test_a_trailing_usage_chunk_is_not_the_end(scripted):
    t0: list[float] = []
    rec = run(endpoint(scripted.url, "scripted", extra_body=script()), t0=t0)
    events = scripted.log(rec.headers["x-request-id"])["events"]
    last_token_ns = [t for kind, t in events if kind == "token"][-1]
    usage_ns = next(t for kind, t in events if kind == "usage")
    e2e_ns = (t0[0] + rec.e2e_ms / 1000) * 1e9
    assert rec.ok and rec.completion_tokens == 6 and last_token_ns <= e2e_ns
    assert len(rec.chunk_gaps_ms) == 5 and usage_ns >= last_token_ns


def test_it_never_puts_the_key_in_an_error_message(scripted):
    rec = run(endpoint(scripted.url, "scripted", extra_body=script(status=401, echo_auth=True)))
    assert_failed(rec, "http_status")
    assert rec.http_status == 401 and "***" in rec.error_message
    assert "authorization" not in rec.headers and KEY not in repr(rec)


def test_it_classifies_an_error_object_inside_the_stream(scripted):
    rec = run(endpoint(scripted.url, "scripted", extra_body=script(error_after=3)))
    assert_failed(rec, "malformed_stream")
    assert "scripted failure" in rec.error_message and rec.text == "tok0 tok1 tok2 "


def test_it_classifies_a_cut_connection_and_keeps_the_tokens(scripted):
    rec = run(endpoint(scripted.url, "scripted", extra_body=script(cut_after=4)))
    assert_failed(rec, "stream_incomplete")
    assert len(rec.chunk_tokens) == 4 and rec.e2e_ms is not None


def test_it_accepts_a_stream_without_done_that_has_finish_reason_and_usage(scripted):
    rec = run(endpoint(scripted.url, "scripted", extra_body=script(done=False)))
    assert rec.ok and rec.finish_reason == "stop" and rec.completion_tokens == 6


def test_it_rejects_a_stream_without_done_nor_usage(scripted):
    rec = run(endpoint(scripted.url, "scripted", extra_body=script(done=False, usage=False)))
    assert_failed(rec, "stream_incomplete")
    assert rec.completion_tokens is None and rec.output_tokens == rec.estimated_tokens


def test_it_keeps_llama_cpp_timings(scripted):
    timings = {"prompt_ms": 1.5, "predicted_per_second": 42.0}
    rec = run(endpoint(scripted.url, "scripted", extra_body=script(timings=timings)))
    assert rec.ok and rec.server_timings == timings


def test_it_reads_retry_after_as_seconds_or_http_date():
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert parse_retry_after("Fri, 01 Jan 2100 00:00:00 GMT") > 50
    assert parse_retry_after("soon") is None


def test_the_token_estimate_splits_like_a_gpt_pre_tokenizer():
    from evals.tokens import estimate_tokens, token_pieces

    assert estimate_tokens("") == 0
    assert token_pieces("Hello, world!") == ["Hello", ",", " world", "!"]
    assert token_pieces("1234567") == ["123", "456", "7"]  # digits in groups of three
    assert estimate_tokens("internationalization") == 5  # long words ~4 characters a token
    text = "def f(x):\n    return x ** 2  # 你好 café\r\n"
    assert "".join(token_pieces(text)) == text and len(token_pieces(text)) == estimate_tokens(text)


class KeepAliveLiar:
    """A raw-socket server that answers a streamed chat with ``Connection: keep-alive`` and then
    does not keep the connection, like llama-server, with the race made deterministic: the next
    request on that connection is read, then ``reuse`` happens to it ("close": closed without a
    byte, "reset": RST, "partial": 10 bytes of a status line then close, "silent": no answer).

    ``first`` is what the first connection does with its first request ("answer", "close": close
    without a byte, "reset", "answer-close": answer with ``Connection: close`` and keep the
    socket open); ``later`` the same for every later connection ("answer" then close, "close").
    """

    SSE = (
        b'data: {"model":"m","choices":[{"index":0,"delta":{"content":"hi there"}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
        b'"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\ndata: [DONE]\n\n'
    )

    def __init__(self, reuse: str = "close", first: str = "answer", later: str = "answer") -> None:
        self.reuse, self.first, self.later = reuse, first, later
        self.connections = 0
        self.closed_at: float | None = None  # perf_counter() as the first connection is closed
        self.reused_request_seen = False
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed by close()
                return
            self.connections += 1
            first = self.connections == 1
            threading.Thread(target=self._serve, args=(conn, first), daemon=True).start()

    def _serve(self, conn: socket.socket, first: bool) -> None:
        conn.settimeout(10)
        with conn:
            rest = self._read_request(conn, b"")
            action = self.first if first else self.later
            if rest is None or action == "close":
                return
            if action == "reset":
                return self._reset(conn)
            self._answer(conn, close=action == "answer-close")
            if not first:
                return
            rest = self._read_request(conn, rest)  # the client reuses the connection
            self.reused_request_seen = rest is not None
            if rest is None:
                return
            if self.reuse == "partial":
                conn.sendall(b"HTTP/1.1 2")
            elif self.reuse == "silent":
                conn.recv(1)  # until the client gives up
            elif self.reuse == "reset":
                self._reset(conn)
            self.closed_at = time.perf_counter()

    @staticmethod
    def _reset(conn: socket.socket) -> None:
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def _answer(self, conn: socket.socket, close: bool) -> None:
        chunk = b"%x\r\n%b\r\n0\r\n\r\n" % (len(self.SSE), self.SSE)
        connection = b"close" if close else b"keep-alive\r\nKeep-Alive: timeout=5, max=100"
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: " + connection + b"\r\n\r\n" + chunk
        )

    @staticmethod
    def _read_request(conn: socket.socket, buf: bytes) -> bytes | None:
        """Read one request (head and Content-Length body); what follows it, or None at EOF."""
        try:
            while b"\r\n\r\n" not in buf:
                if not (data := conn.recv(65536)):
                    return None
                buf += data
            head, body = buf.split(b"\r\n\r\n", 1)
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            while len(body) < length:
                if not (data := conn.recv(65536)):
                    return None
                body += data
            return body[length:]
        except OSError:
            return None

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def liar(request) -> Iterator[KeepAliveLiar]:
    server = KeepAliveLiar(**getattr(request, "param", {}))
    yield server
    server.close()


def client_for(backend: str) -> httpx.AsyncClient:
    """make_client's two wires, or ("httpx") a client made elsewhere."""
    return httpx.AsyncClient() if backend == "httpx" else make_client(backend=backend)


def twice(
    server: KeepAliveLiar, backend: str, second_timeout_s: float = 10.0
) -> tuple[TimingRecord, TimingRecord, list[float]]:
    """Two requests one after the other on one client; the t0s the second one announced."""

    async def go() -> tuple[TimingRecord, TimingRecord, list[float]]:
        t0: list[float] = []
        async with client_for(backend) as client:
            first = await stream_chat(client, endpoint(server.url, "m"), ASK)
            late = endpoint(server.url, "m", timeout_s=second_timeout_s)
            second = await stream_chat(client, late, ASK, on_start=t0.append)
        return first, second, t0

    return asyncio.run(go())


@pytest.mark.parametrize("liar", [{"reuse": "close"}, {"reuse": "reset"}], indirect=True)
@pytest.mark.parametrize("backend", ["aiohttp", "httpcore", "httpx"])
def test_it_retries_once_on_a_new_connection_when_a_reused_one_died_unanswered(liar, backend):
    first, second, t0 = twice(liar, backend)
    assert first.ok and RETRIED_MARKER not in first.headers
    assert second.ok, (second.error_class, second.error_message)
    assert second.headers[RETRIED_MARKER] == "1" and second.text == "hi there"
    assert liar.reused_request_seen and liar.connections == 2
    # the times are the retried attempt's: its t0 comes after the dead connection was closed
    assert len(t0) == 2 and t0[0] < liar.closed_at < t0[1]
    assert second.connect_ms <= second.headers_ms <= second.ttfb_ms <= second.ttft_ms
    assert second.completion_tokens == 2 and second.tpot_ms is not None


@pytest.mark.parametrize("liar", [{"first": "close"}, {"first": "reset"}], indirect=True)
@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
def test_it_does_not_retry_a_new_connection_that_died_unanswered(liar, backend):
    rec = run(endpoint(liar.url, "m"), backend=backend)
    assert_failed(rec, "protocol")
    assert liar.connections == 1 and RETRIED_MARKER not in rec.headers


@pytest.mark.parametrize("liar", [{"later": "close"}], indirect=True)
@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
def test_it_retries_at_most_once(liar, backend):
    first, second, _ = twice(liar, backend)
    assert first.ok
    assert_failed(second, "protocol")
    assert second.headers[RETRIED_MARKER] == "1" and liar.connections == 2


@pytest.mark.parametrize("liar", [{"reuse": "partial"}], indirect=True)
def test_it_does_not_retry_once_a_response_byte_arrived(liar):
    # aiohttp only: httpcore reports a cut status line as "Server disconnected without sending
    # a response" too, so it would be retried there (see client._died_stale)
    first, second, _ = twice(liar, "aiohttp")
    assert first.ok
    assert_failed(second, "protocol")
    assert liar.connections == 1 and RETRIED_MARKER not in second.headers


@pytest.mark.parametrize("liar", [{"reuse": "silent"}], indirect=True)
@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
def test_it_does_not_retry_a_timeout_on_a_reused_connection(liar, backend):
    first, second, _ = twice(liar, backend, second_timeout_s=0.3)
    assert first.ok
    assert_failed(second, "timeout")
    assert liar.connections == 1 and RETRIED_MARKER not in second.headers


@pytest.mark.parametrize("liar", [{"first": "answer-close"}], indirect=True)
@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
def test_an_answer_that_says_connection_close_is_not_reused(liar, backend):
    # both wires close such a connection themselves: no request is sent on it, nothing retried
    first, second, _ = twice(liar, backend)
    assert first.ok and second.ok and RETRIED_MARKER not in second.headers
    assert liar.connections == 2 and not liar.reused_request_seen


def test_many_concurrent_streams_each_keep_their_own_events_and_times(scripted):
    """60 streams on one client: each record is complete and its own, and no token is stamped
    before the server wrote it (stamps come from the protocol callback, mapped by byte offset)."""
    ep = endpoint(scripted.url, "scripted", extra_body=script(ttft_ms=20, gap_ms=3, n_tokens=8))

    async def go() -> list[tuple[float, TimingRecord]]:
        async with make_client() as client:

            async def one() -> tuple[float, TimingRecord]:
                t0: list[float] = []
                rec = await stream_chat(client, ep, ASK, on_start=t0.append)
                return t0[-1], rec

            return await asyncio.gather(*(one() for _ in range(60)))

    results = asyncio.run(go())
    assert len({rec.headers["x-request-id"] for _, rec in results}) == 60
    for t0, rec in results:
        assert rec.ok and rec.text == "".join(f"tok{i} " for i in range(8))
        written = [
            t for kind, t in scripted.log(rec.headers["x-request-id"])["events"] if kind == "token"
        ]
        seen = [t0 + rec.ttft_ms / 1000]
        for gap in rec.chunk_gaps_ms:
            seen.append(seen[-1] + gap / 1000)
        assert len(seen) == len(written) == 8
        assert all(s * 1e9 >= w - 1000 for s, w in zip(seen, written, strict=True))  # 1 µs: float


def test_cancelled_streams_do_not_hold_up_the_others(scripted):
    """Cancelled while waiting for their turn or while reading: the rest still finish."""
    ep = endpoint(scripted.url, "scripted", extra_body=script(ttft_ms=30, gap_ms=2))

    async def go() -> list[TimingRecord]:
        async with make_client() as client:
            doomed = [asyncio.create_task(stream_chat(client, ep, ASK)) for _ in range(10)]
            kept = [asyncio.create_task(stream_chat(client, ep, ASK)) for _ in range(10)]
            await asyncio.sleep(0)
            doomed[0].cancel()  # still waiting for its first turn
            await asyncio.sleep(0.01)
            for task in doomed[1:]:  # waiting for the first token
                task.cancel()
            return await asyncio.wait_for(asyncio.gather(*kept), timeout=10)

    records = asyncio.run(go())
    assert all(rec.ok and len(rec.chunk_tokens) == 6 for rec in records)


def test_the_aiohttp_wire_takes_its_proxy_from_the_environment(scripted, monkeypatch):
    """HTTP_PROXY as in httpx: the scripted server answers absolute-form requests, so a host that
    does not resolve is reached through it; NO_PROXY exempts a host."""
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{scripted.port}")
    monkeypatch.setenv("NO_PROXY", "direct.invalid")
    for name in ("http_proxy", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    proxied = run(endpoint("http://proxied.invalid/v1", "scripted", extra_body=script()))
    assert proxied.ok and len(proxied.chunk_tokens) == 6
    direct = run(endpoint("http://direct.invalid/v1", "scripted", extra_body=script()))
    assert_failed(direct, "connect")


def test_a_lane_piece_that_raises_is_reported_and_does_not_stall_the_lane():
    from evals._wire import current_lane

    async def go() -> tuple[list[str], list[BaseException]]:
        loop = asyncio.get_running_loop()
        reported: list[BaseException] = []
        loop.set_exception_handler(lambda _loop, ctx: reported.append(ctx["exception"]))
        order: list[str] = []

        def boom() -> None:
            raise RuntimeError("bad piece")

        lane = current_lane()
        lane.defer(boom)
        lane.defer(lambda: order.append("piece"))

        async def task(name: str) -> None:
            await lane.turn()
            order.append(name)

        await asyncio.wait_for(asyncio.gather(task("a"), task("b")), timeout=5)
        return order, reported

    order, reported = asyncio.run(go())
    assert order == ["piece", "a", "b"]
    assert [str(e) for e in reported] == ["bad piece"]
