"""An OpenAI-style streaming server whose delays are scripted exactly and whose writes are logged.

It exists to measure the client, not to look like a vendor: ``benchmarks/timing_fidelity.py``
compares when the client says an event arrived with when this server wrote it.

Script (in the request body, e.g. through ``EndpointSpec.extra_body``)::

    {"script": {"ttft_ms": 50, "gap_ms": 20, "n_tokens": 20,   # or "gaps_ms": [20, 20, ...]
                "role_chunk": true,     # a role-only first chunk, sent with the headers
                "empty_chunk_ms": null, # an empty-content chunk at this time (must not count)
                "comment_ms": null,     # an SSE comment (keep-alive) at this time
                "usage": true, "done": true,
                "cut_after": null,      # close the connection after this many tokens
                "error_after": null,    # send {"error": ...} as data after this many tokens
                "timings": null,        # an object sent with the usage, as llama.cpp does
                "status": 200, "echo_auth": false}}  # an error answer quoting Authorization

or in the model name: ``scripted:ttft=50,gap=20,n=20``. Times are after the request was read.

Clock: each write is stamped with ``time.perf_counter_ns()`` immediately before the
``transport.write`` call that hands the whole chunk to the kernel (one ``send`` syscall when the
socket buffer has room, which it has at these rates). On Linux ``perf_counter`` is
``clock_gettime(CLOCK_MONOTONIC)`` — the same system-wide clock in every process (checked with
``time.get_clock_info``) — so a client process on this machine can subtract the two directly.

Written on bare ``asyncio.start_server`` with hand-written HTTP/1.1 chunked framing: no framework
code sits between the timestamp and the write. The log is kept for the last 20 000 requests:
``GET /log?request_id=ID`` (one), ``GET /log`` (all), ``POST /log/clear``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import OrderedDict
from typing import Any
from urllib.parse import parse_qs, urlsplit

MAX_LOG = 20_000
_MAX_HEAD = 65_536


class ScriptedServer:
    """State of one server: the write log and a request counter."""

    def __init__(self) -> None:
        self.log: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.counter = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                received_ns = time.perf_counter_ns()
                method, target, headers = _parse_head(head)
                length = int(headers.get("content-length", "0") or 0)
                body = await reader.readexactly(length) if length else b""
                keep = await self._route(method, target, headers, body, writer, received_ns)
                if not keep or headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        except asyncio.CancelledError:  # server shutting down: end this connection quietly
            pass
        finally:
            writer.close()

    async def _route(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes,
        writer: asyncio.StreamWriter,
        received_ns: int,
    ) -> bool:
        url = urlsplit(target)
        if method == "POST" and url.path.endswith("/chat/completions"):
            return await self._chat(headers, body, writer, received_ns)
        if method == "GET" and url.path == "/log":
            ids = parse_qs(url.query).get("request_id")
            data: Any = list(self.log.values())
            if ids:
                data = [self.log.get(i) for i in ids[0].split(",")]
            _respond(writer, 200, json.dumps(data).encode())
        elif method == "POST" and url.path == "/log/clear":
            self.log.clear()
            _respond(writer, 200, b"{}")
        elif url.path == "/health":
            _respond(writer, 200, b'{"status": "ok"}')
        else:
            _respond(writer, 404, b'{"error": {"message": "not found"}}')
        await writer.drain()
        return True

    async def _chat(
        self, headers: dict[str, str], body: bytes, writer: asyncio.StreamWriter, received_ns: int
    ) -> bool:
        request = json.loads(body or b"{}")
        script = _script(request)
        self.counter += 1
        rid = f"req_{self.counter}"
        status = int(script.get("status", 200))
        if status != 200:
            quoted = headers.get("authorization", "") if script.get("echo_auth") else ""
            msg = {"error": {"message": f"scripted error; you sent: {quoted}", "type": "scripted"}}
            _respond(writer, status, json.dumps(msg).encode(), {"x-request-id": rid})
            await writer.drain()
            return True
        entry: dict[str, Any] = {
            "request_id": rid,
            "received_ns": received_ns,
            "script": script,
            "events": [],
        }
        self.log[rid] = entry
        while len(self.log) > MAX_LOG:
            self.log.popitem(last=False)
        events: list[list[Any]] = entry["events"]
        model = request.get("model", "scripted")
        head = (
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            f"transfer-encoding: chunked\r\nx-request-id: {rid}\r\n\r\n"
        ).encode()
        writer.write(head)
        events.append(["headers", time.perf_counter_ns()])
        if script.get("role_chunk", True):
            _write_event(writer, events, "role", _chunk(rid, model, {"role": "assistant"}))
        n = int(script.get("n_tokens", 20))
        gaps = script.get("gaps_ms") or [float(script.get("gap_ms", 20))] * max(0, n - 1)
        offsets = [float(script.get("ttft_ms", 50))]
        for gap in gaps[: n - 1]:
            offsets.append(offsets[-1] + float(gap))
        extras = []
        if script.get("empty_chunk_ms") is not None:
            extras.append((float(script["empty_chunk_ms"]), "empty"))
        if script.get("comment_ms") is not None:
            extras.append((float(script["comment_ms"]), "comment"))
        plan = sorted([(t, "token") for t in offsets] + extras, key=lambda x: x[0])
        loop = asyncio.get_running_loop()
        start = loop.time() - (time.perf_counter_ns() - received_ns) / 1e9
        cut = script.get("cut_after")
        sent = 0
        for at_ms, kind in plan:
            delay = start + at_ms / 1000.0 - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if kind == "comment":
                _write_event(writer, events, "comment", b": keep-alive\n\n")
            elif kind == "empty":
                _write_event(writer, events, "empty", _chunk(rid, model, {"content": ""}))
            else:
                last = sent == n - 1
                payload = _chunk(rid, model, {"content": f"tok{sent} "}, "stop" if last else None)
                _write_event(writer, events, "token", payload)
                sent += 1
                if script.get("error_after") is not None and sent >= int(script["error_after"]):
                    err = {"error": {"message": "scripted failure mid-stream", "type": "server"}}
                    _write_event(
                        writer, events, "error", b"data: " + json.dumps(err).encode() + b"\n\n"
                    )
                if cut is not None and sent >= int(cut):
                    await writer.drain()
                    writer.transport.abort()  # no terminating chunk: an incomplete body
                    return False
            await writer.drain()
        if script.get("usage", True):
            usage = {"prompt_tokens": 10, "completion_tokens": sent, "total_tokens": 10 + sent}
            obj = {
                "id": rid,
                "object": "chat.completion.chunk",
                "model": model,
                "choices": [],
                "usage": usage,
            }
            if script.get("timings"):
                obj["timings"] = script["timings"]
            _write_event(writer, events, "usage", b"data: " + json.dumps(obj).encode() + b"\n\n")
        if script.get("done", True):
            _write_event(writer, events, "done", b"data: [DONE]\n\n")
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return method, target, headers


def _script(request: dict[str, Any]) -> dict[str, Any]:
    script = dict(request.get("script") or {})
    model = str(request.get("model", ""))
    if model.startswith("scripted:"):
        names = {"ttft": "ttft_ms", "gap": "gap_ms", "n": "n_tokens"}
        for part in model.split(":", 1)[1].split(","):
            if "=" in part:
                key, value = part.split("=", 1)
                script.setdefault(names.get(key, key), float(value))
    return script


def _chunk(rid: str, model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    obj = {
        "id": rid,
        "object": "chat.completion.chunk",
        "model": model,
        "system_fingerprint": "fp_scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _write_event(
    writer: asyncio.StreamWriter, events: list[list[Any]], kind: str, payload: bytes
) -> None:
    frame = b"%x\r\n%b\r\n" % (len(payload), payload)
    events.append([kind, time.perf_counter_ns()])
    writer.write(frame)


def _respond(
    writer: asyncio.StreamWriter, status: int, body: bytes, headers: dict[str, str] | None = None
) -> None:
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    writer.write(
        f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(body)}"
        f"\r\n{extra}\r\n".encode()
        + body
    )


async def start(
    host: str = "127.0.0.1", port: int = 0
) -> tuple[asyncio.Server, int, ScriptedServer]:
    """Start listening; returns the asyncio server, its port and the state holding the log."""
    state = ScriptedServer()
    server = await asyncio.start_server(state.handle, host, port, limit=_MAX_HEAD, backlog=1024)
    return server, server.sockets[0].getsockname()[1], state


async def _main(host: str, port: int) -> None:
    server, bound, _ = await start(host, port)
    print(f"PORT {bound}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description="Scripted-delay SSE server (timing fidelity).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop if installed")
    args = parser.parse_args()
    if args.uvloop:
        import uvloop  # optional, only for comparison runs

        uvloop.run(_main(args.host, args.port))
    else:
        asyncio.run(_main(args.host, args.port))


if __name__ == "__main__":
    main()
