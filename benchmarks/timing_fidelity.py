"""How exactly does ``evals.client.stream_chat`` timestamp a stream? Measured, not assumed.

The scripted server (``evals.vendors.scripted``) runs in its own process and logs, per event, the
``perf_counter_ns`` just before it handed the bytes to the kernel. This process streams from it
with ``stream_chat`` (default aiohttp-backed transport, and httpx's own httpcore transport for
comparison) and with a minimal raw-socket asyncio client: the floor of this machine
(``asyncio.open_connection``, a hand-written request, one timestamp per ``read``). Both processes
read CLOCK_MONOTONIC, so, per stream:

- TTFT error = client's first-token time - server's write of the first token (>= 0);
- gap error = |client gap - server gap| for each pair of consecutive tokens.

Run: ``.venv/bin/python benchmarks/timing_fidelity.py --write-docs`` (about two minutes;
``--uvloop`` adds a pass with the clients on uvloop; ``--quick`` is a smoke run). For
diagnosis, without ``--write-docs``: ``--plan 200:400`` (streams:requests, repeatable),
``--clients aiohttp,floor`` (a subset), ``--no-gc`` (automatic garbage collection off in this
process, to see how much of the error is collection pauses).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evals.client import make_client, stream_chat  # noqa: E402
from evals.records import ChatRequest, EndpointSpec  # noqa: E402

SCRIPT = {"ttft_ms": 50, "gap_ms": 20, "n_tokens": 20}
PLAN = [(1, 40), (50, 200), (100, 200), (200, 400)]  # (concurrent streams, requests)
QUICK_PLAN = [(1, 10), (50, 100), (200, 200)]
CLIENTS = (
    "stream_chat, ProbeClient (aiohttp)",
    "stream_chat, httpx.AsyncClient (httpcore)",
    "raw socket (floor)",
)
DOC = ROOT / "docs" / "benchmarks.md"


@dataclass
class Errors:
    ttft_ms: list[float] = field(default_factory=list)
    gap_ms: list[float] = field(default_factory=list)
    failed: int = 0
    cpu_us_per_event: float = float("nan")
    gc_pauses_ms: list[float] = field(default_factory=list)  # the client process's collections


class GcPauses:
    """Wall time of each garbage collection in this process while measuring: a collection
    stops the event loop, so every event that arrives during it is stamped late."""

    def __init__(self) -> None:
        self.pauses_ms: list[float] = []
        self._began = 0.0

    def _callback(self, phase: str, _info: dict) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.pauses_ms.append((time.perf_counter() - self._began) * 1000)

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *_exc: object) -> None:
        gc.callbacks.remove(self._callback)


def start_server() -> tuple[subprocess.Popen[str], int]:
    cmd = [sys.executable, "-m", "evals.vendors.scripted", "--port", "0"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    match = re.match(r"PORT (\d+)", line)
    if not match:
        proc.kill()
        raise RuntimeError(f"scripted server did not start: {line!r}")
    return proc, int(match.group(1))


async def server_log(port: int, ids: list[str]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    async with httpx.AsyncClient(timeout=30) as client:
        for i in range(0, len(ids), 100):
            resp = await client.get(
                f"http://127.0.0.1:{port}/log", params={"request_id": ",".join(ids[i : i + 100])}
            )
            out.update((e["request_id"], e) for e in resp.json() if e)
    return out


def compare(client_s: list[float], entry: dict | None, errors: Errors) -> None:
    """Append one stream's TTFT and gap errors (client times in perf_counter seconds)."""
    server_s = [t / 1e9 for kind, t in (entry or {}).get("events", ()) if kind == "token"]
    if not client_s or len(client_s) != len(server_s):
        errors.failed += 1
        return
    errors.ttft_ms.append((client_s[0] - server_s[0]) * 1000)
    for i in range(1, len(client_s)):
        gap_c, gap_s = client_s[i] - client_s[i - 1], server_s[i] - server_s[i - 1]
        errors.gap_ms.append(abs(gap_c - gap_s) * 1000)


Stream = Callable[[], Awaitable[tuple[str, list[float]]]]


async def measure_client(port: int, make_stream: Stream, concurrency: int, n: int) -> Errors:
    """Warm up, then ``n`` streams at most ``concurrency`` at a time; compare with the log."""
    gate = asyncio.Semaphore(concurrency)
    results: list[tuple[str, list[float]]] = []

    async def one() -> None:
        async with gate:
            results.append(await make_stream())

    await asyncio.gather(*(one() for _ in range(min(concurrency, 20))))
    results.clear()
    cpu = time.process_time()
    with GcPauses() as pauses:
        await asyncio.gather(*(one() for _ in range(n)))
    cpu = time.process_time() - cpu
    log = await server_log(port, [rid for rid, _ in results if rid])
    errors = Errors()
    for rid, times in results:
        compare(times, log.get(rid), errors)
    events = n * (SCRIPT["n_tokens"] + 3)  # role, tokens, usage, [DONE]
    errors.cpu_us_per_event = cpu / events * 1e6
    errors.gc_pauses_ms = pauses.pauses_ms
    return errors


