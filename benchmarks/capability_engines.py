"""Capability on real engines: SmolLM2-135M F16 (base) against a fast tier on llama.cpp.

What a real pair scores on the capability benchmarks, even though a 135M model scores low:
a HumanEval subset (run in the sandbox), BFCL v4 simple and irrelevance (tools sent through
the OpenAI ``tools`` field; llama-server parses tool calls only with ``--jinja``, so the
servers are started here, privately, with it), and the instruction cases. Temperature 0, one
answer per case per tier, both tiers through the project's own client. The fast tier is one of
the local vendor's targets (``--fast``: ``smollm2-q4``, ``smollm2-q8`` or ``gemma-270m``, served
as the vendor serves it, Gemma through its Question/Answer template). The servers are this
script's own processes (started and stopped by pid); the local vendor's state is untouched.

Why the answers are kept (``$TIERWATCH_CACHE/capability/answers.json``, keyed by the case
selection, the token limit and the llama.cpp version): at temperature 0 the base tier's pass is
the same for every pair, so it is run once and reused; each pair adds only its fast tier's pass,
and a run cut short resumes with the tiers it had not finished (``--fresh`` runs all again).
The docs section is rendered from every pair kept under the same key.

Needs the llama.cpp build in the cache (``evals.vendors.llamacpp.build.cached_binaries``);
exits saying so otherwise rather than building for half an hour.

Run (the lock keeps other engine benchmarks off the 2 cores):
``flock /tmp/tierwatch-engine.lock .venv/bin/python benchmarks/capability_engines.py
--write-docs --fast smollm2-q4 smollm2-q8 gemma-270m [--humaneval 10] [--bfcl 10]``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.docs_section import write_section  # noqa: E402
from evals.benchmarks import bfcl, humaneval, instructions, score  # noqa: E402
from evals.benchmarks.toolcheck import check, tool_metrics  # noqa: E402
from evals.client import make_client, stream_chat  # noqa: E402
from evals.records import EndpointSpec, TimingRecord  # noqa: E402
from evals.stats.capability import paired_table  # noqa: E402
from evals.stats.capability_paired import min_detectable_drop  # noqa: E402
from evals.vendors.llamacpp import cache_dir  # noqa: E402
from evals.vendors.llamacpp import server as llamacpp  # noqa: E402
from evals.vendors.llamacpp.build import (  # noqa: E402
    LLAMA_CPP_PYTHON,
    Binaries,
    cached_binaries,
)
from evals.vendors.llamacpp.models import prepare_model  # noqa: E402
from evals.vendors.llamacpp.vendor import QA_TEMPLATE, TARGETS  # noqa: E402

SECTION = "## Capability on real engines (llama.cpp)"
BASE = "smollm2-f16"
FAST = ("smollm2-q4", "smollm2-q8", "gemma-270m")
MAX_TOKENS = 192  # enough for a HumanEval function; bounds the time of a pass
THREADS = 2


async def answer(url: str, model: str, cases):
    endpoint = EndpointSpec(model, "openai", url, model, timeout_s=600)
    async with make_client() as client:
        out = []
        for case in cases:  # one at a time: a 2-core machine, one slot per server
            out.append(
                await stream_chat(client, endpoint, score.request_for(case, max_tokens=MAX_TOKENS))
            )
        return out


def _any_build() -> Binaries | None:
    """A finished build of this version under another cache key (builds keyed by CPU
    features), for running before the layouts agree."""
    for root in sorted((cache_dir() / "llama.cpp").glob(f"{LLAMA_CPP_PYTHON}-*")):
        server, quantize = root / "bin" / "llama-server", root / "bin" / "llama-quantize"
        if server.is_file() and quantize.is_file():
            return Binaries(
                version=LLAMA_CPP_PYTHON, server=server, quantize=quantize, build_seconds=None
            )
    return None


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process (``/proc/<pid>/stat`` fields 14-15): the
    server's own work, apart from the other sessions that share the cores."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_tier(binaries: Binaries, target: str, cases) -> dict:
    """One pass of ``cases`` on a private server of the vendor target; records and clocks."""
    spec_of = TARGETS[target]
    args = ["--no-cache-prompt", "--jinja"]
    if spec_of.qa_template:  # as the vendor serves it (a base model without a chat template)
        template = cache_dir() / "run" / "capability-question-answer.jinja"
        template.parent.mkdir(parents=True, exist_ok=True)
        template.write_text(QA_TEMPLATE)
        args += ["--chat-template-file", str(template)]
    spec = llamacpp.ServerSpec(
        f"capability-{target}",
        prepare_model(spec_of.model, binaries=binaries),
        llamacpp.free_port(),
        alias=target,
        ctx=4096,
        threads=THREADS,
        args=tuple(args),
    )
    proc = llamacpp.start(
        binaries.server, spec, log=cache_dir() / "run" / "logs" / f"capability-{target}.log"
    )
    try:
        load, cpu0, t = list(os.getloadavg()), cpu_seconds(proc.pid), time.perf_counter()
        records = asyncio.run(answer(proc.url, target, cases))
        wall, cpu = time.perf_counter() - t, cpu_seconds(proc.pid) - cpu0
    finally:
        llamacpp.stop(proc.pid)
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "seconds": round(wall, 1),
        "server_cpu_s": round(cpu, 1),
        "loadavg": [load, list(os.getloadavg())],
        "threads": THREADS,
        "records": [asdict(r) for r in records],
    }


def signature(args: argparse.Namespace, version: str) -> str:
    return (
        f"humaneval{args.humaneval}-bfcl{args.bfcl}-instructions{args.instructions}"
        f"-max{MAX_TOKENS}-llama.cpp{version}"
    )


def speed(run: dict) -> dict:
    """Tokens out, decode tok/s (llama.cpp's own ``timings``, median over answers) and
    output tokens per wall second of the pass (prefill and client included)."""
    recs = [TimingRecord(**r) for r in run["records"]]
    out = sum(r.output_tokens or 0 for r in recs)
    prompt = sum(r.prompt_tokens or 0 for r in recs)
    decode = [
        r.server_timings["predicted_per_second"]
        for r in recs
        if r.server_timings and r.server_timings.get("predicted_per_second")
    ]
    return {
        "prompt_tokens": prompt,
        "output_tokens": out,
        "decode_tok_s": statistics.median(decode) if decode else None,
        "pass_tok_s": out / run["seconds"] if run["seconds"] else None,
        "failed": sum(not r.ok for r in recs),
    }


def mde_sentence() -> str:
    """What a model must score for this comparison to show a loss: the cases per category
    needed for an 80%-power 10-point drop at a few base pass rates (one answer per case per
    tier, α = 0.05 two-sided; ``min_detectable_drop``'s formula)."""
    parts = []
    for rate in (0.3, 0.5, 0.8):
        m = next(
            m for m in range(5, 5000) if (min_detectable_drop(rate, [1] * m, [1] * m) or 1) <= 0.10
        )
        parts.append(f"{m} cases at a base pass rate of {rate:.0%}")
    return (
        "A drop can only be measured below what the base tier passes: at 0% nothing can be "
        "lost. To detect a 10-point drop with 80% power (one answer per case per tier, "
        "α = 0.05, `min_detectable_drop`) a category needs about " + ", ".join(parts) + "."
    )


def render(stored: dict, sig: str, command: str, version: str) -> str:
    cases = select_cases(stored["args"])
    runs = stored["tiers"]
    recs = {t: [TimingRecord(**r) for r in run["records"]] for t, run in runs.items()}
    outcomes = {
        t: [score.score(c, r) for c, r in zip(cases, rs, strict=True)] for t, rs in recs.items()
    }
    cats = sorted({c.category for c in cases})
    n_by_cat = {cat: sum(c.category == cat for c in cases) for cat in cats}
    L = [
        SECTION,
        "",
        f"SmolLM2-135M-Instruct F16 (base, `{BASE}`) against the local vendor's fast tiers, "
        f"llama.cpp {version}, temperature 0, one answer per case per tier (at most "
        f"{MAX_TOKENS} tokens), one private `llama-server` per tier ({THREADS} threads, "
        f"`--jinja`). Cases: "
        + ", ".join(f"`{c}` {n}" for c, n in n_by_cat.items())
        + f" ({len(cases)} per tier). Command:",
        "",
        "```bash",
        command,
        "```",
        "",
        "Machine: AMD EPYC, 2 cores, shared with about seven other sessions (load averages "
        "below). The base pass is run once and reused for every pair (temperature 0; answers "
        f"kept in `$TIERWATCH_CACHE/capability/answers.json` under `{sig}`).",
        "",
        "### Pass rates per category",
        "",
        "| category | n | " + " | ".join(f"`{t}` passed" for t in runs) + " |",
        "|---|---|" + "---|" * len(runs),
    ]
    for cat in cats:
        idx = [i for i, c in enumerate(cases) if c.category == cat]
        L.append(
            f"| `{cat}` | {len(idx)} | "
            + " | ".join(f"{sum(outcomes[t][i].passed for i in idx)}" for t in runs)
            + " |"
        )
    L += [
        "",
        "### Each fast tier against the base (paired, exact McNemar)",
        "",
        "| pair | category | both | base only | fast only | neither | McNemar p |",
        "|---|---|---|---|---|---|---|",
    ]
    tools = []
    for fast in (t for t in runs if t != BASE):
        for cat in cats:
            idx = [i for i, c in enumerate(cases) if c.category == cat]
            tab = paired_table(
                {i: outcomes[fast][i].passed for i in idx},
                {i: outcomes[BASE][i].passed for i in idx},
            )
            L.append(
                f"| `{fast}` vs `{BASE}` | `{cat}` | {tab.both_pass} | {tab.base_only} | "
                f"{tab.fast_only} | {tab.both_fail} | {tab.p_value:.3g} |"
            )
        tool_idx = [i for i, c in enumerate(cases) if c.tool_answers is not None]
        verdicts = {
            t: {str(i): check(cases[i], recs[t][i].tool_calls) for i in tool_idx}
            for t in (fast, BASE)
        }
        m = tool_metrics(verdicts[fast], verdicts[BASE])
        calls = {t: sum(v.called for v in verdicts[t].values()) for t in (fast, BASE)}
        f1 = "-" if m.decision_f1 is None else f"{m.decision_f1:.2f}"
        tools.append(
            f"| `{fast}` vs `{BASE}` | {m.n} | {calls[BASE]} / {calls[fast]} | {f1} | "
            f"{pct(m.schema_accuracy_base)} / {pct(m.schema_accuracy_fast)} | "
            f"{errs(m.errors_base)} | {errs(m.errors_fast)} |"
        )
    L += [
        "",
        "### Tool calls (BFCL simple + irrelevance)",
        "",
        "| pair | cases | cases with a call (base / fast) | decision F1 fast vs base | "
        "schema accuracy (base / fast) | errors base | errors fast |",
        "|---|---|---|---|---|---|---|",
        *tools,
        "",
        "### Time and cost of one full pass",
        "",
        "| tier | date (UTC) | wall s | server CPU s | prompt / output tokens | decode tok/s "
        "(median, llama.cpp timings) | output tok per wall s | failed | load avg start → end |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for t, run in runs.items():
        s = speed(run)
        dec = "-" if s["decode_tok_s"] is None else f"{s['decode_tok_s']:.1f}"
        L.append(
            f"| `{t}` | {run['date']} | {run['seconds']:.0f} | {run['server_cpu_s']:.0f} | "
            f"{s['prompt_tokens']:,} / {s['output_tokens']:,} | {dec} | "
            f"{s['pass_tok_s']:.1f} | {s['failed']} | {fmt_load(run['loadavg'][0])} → "
            f"{fmt_load(run['loadavg'][1])} |"
        )
    L += [
        "",
        "Cost: none (local engine); at a hosted price the token counts above are what a "
        "pass bills.",
        "",
        "### What this says",
        "",
        *reading(cases, outcomes, runs),
        "",
    ]
    return "\n".join(L)


def reading(cases, outcomes, runs) -> list[str]:
    """The plain reading, computed from the figures (no hand-written result claims)."""
    out = []
    cats = sorted({c.category for c in cases})
    for cat in cats:
        idx = [i for i, c in enumerate(cases) if c.category == cat]
        rates = {t: sum(outcomes[t][i].passed for i in idx) / len(idx) for t in runs}
        base = rates[BASE]
        if all(r == 0 for r in rates.values()):
            out.append(
                f"- `{cat}`: no tier passed any of {len(idx)} cases. The comparison "
                "cannot show a loss here: the model is too small for this benchmark, "
                "not evidence that the fast tier is as good."
            )
            continue
        mde = min_detectable_drop(base, [1] * len(idx), [1] * len(idx)) if base else None
        what = (
            "even losing every pass would not be significant at this n"
            if mde is None
            else f"a drop of {100 * mde:.0f} points would be detected with 80% power"
        )
        out.append(
            f"- `{cat}`: base {base:.0%}, "
            + ", ".join(f"`{t}` {r:.0%}" for t, r in rates.items() if t != BASE)
            + f" ({len(idx)} cases); {what}."
        )
    calls = {t: sum(o.kind == "tool_call" and o.detail.called for o in outcomes[t]) for t in runs}
    if not any(calls.values()):
        out.append(
            "- Tool calls: no tier produced a tool call that llama-server parsed, so the "
            "irrelevance cases pass by abstaining and a decision F1 of 1.0 is agreement "
            "on never calling, not agreement on when to call."
        )
    for t, run in runs.items():  # did the tool definitions reach the model at all?
        tool = [
            (r["prompt_tokens"] or 0, len(json.dumps(c.tools)) // 4)
            for c, r in zip(cases, run["records"], strict=True)
            if c.tools
        ]
        if tool and all(p < est for p, est in tool):
            out.append(
                f"- `{t}`: the prompts of its tool cases were {min(tool)[0]}-"
                f"{max(tool)[0]} tokens, fewer than the tool definitions alone (about "
                f"{min(e for _, e in tool)}+ tokens at 4 characters a token): the tool "
                "definitions were not in the prompt, so this tier never saw a function "
                "to call."
            )
    out += ["", mde_sentence()]
    return out


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def errs(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items())) or "none"


def fmt_load(xs: list[float]) -> str:
    return " / ".join(f"{x:.1f}" for x in xs)


def select_cases(a: dict) -> list:
    return (
        humaneval.load_cases(a["humaneval"])
        + bfcl.load_cases(["simple_python"], limit=a["bfcl"])
        + bfcl.load_cases(["irrelevance"], limit=a["bfcl"])
        + instructions.load_cases()[: a["instructions"]]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", nargs="+", choices=FAST, default=["smollm2-q4"])
    parser.add_argument("--humaneval", type=int, default=10)
    parser.add_argument("--bfcl", type=int, default=10, help="cases per BFCL category")
    parser.add_argument("--instructions", type=int, default=20)
    parser.add_argument(
        "--fresh", action="store_true", help="run every tier again (default: reuse the passes kept)"
    )
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    binaries = cached_binaries() or _any_build()
    if binaries is None:
        raise SystemExit(
            "no llama.cpp build in the cache yet: run `manage.py local_vendor up` "
            "once (it builds llama-server), then this script"
        )
    picked = {"humaneval": args.humaneval, "bfcl": args.bfcl, "instructions": args.instructions}
    cases = select_cases(picked)
    sig = signature(args, binaries.version)
    path = cache_dir() / "capability" / "answers.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = json.loads(path.read_text()) if path.exists() else {}
    stored = kept.setdefault(sig, {"args": picked, "tiers": {}})
    for target in (BASE, *args.fast):
        if target in stored["tiers"] and not args.fresh:
            print(f"{target}: reusing the pass of {stored['tiers'][target]['date']}")
            continue
        run = run_tier(binaries, target, cases)
        stored["tiers"][target] = run
        path.write_text(json.dumps(kept))
        print(
            f"{target}: {run['seconds']:.0f} s wall, {run['server_cpu_s']:.0f} s server CPU, "
            f"{speed(run)}",
            flush=True,
        )
    fasts = " ".join(t for t in stored["tiers"] if t != BASE)
    command = (
        "flock /tmp/tierwatch-engine.lock .venv/bin/python "
        f"benchmarks/capability_engines.py --write-docs --fast {fasts} --humaneval "
        f"{args.humaneval} --bfcl {args.bfcl} --instructions {args.instructions}"
    )
    text = render(stored, sig, command, binaries.version)
    print(text)
    if args.write_docs:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
