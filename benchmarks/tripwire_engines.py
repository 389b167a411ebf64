"""Logprob tripwires on real engines: llama.cpp's ``llama-server`` serving SmolLM2-135M F16,
the same F16 weights on another thread count (numerics only), and Q8_0 (an 8-bit
quantization), queried with the product's own client and statistic (``evals.stats.tripwire``).

Per server ``WINDOWS`` windows of the tripwire's prompts × ``repeats`` one-token queries. The
reference is the F16 server's first ``REFERENCE_RUNS`` windows (frozen, as the product does);
every later window of each server is tested against it, and its p folded into an e-detector
with the product's threshold. Printed: per server the median distance and p, the share of
windows with p ≤ 0.01, and at which window the detector would fire.

Run: ``nice -n 10 .venv/bin/python benchmarks/tripwire_engines.py`` (a minute or two of CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from evals.client import make_client, stream_chat
from evals.records import EndpointSpec
from evals.stats import eprocess, error_budget
from evals.stats import tripwire as stats
from evals.vendors.llamacpp import build, models, server

THRESHOLD = eprocess.threshold_for(24 * 90, 0.1)  # monitor.derived.tripwire's


async def _ask(spec: EndpointSpec, repeats: int) -> list:
    """One request at a time, as one slot serves them."""
    async with make_client() as client:
        return [
            (p, await stream_chat(client, spec, stats.request(p)))
            for p in stats.DEFAULT_PROMPTS
            for _ in range(repeats)
        ]


def windows(url: str, alias: str, n: int, repeats: int) -> list[dict]:
    spec = EndpointSpec(name=alias, protocol="openai", base_url=url, model=alias)
    out = []
    for _ in range(n):
        window, failed, why = stats.window_of(asyncio.run(_ask(spec, repeats)))
        if failed:
            raise SystemExit(f"{alias}: {failed} queries without logprobs ({why})")
        out.append(window)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--windows", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=stats.DEFAULT_REPEATS)
    args = parser.parse_args()
    binaries = build.cached_binaries()
    if binaries is None:
        raise SystemExit("no cached llama.cpp build: run benchmarks/engines.py first")
    paths = {m: models.prepare_model(m, binaries=binaries) for m in ("smollm2-f16", "smollm2-q8_0")}
    targets = [
        ("F16", "smollm2-f16", 1),
        ("F16, 2 threads", "smollm2-f16", 2),
        ("Q8_0", "smollm2-q8_0", 1),
    ]
    results, ref_n = {}, error_budget.TRIPWIRE_REFERENCE_RUNS
    with tempfile.TemporaryDirectory() as tmp:
        for label, model, threads in targets:
            spec = server.ServerSpec(
                name=label, model=paths[model], port=server.free_port(), alias="smollm2",
                ctx=512, threads=threads,
            )  # fmt: skip
            proc = server.start(binaries.server, spec, log=Path(tmp) / f"{model}{threads}.log")
            try:
                results[label] = windows(proc.url, "smollm2", args.windows + ref_n, args.repeats)
            finally:
                server.stop(proc.pid)
    base = results["F16"]
    reference = {p: [o for w in base[:ref_n] for o in w[p]] for p in stats.DEFAULT_PROMPTS}
    print(f"reference: F16, {ref_n} windows × {args.repeats} queries per prompt; "
          f"detector threshold {THRESHOLD:.0f}")  # fmt: skip
    for label, ws in results.items():
        later = ws[ref_n:] if label == "F16" else ws[: args.windows]
        state, fired, tests = eprocess.EProcessState(), None, []
        for i, w in enumerate(later, 1):
            t = stats.window_test(reference, w, seed=i)
            tests.append(t)
            state, d = eprocess.update(
                state,
                eprocess.AuditEvidence(t.p_value, calibrator=eprocess.TRIPWIRE),
                threshold=THRESHOLD,
            )
            fired = fired or (i if d.new_alarm else None)
        dist = statistics.median(t.statistic for t in tests)
        p_med = statistics.median(t.p_value for t in tests)
        small = sum(t.p_value <= 0.01 for t in tests)
        print(f"{label:16s} median distance {dist:.4f} nats, median p {p_med:.4g}, "
              f"p ≤ 0.01 in {small}/{len(tests)} windows, fires at window {fired}")  # fmt: skip


if __name__ == "__main__":
    main()
