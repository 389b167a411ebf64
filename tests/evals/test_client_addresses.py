"""An endpoint that may reach public addresses only (``EndpointSpec.public_only``, which
``monitor`` sets for every endpoint not marked local) is refused after its host is resolved,
on both wires, and nothing reaches the address: a real capture server on 127.0.0.1 counts the
connections it accepts; the name resolves to it through a patched ``socket.getaddrinfo`` (the
DNS step alone, which would leave the machine). The same name reaches the server when the
endpoint may go anywhere, so the capture and the resolver are shown to work."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest

from evals.client import make_client, stream_chat
from evals.records import ChatRequest, EndpointSpec, TimingRecord

NAME = "vendor.example.test"  # not a local name, so the save-time check lets it through


class Capture:
    """A TCP server on 127.0.0.1 that keeps what each connection sent, then closes it."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.sock = socket.create_server((host, port))
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(65536))
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def capture() -> Iterator[Capture]:
    server = Capture()
    yield server
    server.close()


@pytest.fixture
def name_to_loopback(monkeypatch) -> None:
    """``NAME`` resolves to 127.0.0.1 (as a rebinding or an internal DNS record would)."""
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if str(host).rstrip(".") == NAME:
            return real("127.0.0.1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


def send(url: str, *, public_only: bool, backend: str) -> TimingRecord:
    spec = EndpointSpec(
        name="e",
        protocol="openai",
        base_url=url,
        model="m",
        api_key="sk-canary-never-sent",
        timeout_s=5,
        public_only=public_only,
    )

    async def go() -> TimingRecord:
        async with make_client(backend=backend) as client:
            return await stream_chat(client, spec, ChatRequest(messages=[{"role": "user"}]))

    return asyncio.run(go())


@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
def test_a_name_that_resolves_to_loopback_is_refused_and_nothing_connects(
    capture, name_to_loopback, backend
):
    rec = send(f"https://{NAME}:{capture.port}/v1", public_only=True, backend=backend)
    assert not rec.ok and rec.error_class == "connect", rec.error_message
    assert f"{NAME} resolves to 127.0.0.1, a loopback address" in rec.error_message
    assert "only an endpoint marked local may connect there" in rec.error_message
    assert capture.received == []


def test_the_same_name_reaches_the_server_when_the_endpoint_may_go_anywhere(
    capture, name_to_loopback
):
    # aiohttp: its resolver calls socket.getaddrinfo (anyio's, under httpcore, binds its own)
    rec = send(f"http://{NAME}:{capture.port}/v1", public_only=False, backend="aiohttp")
    assert not rec.ok  # the capture answers nothing
    assert len(capture.received) >= 1 and b"sk-canary-never-sent" in capture.received[0]


@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
@pytest.mark.parametrize(
    ("host", "said"),
    [
        ("127.0.0.1", "127.0.0.1 is a loopback address"),
        ("[::ffff:127.0.0.1]", "IPv4-mapped address of 127.0.0.1, a loopback address"),
    ],
)
def test_an_address_written_out_is_refused_at_connect_time_too(capture, backend, host, said):
    rec = send(f"https://{host}:{capture.port}/v1", public_only=True, backend=backend)
    assert not rec.ok and rec.error_class == "connect" and said in rec.error_message
    assert capture.received == []


def test_through_a_proxy_the_target_is_checked_and_the_proxy_itself_is_trusted(
    capture, name_to_loopback, monkeypatch
):
    """The environment's proxy is the deployment's own (here the capture server on
    127.0.0.1): a target that resolves to loopback is refused before the proxy hears of it; a
    public target goes to the proxy (``CONNECT``), which a private address does not stop."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{capture.port}")
    rec = send(f"https://{NAME}/v1", public_only=True, backend="aiohttp")
    assert rec.error_class == "connect" and f"{NAME} resolves to 127.0.0.1" in rec.error_message
    assert capture.received == []
    send("https://8.8.8.8/v1", public_only=True, backend="aiohttp")  # answered by the capture
    assert len(capture.received) == 1 and capture.received[0].startswith(b"CONNECT 8.8.8.8:443")


@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
def test_the_connection_goes_to_the_address_checked_not_to_a_second_lookup(
    capture, monkeypatch, backend
):
    """DNS rebinding: the name answers a "public" address once, then 127.0.0.1. The client
    looks it up once and connects to the address it checked. Here 127.0.0.2 stands for the
    public address (the check is told so: a real public address would leave the machine)."""
    from evals import addresses

    public = Capture("127.0.0.2", capture.port)  # a second lookup would reach ``capture``
    lookups: list[str] = []
    real = socket.getaddrinfo

    def rebinding(host, port, *args, **kwargs):
        if str(host) == NAME:
            lookups.append(NAME)
            return real("127.0.0.2" if len(lookups) == 1 else "127.0.0.1", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    checked = addresses.address_problem
    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    monkeypatch.setattr(
        addresses, "address_problem", lambda a: None if str(a) == "127.0.0.2" else checked(a)
    )
    try:
        send(f"http://{NAME}:{capture.port}/v1", public_only=True, backend=backend)
        assert len(public.received) == 1 and b"POST /v1/chat/completions" in public.received[0]
        assert f"Host: {NAME}:{capture.port}".encode() in public.received[0]  # the name kept
        assert capture.received == [] and lookups == [NAME]
    finally:
        public.close()
