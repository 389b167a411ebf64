"""Capability on real engines: SmolLM2-135M in F16 (base) vs Q4_0 (fast) on llama.cpp.

What a real pair scores on the capability benchmarks, even though a 135M model scores low:
a HumanEval subset (run in the sandbox), BFCL v4 simple and irrelevance (tools sent through
the OpenAI ``tools`` field; llama-server parses tool calls only with ``--jinja``, so these two
servers are started here, privately, with it), and the instruction cases. Temperature 0, one
answer per case per tier, both tiers through the project's own client. The servers are this
script's own processes (started and stopped by pid); the local vendor's state is untouched.

Needs the llama.cpp build in the cache (``evals.vendors.llamacpp.build.cached_binaries``);
exits saying so otherwise rather than building for half an hour.

Run: ``.venv/bin/python benchmarks/capability_engines.py --write-docs [--humaneval 40]
[--bfcl 40]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.docs_section import write_section  # noqa: E402
from evals.benchmarks import bfcl, humaneval, instructions, score  # noqa: E402
from evals.benchmarks.toolcheck import check, tool_metrics  # noqa: E402
from evals.client import make_client, stream_chat  # noqa: E402
from evals.records import EndpointSpec  # noqa: E402
from evals.stats.capability import paired_table  # noqa: E402
from evals.vendors.llamacpp import cache_dir  # noqa: E402
from evals.vendors.llamacpp import server as llamacpp  # noqa: E402
from evals.vendors.llamacpp.build import (  # noqa: E402
    LLAMA_CPP_PYTHON,
    Binaries,
    cached_binaries,
)
from evals.vendors.llamacpp.models import prepare_model  # noqa: E402

SECTION = "## Capability on real engines (llama.cpp)"
TIERS = {"base": "smollm2-f16", "fast": "smollm2-q4_0"}
MAX_TOKENS = 192  # enough for a HumanEval function; bounds the time of a pass


async def answer(url: str, model: str, cases):
    endpoint = EndpointSpec(model, "openai", url, model, timeout_s=300)
    async with make_client() as client:
        out = []
        for case in cases:  # one at a time: a 2-core machine, one slot per server
            out.append(await stream_chat(client, endpoint,
                                         score.request_for(case, max_tokens=MAX_TOKENS)))
        return out


def _any_build() -> Binaries | None:
    """A finished build of this version under another cache key (builds keyed by CPU
    features), for running before the layouts agree."""
    for root in sorted((cache_dir() / "llama.cpp").glob(f"{LLAMA_CPP_PYTHON}-*")):
        server, quantize = root / "bin" / "llama-server", root / "bin" / "llama-quantize"
        if server.is_file() and quantize.is_file():
            return Binaries(version=LLAMA_CPP_PYTHON, server=server, quantize=quantize,
                            build_seconds=None)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--humaneval", type=int, default=20)
    parser.add_argument("--bfcl", type=int, default=20, help="cases per BFCL category")
    parser.add_argument("--instructions", type=int, default=40)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    binaries = cached_binaries() or _any_build()
    if binaries is None:
        raise SystemExit("no llama.cpp build in the cache yet: run `manage.py local_vendor up` "
                         "once (it builds llama-server), then this script")
    cases = (humaneval.load_cases(args.humaneval)
             + bfcl.load_cases(["simple_python"], limit=args.bfcl)
             + bfcl.load_cases(["irrelevance"], limit=args.bfcl)
             + instructions.load_cases()[:args.instructions])
    records, seconds, servers = {}, {}, []
    try:
        for tier, model in TIERS.items():
            path = prepare_model(model, binaries=binaries)
            spec = llamacpp.ServerSpec(f"capability-{model}", path, llamacpp.free_port(),
                                       alias=model, ctx=4096, threads=2,
                                       args=("--no-cache-prompt", "--jinja"))
            log = cache_dir() / "run" / "logs" / f"capability-{model}.log"
            proc = llamacpp.start(binaries.server, spec, log=log)
            servers.append(proc)
            t = time.perf_counter()
            records[tier] = asyncio.run(answer(proc.url, model, cases))
            seconds[tier] = time.perf_counter() - t
            llamacpp.stop(proc.pid)
            servers.remove(proc)
    finally:
        for proc in servers:
            llamacpp.stop(proc.pid)
    outcomes = {tier: [score.score(c, r) for c, r in zip(cases, recs, strict=True)]
                for tier, recs in records.items()}
    cats = sorted({c.category for c in cases})
    lines = [SECTION, "",
             f"SmolLM2-135M-Instruct F16 (base) vs Q4_0 (fast), llama.cpp "
             f"{binaries.version}, temperature 0, one answer per case per tier (at most "
             f"{MAX_TOKENS} tokens), 2 threads. Command: `.venv/bin/python "
             f"benchmarks/capability_engines.py --write-docs --humaneval {args.humaneval} "
             f"--bfcl {args.bfcl} --instructions {args.instructions}`.", "",
             "| category | n | base passed | fast passed | both | base only | fast only | "
             "McNemar p |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for cat in cats:
        idx = [i for i, c in enumerate(cases) if c.category == cat]
        table = paired_table({i: outcomes["fast"][i].passed for i in idx},
                             {i: outcomes["base"][i].passed for i in idx})
        lines.append(f"| `{cat}` | {table.n} | {table.both_pass + table.base_only} | "
                     f"{table.both_pass + table.fast_only} | {table.both_pass} | "
                     f"{table.base_only} | {table.fast_only} | {table.p_value:.3g} |")
    tool_idx = [i for i, c in enumerate(cases) if c.tool_answers is not None]
    verdicts = {tier: {str(i): check(cases[i], records[tier][i].tool_calls) for i in tool_idx}
                for tier in TIERS}
    m = tool_metrics(verdicts["fast"], verdicts["base"])

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.0f}%"

    lines += ["", f"Tool calls ({m.n} BFCL cases): decision F1 fast vs base "
              f"{m.decision_f1 if m.decision_f1 is None else round(m.decision_f1, 3)}; schema "
              f"accuracy base {pct(m.schema_accuracy_base)}, fast "
              f"{pct(m.schema_accuracy_fast)}; errors base {m.errors_base or '{}'}, fast "
              f"{m.errors_fast or '{}'}.", "",
              "Time for one pass of all cases: " + ", ".join(
                  f"{t} {seconds[t]:.0f} s" for t in TIERS) + ". Cost: none (local).", ""]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write_docs:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
