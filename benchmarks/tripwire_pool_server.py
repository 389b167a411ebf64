"""A local OpenAI-compatible server that answers tripwire queries from recorded pools.

Why: replaying a month through the product's own path (the scheduled run, its client, the
stored ``TripwireState``, the alert and the audit it queues) needs an endpoint whose answers are
the real engine's, window by window, without keeping a dozen ``llama-server`` processes alive.
The replay sets, per model name, the window the next run will read (``{prompt: [top-k
logprobs of one query]}``); each request for that prompt gets the window's next query, streamed
as one token with its ``top_logprobs``, as llama.cpp streams it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Window = Mapping[str, Sequence[Mapping[str, float]]]


class PoolServer:
    """Serve on 127.0.0.1 in a thread; :meth:`set_window` before each run."""

    def __init__(self) -> None:
        self._windows: dict[str, Window] = {}
        self._next: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def set_window(self, model: str, window: Window) -> None:
        with self._lock:
            self._windows[model] = window
            self._next = {k: 0 for k in self._next if k[0] != model}

    def answer(self, model: str, prompt: str) -> Mapping[str, float]:
        """The window's next query for this prompt (cycling when asked more than it holds)."""
        with self._lock:
            rows = self._windows[model][prompt]
            i = self._next.get((model, prompt), 0)
            self._next[(model, prompt)] = i + 1
            return rows[i % len(rows)]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def chunks(model: str, top: Mapping[str, float], top_n: int) -> list[dict[str, Any]]:
    """The stream of one one-token answer: the token and its logprobs, then the finish."""
    ranked = sorted(top.items(), key=lambda kv: -kv[1])[: max(top_n, 1)]
    token, logprob = ranked[0]
    entry = {"token": token, "logprob": logprob,
             "top_logprobs": [{"token": t, "logprob": lp} for t, lp in ranked]}  # fmt: skip
    base = {"id": "pool", "object": "chat.completion.chunk", "created": 0, "model": model}
    return [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": token},
                              "logprobs": {"content": [entry]}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
         "usage": {"prompt_tokens": 8, "completion_tokens": 1, "total_tokens": 9}},
    ]  # fmt: skip


def _handler(pool: PoolServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
            pass

        def do_POST(self) -> None:  # noqa: N802 (the base's name)
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            prompt = body["messages"][-1]["content"]
            try:
                top = pool.answer(body["model"], prompt)
            except KeyError:
                self.send_error(404, f"no window for {body['model']!r} / {prompt!r}")
                return
            n = int(body.get("top_logprobs") or 0) if body.get("logprobs") else 0
            out = b"".join(
                b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks(body["model"], top, n)
            )
            out += b"data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    return Handler
