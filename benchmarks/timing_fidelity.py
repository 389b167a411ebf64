"""How exactly does ``evals.client.stream_chat`` timestamp a stream? Measured, not assumed.

The scripted server (``evals.scripted_server``) runs in its own process and logs, per event, the
``perf_counter_ns`` just before it handed the bytes to the kernel. This process streams from it
with ``stream_chat`` and with a minimal raw-socket asyncio client (the floor of this machine:
``asyncio.open_connection``, a hand-written request, one timestamp per ``read``). Both processes
read CLOCK_MONOTONIC, so error = client timestamp - server write timestamp, per event:

- TTFT error: client's first-token time - server's write of the first token (always >= 0);
- gap error: |client gap - server gap| for each pair of consecutive tokens.

Run: ``.venv/bin/python benchmarks/timing_fidelity.py --write-docs`` (about two minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evals.client import make_client, stream_chat  # noqa: E402
from evals.records import ChatRequest, EndpointSpec  # noqa: E402

SCRIPT = {"ttft_ms": 50, "gap_ms": 20, "n_tokens": 20}
PLAN = [(1, 60), (50, 200), (100, 200), (200, 400)]  # (concurrent streams, requests)
QUICK_PLAN = [(1, 15), (50, 100), (200, 200)]
DOC = ROOT / "docs" / "benchmarks.md"


@dataclass
class Errors:
    ttft_ms: list[float] = field(default_factory=list)
    gap_ms: list[float] = field(default_factory=list)
    failed: int = 0


def start_server(uvloop: bool) -> tuple[subprocess.Popen[str], int]:
    cmd = [sys.executable, "-m", "evals.scripted_server", "--port", "0"]
    if uvloop:
        cmd.append("--uvloop")
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
            batch = ids[i : i + 100]
            resp = await client.get(f"http://127.0.0.1:{port}/log",
                                    params={"request_id": ",".join(batch)})
            for entry in resp.json():
                out[entry["request_id"]] = entry
    return out


def token_ns(entry: dict) -> list[int]:
    return [t for kind, t in entry["events"] if kind == "token"]


def compare(client_s: list[float], server_ns: list[int], errors: Errors) -> None:
    """Append the TTFT and gap errors of one stream (client times in perf_counter seconds)."""
    server_s = [t / 1e9 for t in server_ns]
    if len(client_s) != len(server_s) or not client_s:
        errors.failed += 1
        return
    errors.ttft_ms.append((client_s[0] - server_s[0]) * 1000)
    for i in range(1, len(client_s)):
        gap_c = client_s[i] - client_s[i - 1]
        gap_s = server_s[i] - server_s[i - 1]
        errors.gap_ms.append(abs(gap_c - gap_s) * 1000)


async def run_httpx(port: int, concurrency: int, n: int) -> Errors:
    endpoint = EndpointSpec(name="scripted", protocol="openai", model="scripted",
                            base_url=f"http://127.0.0.1:{port}/v1", timeout_s=60,
                            extra_body={"script": SCRIPT})
    request = ChatRequest(messages=[{"role": "user", "content": "count"}], max_tokens=32)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    gate = asyncio.Semaphore(concurrency)
    results: list[tuple[float, object]] = []

    async def one(client: httpx.AsyncClient) -> None:
        async with gate:
            t0: list[float] = []
            rec = await stream_chat(client, endpoint, request, on_start=t0.append)
            results.append((t0[0], rec))

    async with make_client(limits=limits) as client:
        await asyncio.gather(*(one(client) for _ in range(min(concurrency, 20))))  # warm-up
        results.clear()
        await asyncio.gather(*(one(client) for _ in range(n)))
    errors = Errors()
    ids = [r.headers.get("x-request-id", "") for _, r in results if r.ok]  # type: ignore[attr-defined]
    log = await server_log(port, ids)
    for t0, rec in results:
        if not rec.ok or rec.ttft_ms is None:  # type: ignore[attr-defined]
            errors.failed += 1
            continue
        times = [t0 + rec.ttft_ms / 1000]  # type: ignore[attr-defined]
        for gap in rec.chunk_gaps_ms:  # type: ignore[attr-defined]
            times.append(times[-1] + gap / 1000)
        compare(times, token_ns(log[rec.headers["x-request-id"]]), errors)  # type: ignore[attr-defined]
    return errors


async def raw_stream(port: int, body: bytes) -> tuple[str, list[float]]:
    """The floor: one perf_counter() per read, events counted by their blank-line ends."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json"
        b"\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%b" % (len(body), body)
    )
    perf = time.perf_counter
    head = b""
    in_body = False
    times: list[float] = []
    tail = b""
    while True:
        data = await reader.read(65536)
        now = perf()
        if not data:
            break
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
    return (rid.group(1).decode() if rid else ""), times


