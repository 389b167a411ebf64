"""Recorded streams replayed byte for byte by a real HTTP server on 127.0.0.1.

``tests/data/streams/`` holds real response bodies (sources and licences in its SOURCES.md);
:class:`Replay` answers each POST with the body registered for the path's first segment, as
``text/event-stream`` in chunked transfer, optionally compressed the way a vendor that ignores
``Accept-Encoding: identity`` sends it. The client and the official SDKs read the same bytes.
"""

from __future__ import annotations

import gzip
import json
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[1] / "data" / "streams"
INDEX: dict[str, dict[str, Any]] = json.loads((CORPUS / "index.json").read_text())


def recorded(name: str) -> bytes:
    return (CORPUS / name).read_bytes()


def streams(*protocols: str) -> list[str]:
    """The corpus files of these protocols, sorted."""
    return sorted(n for n, e in INDEX.items() if e["protocol"] in protocols)


def _encode(body: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(body)
    if encoding == "deflate":
        return zlib.compress(body)
    if encoding == "br":
        return b"\x0b\x02\x80hello\x03"  # a brotli-looking body: its decoding is not ours
    return body


class Replay:
    """``with Replay() as r: url = r.add(body)``: ``url`` is a base URL whose requests get
    ``body`` (bytes), in chunks of ``chunk`` bytes, ``Content-Encoding: encoding`` if given."""

    def __init__(self) -> None:
        self.bodies: dict[str, tuple[bytes, str, int]] = {}
        self.requests: list[dict[str, Any]] = []
        replay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                length = int(self.headers.get("content-length") or 0)
                sent = self.rfile.read(length)
                replay.requests.append(
                    {"path": self.path, "body": sent, "headers": dict(self.headers.items())}
                )
                key = self.path.strip("/").split("/")[0]
                body, encoding, chunk = replay.bodies[key]
                payload = _encode(body, encoding)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Transfer-Encoding", "chunked")
                if encoding:
                    self.send_header("Content-Encoding", encoding)
                self.end_headers()
                for i in range(0, len(payload), chunk):
                    piece = payload[i : i + chunk]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def add(self, body: bytes, *, encoding: str = "", chunk: int = 1024) -> str:
        key = f"s{len(self.bodies)}"
        self.bodies[key] = (body, encoding, max(1, chunk))
        return f"http://127.0.0.1:{self.server.server_address[1]}/{key}/v1"

    def __enter__(self) -> Replay:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
