"""Scrub first, then cut: a vendor places the key across the point where a field is cut (the
served tier at 40 characters, an in-stream error and a malformed value in the message), so a
cut made before the scrubber would keep ``WINDOW - 1`` characters of it, too few for the
scrubber to know as a piece of the key. Through a real streaming server and ``stream_chat``."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evals.scrub import MASK, WINDOW
from tests.evals.calls import endpoint, run
from tests.support import CANARY

K = CANARY
SHORT = WINDOW - 1  # characters of the key a cut may leave that the scrubber cannot know
# what each path streams: the key starts SHORT characters before the field's cut
EVENTS = {
    "tier": [
        {
            "service_tier": "t" * (40 - SHORT) + K,
            "choices": [{"index": 0, "delta": {"content": "hi"}}],
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ],
    "error": [{"error": {"message": "e" * (200 - SHORT) + K}}],
    "count": [
        {"choices": [{"index": 0, "delta": {"content": "hi"}}]},
        {"choices": [], "usage": {"completion_tokens": "c" * (40 - SHORT) + K}},
    ],
    "header": [{"choices": [{"index": 0, "delta": {"content": "hi", "role": "assistant"}}]}],
}


class KeyAtTheCut(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        kind = self.path.split("/")[1]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("x-served-tier", "h" * (40 - SHORT) + K)
        self.end_headers()
        for event in EVENTS[kind]:
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def key_at_the_cut() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), KeyAtTheCut)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _call(url: str, kind: str, **kw: object):
    ep = endpoint(f"{url}/{kind}", kind, **kw)
    return run(dataclasses.replace(ep, api_key=K))


def test_a_served_tier_with_the_key_across_its_cut_keeps_no_piece(key_at_the_cut):
    rec = _call(key_at_the_cut, "tier")
    assert rec.ok, rec.error_message
    assert K[:SHORT] not in rec.served_tier and len(rec.served_tier) <= 40
    assert rec.served_tier == "t" * (40 - SHORT) + MASK


def test_a_tier_header_with_the_key_across_its_cut_keeps_no_piece(key_at_the_cut):
    rec = _call(key_at_the_cut, "header", served_tier_fields=("x-served-tier",))
    assert rec.ok, rec.error_message
    assert rec.served_tier == "h" * (40 - SHORT) + MASK


def test_an_in_stream_error_with_the_key_across_200_characters_keeps_no_piece(key_at_the_cut):
    rec = _call(key_at_the_cut, "error")
    assert (rec.ok, rec.error_class) == (False, "malformed_stream")
    assert K[:SHORT] not in rec.error_message and K[:4] not in rec.error_message
    assert "e" * (200 - SHORT) + MASK in rec.error_message


def test_a_malformed_value_with_the_key_across_40_characters_keeps_no_piece(key_at_the_cut):
    rec = _call(key_at_the_cut, "count")
    assert (rec.ok, rec.error_class) == (False, "malformed_stream")
    assert "usage.completion_tokens" in rec.error_message
    assert K[:SHORT] not in rec.error_message and MASK in rec.error_message