async def run_raw(port: int, concurrency: int, n: int) -> Errors:
    body = json.dumps({"model": "scripted", "stream": True, "script": SCRIPT}).encode()
    gate = asyncio.Semaphore(concurrency)
    results: list[tuple[str, list[float]]] = []

    async def one() -> None:
        async with gate:
            results.append(await raw_stream(port, body))

    await asyncio.gather(*(one() for _ in range(min(concurrency, 20))))
    results.clear()
    await asyncio.gather(*(one() for _ in range(n)))
    log = await server_log(port, [rid for rid, _ in results])
    errors = Errors()
    for rid, times in results:
        kinds = [k for k, _ in log[rid]["events"] if k != "headers"]
        client_tokens = [t for k, t in zip(kinds, times, strict=False) if k == "token"]
        compare(client_tokens, token_ns(log[rid]), errors)
    return errors


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
    return (f"{os.cpu_count()} cores ({cpu}), Linux {platform.release()}, "
            f"Python {platform.python_version()}, httpx {httpx.__version__}")


def table(rows: list[tuple[int, int, Errors, Errors]]) -> str:
    out = [
        "| streams | client | requests | TTFT err P50 | TTFT err P99 | gap err P50 | gap err P99"
        " | P99 ratio to floor (TTFT / gap) |",
        "|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    for conc, n, hx, raw in rows:
        for name, e in (("stream_chat (httpx)", hx), ("raw socket (floor)", raw)):
            ratio = "—"
            if e is hx:
                ratio = (f"{pct(hx.ttft_ms, 99) / pct(raw.ttft_ms, 99):.2f}x / "
                         f"{pct(hx.gap_ms, 99) / pct(raw.gap_ms, 99):.2f}x")
            fail = f" ({e.failed} failed)" if e.failed else ""
            out.append(
                f"| {conc} | {name} | {n}{fail} | {pct(e.ttft_ms, 50):.3f} | {pct(e.ttft_ms, 99):.3f}"
                f" | {pct(e.gap_ms, 50):.3f} | {pct(e.gap_ms, 99):.3f} | {ratio} |"
            )
    return "\n".join(out)


async def measure(port: int, plan: list[tuple[int, int]]) -> list[tuple[int, int, Errors, Errors]]:
    rows = []
    for conc, n in plan:
        hx = await run_httpx(port, conc, n)
        raw = await run_raw(port, conc, n)
        rows.append((conc, n, hx, raw))
        print(f"{conc:>4} streams: httpx TTFT P99 {pct(hx.ttft_ms, 99):.3f} ms, gap P99 "
              f"{pct(hx.gap_ms, 99):.3f} ms | floor TTFT P99 {pct(raw.ttft_ms, 99):.3f} ms, "
              f"gap P99 {pct(raw.gap_ms, 99):.3f} ms", flush=True)
    return rows


def write_docs(section: str) -> None:
    """Replace (or add) the "## Timing fidelity" section, leaving other sections alone."""
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    pattern = re.compile(r"^## Timing fidelity\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    DOC.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    parser.add_argument("--uvloop", action="store_true", help="client and server on uvloop")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    plan = QUICK_PLAN if args.quick else PLAN
    proc, port = start_server(args.uvloop)
    started = time.monotonic()
    try:
        if args.uvloop:
            import uvloop

            rows = uvloop.run(measure(port, plan))
        else:
            rows = asyncio.run(measure(port, plan))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    took = time.monotonic() - started
    result = table(rows)
    print(result)
    print(f"took {took:.0f} s")
    if args.write_docs:
        cmd = "benchmarks/timing_fidelity.py" + (" --uvloop" if args.uvloop else "")
        write_docs(section_text(result, cmd, took))


def section_text(result: str, cmd: str, took: float) -> str:
    return (
        "## Timing fidelity\n\n"
        f"Command: `.venv/bin/python {cmd} --write-docs` ({took:.0f} s). "
        f"Date: {dt.date.today().isoformat()}. Machine: {machine()}.\n\n"
        f"Script per request: first token at {SCRIPT['ttft_ms']} ms, {SCRIPT['n_tokens']} tokens"
        f" {SCRIPT['gap_ms']} ms apart; server and clients in separate processes on this"
        " machine; errors in milliseconds against the server's write timestamps"
        " (CLOCK_MONOTONIC in both processes).\n\n" + result + "\n"
    )


if __name__ == "__main__":
    main()
