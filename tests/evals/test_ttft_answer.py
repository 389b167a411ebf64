"""TTFT of a reasoning model both ways (docs/measures.md): ``ttft_ms`` to the first token on
any channel, reasoning included, and ``ttft_answer_ms`` to the first answer token (text,
refusal or tool call). Against a small server that thinks for a while before it answers, in
each protocol, against real recorded reasoning streams, and through a probe run to the speed
page."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from tests.evals.calls import endpoint, run
from tests.evals.replay import Replay, recorded
from tests.factories import vendor_pair

PAUSE_S = 0.2  # between the last reasoning event and the first answer event


def _events(protocol: str, think: bool) -> tuple[list[dict], list[dict]]:
    """(reasoning events, answer events) of one protocol's stream."""
    if protocol == "anthropic":
        start = {"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 5}}}
        thinking = [
            {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking"}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "thinking_delta", "thinking": "Let me think it over."}},
        ]  # fmt: skip
        answer = [
            {"type": "content_block_start", "index": 1, "content_block": {"type": "text"}},
            {"type": "content_block_delta", "index": 1,
             "delta": {"type": "text_delta", "text": "Pooling reuses connections."}},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": {"output_tokens": 12}},
            {"type": "message_stop"},
        ]  # fmt: skip
        return [start, *(thinking if think else [])], answer
    if protocol == "responses":
        thinking = [{"type": "response.reasoning_text.delta", "delta": "Let me think it over."}]
        answer = [
            {"type": "response.output_text.delta", "delta": "Pooling reuses connections."},
            {"type": "response.completed", "response": {"model": "m", "status": "completed",
             "usage": {"input_tokens": 5, "output_tokens": 12}}},
        ]  # fmt: skip
        return (thinking if think else []), answer

    def chunk(delta: dict, **choice: str) -> dict:
        return {"model": "m", "choices": [{"index": 0, "delta": delta, **choice}]}

    thinking = [chunk({"reasoning_content": "Hmm, let"}), chunk({"reasoning_content": " me see."})]
    answer = [
        chunk({"content": "Pooling reuses"}),
        chunk({"content": " connections."}),
        chunk({}, finish_reason="stop"),
    ]
    return (thinking if think else []), answer


class Thinker(BaseHTTPRequestHandler):
    """Streams reasoning, pauses ``PAUSE_S``, then streams the answer; ``/plain/`` paths skip
    the reasoning. The protocol follows the path (``/messages``, ``/responses``, else chat)."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        protocol = (
            "anthropic"
            if self.path.endswith("/messages")
            else "responses"
            if self.path.endswith("/responses")
            else "openai"
        )
        reasoning, answer = _events(protocol, think="/plain/" not in self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for event in reasoning:
            self._send(event)
        time.sleep(PAUSE_S)
        for event in answer:
            self._send(event)
        if protocol == "openai":
            self.wfile.write(b"data: [DONE]\n\n")
        self.close_connection = True

    def _send(self, event: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
        self.wfile.flush()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def thinker():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Thinker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "responses"])
def test_the_first_answer_token_comes_after_the_reasoning(thinker, protocol):
    rec = run(endpoint(f"{thinker}/v1", "m", protocol))
    assert rec.ok, rec.error_message
    assert rec.reasoning_text and rec.text.startswith("Pooling reuses")
    # the answer was sent PAUSE_S after the reasoning: its first token cannot come sooner
    assert rec.ttft_answer_ms - rec.ttft_ms >= PAUSE_S * 1000 * 0.9
    assert rec.ttft_ms <= rec.ttft_answer_ms <= rec.e2e_ms


@pytest.mark.parametrize("protocol", ["openai", "anthropic", "responses"])
def test_without_reasoning_both_definitions_are_the_same_token(thinker, protocol):
    rec = run(endpoint(f"{thinker}/plain/v1", "m", protocol))
    assert rec.ok, rec.error_message
    assert not rec.reasoning_text
    assert rec.ttft_answer_ms == rec.ttft_ms


@pytest.mark.parametrize(
    ("name", "protocol"),
    [
        ("anthropic_thinking.sse", "anthropic"),
        ("deepseek_reasoner_reasoning_content.sse", "openai"),
        ("mistral_magistral_thinking_list_content.sse", "openai"),
        ("zai_glm_thinking.sse", "openai"),
    ],
)
def test_recorded_reasoning_streams_have_both_definitions(name, protocol):
    """Real streams, replayed in 64-byte pieces: the answer's first token is stamped no sooner
    than the stream's first token, and after the reasoning began."""
    with Replay() as replay:
        rec = run(endpoint(replay.add(recorded(name), chunk=64), "m", protocol))
    assert rec.ok, rec.error_message
    assert rec.reasoning_text and rec.text
    assert rec.ttft_ms is not None and rec.ttft_answer_ms is not None
    assert rec.ttft_ms <= rec.ttft_answer_ms <= rec.e2e_ms


@pytest.mark.django_db
def test_a_probe_run_stores_both_and_the_speed_page_shows_them(thinker, admin_client):
    pair = vendor_pair(f"{thinker}/v1", suite="smoke", repeat=1)
    done = execute_run(run_id=create_run(pair=pair, seed=3).id, cases_limit=3)
    assert done.status == "done", done.error
    for s in done.samples.all():
        assert s.ok and s.ttft_answer_ms - s.ttft_ms >= PAUSE_S * 1000 * 0.9
    html = admin_client.get(f"/pairs/{pair.name}/speed/").content.decode()
    table = html.split('id="ttft-both-table"')[1].split("</table>")[0]
    assert "first answer token P50" in table and ">3<" in table  # 3 samples per tier
