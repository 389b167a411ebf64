"""Collect tripwire pools on real engines: what llama.cpp's ``llama-server`` answers to the
tripwire's own queries, window after window, under the nondeterminism a real API has and after
a switch of the model it serves (replayed by ``benchmarks/tripwire_engine_replay.py``).

Null configurations serve SmolLM2-135M F16: one slot on 1 and 2 threads, the prompt cache off
(``cache_prompt: false`` in the body), and batched slots (``--parallel`` 2 and 4: the product
sends a window's queries at once, so they share batches, where llama.cpp stops being bit-exact).
Each is served over ``--lifetimes`` server starts (a restart is part of the null). Switch pools:
Q8_0, Q4_0 (the same weights, other numerics), Gemma 3 270M (another model) and speculative
decoding, lossless by construction: F16 verifying a Q4_0 draft of itself, and llama-server's
n-gram drafts (``--spec-type ngram-simple``) on batched slots.

A *window* is one tripwire run on one tier: the product's own requests (``monitor.runs.tripwire``
sends all of them at once) through the project's client, read by ``evals.stats.tripwire``.
Border pools (the black-box case): discovery on the null server (``evals.stats.border``), then
``--border-samples`` one-token answers per border input from every pool's server.

Run: ``nice -n 15 .venv/bin/python benchmarks/tripwire_engine_pools.py --out var/pools.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from evals.client import make_client, stream_chat
from evals.records import EndpointSpec
from evals.stats import border
from evals.stats import tripwire as stats
from evals.vendors.llamacpp import EngineError, build, models, server

F16, Q8, Q4, GEMMA = "smollm2-f16", "smollm2-q8_0", "smollm2-q4_0", "gemma3-270m-q4_k_m"
# name → (model, threads, slots, body extras, extra server flags, null?)
POOLS: dict[str, tuple[str, int, int, dict[str, Any], tuple[str, ...], bool]] = {
    "f16 1 thread": (F16, 1, 1, {}, (), True),
    "f16 2 threads": (F16, 2, 1, {}, (), True),
    "f16 no prompt cache": (F16, 1, 1, {"cache_prompt": False}, (), True),
    "f16 2 slots": (F16, 1, 2, {}, (), True),
    "f16 4 slots": (F16, 1, 4, {}, (), True),
    "q8_0 4 slots": (Q8, 1, 4, {}, (), False),
    "q4_0 4 slots": (Q4, 1, 4, {}, (), False),
    "gemma 4 slots": (GEMMA, 1, 4, {}, (), False),
    "f16 speculative (q4_0 draft)": (F16, 1, 1, {}, ("--draft",), False),
    "f16 4 slots n-gram speculative": (F16, 1, 4, {}, ("--spec-type", "ngram-simple"), False),
}
BORDER_NULL = "f16 4 slots"  # where border inputs are discovered: the batched, noisy server
BORDER_POOLS = (BORDER_NULL, "q8_0 4 slots", "q4_0 4 slots", "gemma 4 slots")  # fmt: skip


async def _ask(spec: EndpointSpec, prompts: list[str], concurrency: int, request: Any) -> list:
    gate = asyncio.Semaphore(concurrency)
    async with make_client() as client:

        async def one(prompt: str) -> Any:
            async with gate:
                return await stream_chat(client, spec, request(prompt))

        return list(zip(prompts, await asyncio.gather(*(one(p) for p in prompts)), strict=True))


def window(spec: EndpointSpec, repeats: int) -> dict[str, list[dict[str, float]]]:
    """One tripwire run on one tier, as the product sends it (all queries at once)."""
    prompts = [p for p in stats.DEFAULT_PROMPTS for _ in range(repeats)]
    for _ in range(3):  # a request lost on a loaded machine: the window is asked again
        answers = asyncio.run(_ask(spec, prompts, len(prompts), stats.request))
        got, failed, why = stats.window_of(answers)
        if not failed:
            return got
        print(f"{spec.name}: {failed} queries failed ({why}); window asked again", flush=True)
    raise SystemExit(f"{spec.name}: {failed} queries without logprobs ({why})")


def answers(spec: EndpointSpec, prompts: list[str]) -> dict[str, dict[str, int]]:
    """Border queries (no logprobs asked), 8 in flight as ``monitor.runs.border`` sends them."""
    got = asyncio.run(_ask(spec, prompts, 8, border.request))
    return {p: dict(c) for p, c in border.distributions(
        [(p, border.answer(r)) for p, r in got]).items()}  # fmt: skip


def serve(binaries: build.Binaries, paths: dict[str, Path], name: str, tmp: str) -> Any:
    model, threads, slots, _, flags, _ = POOLS[name]
    if "--draft" in flags:
        flags = ("--spec-type", "draft-simple", "-md", str(paths[Q4]), "--spec-draft-n-max", "4",
                 "--spec-draft-n-min", "0")  # fmt: skip
    spec = server.ServerSpec(
        name=name, model=paths[model], port=server.free_port(), alias="m", ctx=512 * slots,
        threads=threads, parallel=slots, args=flags,
    )  # fmt: skip
    return server.start(binaries.server, spec, log=Path(tmp) / f"{name.replace(' ', '_')}.log")


def collect(args: argparse.Namespace) -> dict[str, Any]:
    binaries = build.cached_binaries()
    if binaries is None:
        raise SystemExit("no cached llama.cpp build: run benchmarks/engines.py first")
    paths = {m: models.prepare_model(m, binaries=binaries) for m in (F16, Q8, Q4, GEMMA)}
    out: dict[str, Any] = {"pools": {}, "border": {}, "meta": {
        "llama_cpp_python": binaries.version, "repeats": args.repeats,
        "prompts": list(stats.DEFAULT_PROMPTS), "load_start": os.getloadavg()[0]}}  # fmt: skip
    started = time.monotonic()
    inputs: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        names = [n for n in [BORDER_NULL, *POOLS] if n in (args.only or POOLS)]
        names = list(dict.fromkeys(names))
        for name in names:
            null, lifetimes, border_pool = POOLS[name][5], [], {}
            for life in range(args.lifetimes if null else 1):
                try:
                    proc = serve(binaries, paths, name, tmp)
                except EngineError as exc:  # e.g. a flag this build refuses: said, not fatal
                    print(f"{name}: not served ({str(exc)[:300]})", flush=True)
                    break
                spec = EndpointSpec(name=name, protocol="openai", base_url=proc.url, model="m",
                                    extra_body=POOLS[name][3])  # fmt: skip
                try:
                    n = args.windows // (args.lifetimes if null else 1)
                    lifetimes.append([window(spec, args.repeats) for _ in range(n)])
                    if name == BORDER_NULL and life == 0 and args.border:
                        cands = border.candidates(args.border, seed=0)
                        first = answers(spec, [c for c in cands for _ in range(3)])
                        inputs = [c for c in cands if border.is_border(first.get(c, {}))]
                        out["border_discovery"] = {"candidates": len(cands), "found": inputs}
                    if args.flips and life == 0:  # each candidate once: answers that moved
                        cands = border.candidates(args.flips, seed=0)
                        got = answers(spec, cands)
                        out.setdefault("flips", {})[name] = {
                            p: max(c, key=c.get) for p, c in got.items()
                        }
                    if inputs and name in BORDER_POOLS:
                        got = answers(spec, [p for p in inputs for _ in range(args.border_samples)])
                        for p, c in got.items():
                            for t, k in c.items():
                                border_pool.setdefault(p, {}).setdefault(t, 0)
                                border_pool[p][t] += k
                finally:
                    server.stop(proc.pid)
            if not lifetimes:
                continue
            out["pools"][name] = {"null": null, "lifetimes": lifetimes}
            out["border"][name] = border_pool
            print(f"{name}: {sum(map(len, lifetimes))} windows, border inputs {len(border_pool)}, "
                  f"{time.monotonic() - started:.0f} s", flush=True)  # fmt: skip
    out["meta"]["seconds"] = round(time.monotonic() - started)
    out["meta"]["load_end"] = os.getloadavg()[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("var/tripwire_pools.json"))
    parser.add_argument("--windows", type=int, default=60, help="windows per pool")
    parser.add_argument("--lifetimes", type=int, default=3, help="server starts per null pool")
    parser.add_argument("--repeats", type=int, default=stats.DEFAULT_REPEATS)
    parser.add_argument("--border", type=int, default=border.DISCOVERY_CANDIDATES)
    parser.add_argument("--border-samples", type=int, default=40)
    parser.add_argument("--only", nargs="*", help="collect these pools only")
    parser.add_argument("--flips", type=int, default=0, help="candidates answered once per pool")
    args = parser.parse_args()
    pools = collect(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(pools))
    print(f"wrote {args.out} ({pools['meta']['seconds']} s)")


if __name__ == "__main__":
    main()