async def with_stream_chat(port: int, backend: str, concurrency: int, n: int) -> Errors:
    endpoint = EndpointSpec(
        name="scripted",
        protocol="openai",
        model="scripted",
        base_url=f"http://127.0.0.1:{port}/v1",
        timeout_s=60,
        extra_body={"script": SCRIPT},
    )
    request = ChatRequest(messages=[{"role": "user", "content": "count"}], max_tokens=32)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with make_client(backend=backend, limits=limits) as client:

        async def stream() -> tuple[str, list[float]]:
            t0: list[float] = []
            rec = await stream_chat(client, endpoint, request, on_start=t0.append)
            if not rec.ok or rec.ttft_ms is None:
                return "", []
            times = [t0[-1] + rec.ttft_ms / 1000]
            for gap in rec.chunk_gaps_ms:
                times.append(times[-1] + gap / 1000)
            return rec.headers.get("x-request-id", ""), times

        return await measure_client(port, stream, concurrency, n)


async def raw_stream(port: int, body: bytes) -> tuple[str, list[float]]:
    """The floor: one perf_counter() per read, events found by their blank-line ends; the
    server's event order (role, tokens, usage, [DONE]) says which are tokens."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json"
        b"\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%b" % (len(body), body)
    )
    perf = time.perf_counter
    head, in_body, tail = b"", False, b""
    times: list[float] = []
    while data := await reader.read(65536):
        now = perf()
        if not in_body:
            head += data
            if b"\r\n\r\n" not in head:
                continue
            head, data = head.split(b"\r\n\r\n", 1)
            in_body = True
        joined = tail + data
        times.extend([now] * joined.count(b"\n\n"))
        tail = joined[-1:]
    writer.close()
    rid = re.search(rb"x-request-id: (\S+)", head)
    n = SCRIPT["n_tokens"]
    return (rid.group(1).decode() if rid else ""), times[1 : 1 + n] if len(times) >= n + 1 else []


async def with_raw_socket(port: int, concurrency: int, n: int) -> Errors:
    body = json.dumps({"model": "scripted", "stream": True, "script": SCRIPT}).encode()
    return await measure_client(port, lambda: raw_stream(port, body), concurrency, n)


Row = tuple[int, int, dict[str, Errors]]


CLIENT_KEYS = {"aiohttp": CLIENTS[0], "httpcore": CLIENTS[1], "floor": CLIENTS[2]}


async def measure(port: int, plan: list[tuple[int, int]], clients: tuple[str, ...]) -> list[Row]:
    rows = []
    for conc, n in plan:
        results = {}
        for key in ("aiohttp", "httpcore", "floor"):
            if key not in clients:
                continue
            if key == "floor":
                results[CLIENT_KEYS[key]] = await with_raw_socket(port, conc, n)
            else:
                results[CLIENT_KEYS[key]] = await with_stream_chat(port, key, conc, n)
        rows.append((conc, n, results))
        print(
            f"{conc:>4} streams: "
            + " | ".join(
                f"{name.split('(')[-1][:-1]}: TTFT P99 {pct(e.ttft_ms, 99):.2f}, gap P99 "
                f"{pct(e.gap_ms, 99):.2f} ms"
                for name, e in results.items()
            ),
            flush=True,
        )
    return rows


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import aiohttp

    policy = {
        os.SCHED_OTHER: "normal",
        os.SCHED_FIFO: "real-time FIFO",
        os.SCHED_RR: "real-time RR",
    }.get(os.sched_getscheduler(0), "other")
    return (
        f"{os.cpu_count()} cores ({cpu}), Linux {platform.release()}, "
        f"Python {platform.python_version()}, httpx {httpx.__version__}, "
        f"aiohttp {aiohttp.__version__}; scheduling {policy}, nice {os.nice(0)}"
    )


def table(rows: list[Row]) -> str:
    out = [
        "| streams | client | requests | TTFT err P50 | TTFT err P99 | gap err P50 | gap err P99"
        " | P99 / floor (TTFT, gap) | CPU µs/event | GC pauses: n, longest ms |",
        "|---:|---|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for conc, n, results in rows:
        floor = results.get(CLIENTS[2])
        for name, e in results.items():
            ratio = "—"
            if floor is not None and e is not floor:
                ratio = (
                    f"{pct(e.ttft_ms, 99) / pct(floor.ttft_ms, 99):.1f}x, "
                    f"{pct(e.gap_ms, 99) / pct(floor.gap_ms, 99):.1f}x"
                )
            fail = f" ({e.failed} unmatched)" if e.failed else ""
            out.append(
                f"| {conc} | {name} | {n}{fail} | {pct(e.ttft_ms, 50):.3f} "
                f"| {pct(e.ttft_ms, 99):.3f} | {pct(e.gap_ms, 50):.3f} | {pct(e.gap_ms, 99):.3f}"
                f" | {ratio} | {e.cpu_us_per_event:.0f} "
                f"| {len(e.gc_pauses_ms)}, {max(e.gc_pauses_ms, default=0):.1f} |"
            )
    return "\n".join(out)


INTRO = (
    "## Timing fidelity\n\n"
    "How far are the client's timestamps from the moment the server wrote each event? "
    "`benchmarks/timing_fidelity.py` runs `evals.vendors.scripted` in its own process; the "
    "server logs `perf_counter_ns` just before each write, the client process reads the same "
    "CLOCK_MONOTONIC. Script per request: first token {ttft} ms after the request, {n} tokens "
    "{gap} ms apart. TTFT error = client first-token time − server write; gap error = |client "
    "gap − server gap|; in milliseconds. CPU µs/event = client process CPU time / SSE events; "
    "GC pauses: the client process's garbage collections while measuring (each one stops the "
    "event loop). "
    "Clients: `stream_chat` through `ProbeClient` (aiohttp wire, the default), `stream_chat` "
    "through a plain httpx client (httpcore wire), and a raw-socket asyncio client (the floor "
    "of this machine). Goals: ≤ 1 ms P99 at 1 stream; within 1.5x the floor at 1/50/200.\n"
)


def write_docs(title: str, body: str) -> None:
    """Replace (or add) the "### {title}" run inside "## Timing fidelity"; text outside the
    runs (findings written by hand) and other sections are left alone."""
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    section_re = re.compile(r"^## Timing fidelity\n.*?(?=^## |\Z)", re.S | re.M)
    match = section_re.search(text)
    if match is None:
        intro = INTRO.format(ttft=SCRIPT["ttft_ms"], n=SCRIPT["n_tokens"], gap=SCRIPT["gap_ms"])
        text = text.rstrip("\n") + "\n\n" + intro
        match = section_re.search(text)
        assert match is not None
    section = match.group(0)
    run = f"### {title}\n\n{body.strip()}\n\n"
    run_re = re.compile(rf"^### {re.escape(title)}\n.*?(?=^### |\Z)", re.S | re.M)
    if run_re.search(section):
        section = run_re.sub(lambda _: run, section)
    else:
        section = section.rstrip("\n") + "\n\n" + run
    DOC.write_text(text[: match.start()] + section + text[match.end() :])


def run_pass(
    port: int,
    plan: list[tuple[int, int]],
    uvloop: bool,
    clients: tuple[str, ...] = tuple(CLIENT_KEYS),
) -> list[Row]:
    if uvloop:
        import uvloop as uv  # optional: pip install uvloop

        return uv.run(measure(port, plan, clients))
    return asyncio.run(measure(port, plan, clients))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    parser.add_argument("--uvloop", action="store_true", help="add a pass on uvloop")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument(
        "--plan",
        action="append",
        metavar="STREAMS:REQUESTS",
        help="instead of the standard plan (diagnosis; not with --write-docs)",
    )
    parser.add_argument(
        "--clients",
        default="aiohttp,httpcore,floor",
        help="comma-separated subset of aiohttp,httpcore,floor",
    )
    parser.add_argument(
        "--no-gc", action="store_true", help="automatic garbage collection off (diagnosis)"
    )
    args = parser.parse_args()
    clients = tuple(c.strip() for c in args.clients.split(",") if c.strip())
    if not clients or set(clients) - set(CLIENT_KEYS):
        parser.error(f"--clients: a subset of {','.join(CLIENT_KEYS)}")
    custom = bool(args.plan) or set(clients) != set(CLIENT_KEYS) or args.no_gc
    if custom and args.write_docs:
        parser.error("--plan, --clients and --no-gc are for diagnosis: not with --write-docs")
    if args.no_gc:
        gc.disable()
    plan = QUICK_PLAN if args.quick else PLAN
    if args.plan:
        plan = [(int(a), int(b)) for a, b in (x.split(":") for x in args.plan)]
    load_before = os.getloadavg()[0]
    proc, port = start_server()
    started = time.monotonic()
    try:
        passes = {"asyncio": run_pass(port, plan, uvloop=False, clients=clients)}
        if args.uvloop:
            passes["uvloop"] = run_pass(port, plan, uvloop=True, clients=clients)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    took = time.monotonic() - started
    load = f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    tables = {name: table(rows) for name, rows in passes.items()}
    for name, text in tables.items():
        print(f"\nclients on {name}:\n{text}")
    print(f"took {took:.0f} s, {load}")
    if args.write_docs:
        realtime = os.sched_getscheduler(0) in (os.SCHED_FIFO, os.SCHED_RR)
        cmd = ("chrt -f 10 " if realtime else "") + ".venv/bin/python benchmarks/timing_fidelity.py"
        cmd += (" --uvloop" if args.uvloop else "") + " --write-docs"
        title = "Run at real-time priority" if realtime else "Run at normal priority"
        lines = [
            f"Command: `{cmd}` ({took:.0f} s, {load}). Date: {dt.date.today().isoformat()}."
            f" Machine: {machine()}.\n"
        ]
        for name, text in tables.items():
            lines.append(f"Clients on the {name} event loop (server on asyncio):\n\n{text}\n")
        write_docs(title, "\n".join(lines))


if __name__ == "__main__":
    main()
