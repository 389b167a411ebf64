"""Tripwires against audits on the simulated vendor: how fast each catches a switched fast tier,
and what each scheme costs a pair a month in requests and tokens.

Detection: the product's statistics (``evals.stats.tripwire``, ``evals.stats.border``) and its
e-detector at the product's threshold (``monitor.derived.tripwire.threshold``, the one place
the tripwires' share of the budget is read), against the simulated vendor in this process
(``time_scale`` 0, so an "hour" is one tripwire run). Per trial: the references frozen on the
honest fast tier, ``--null-hours`` honest runs (false alarms counted), then the switch and
hourly runs until the detector fires (at most ``--max-hours``). Switches: "quantized" (the
vendor's run-time variant: logprobs and border-input odds move, every sampled text stays the
same, so an audit cannot see it at any cadence) and "distilled" (the fast tier's requests
answered by ``demo-distilled``; an audit rejects it every time, so the e-detector alarms at its
floor of 3 audits: 3 h at hourly audits, 3 days at daily ones, unless a tripwire fires and
queues an audit first).

Cost: one run of each kind measured against the vendor with the product's client (the usage
the vendor reported): an audit (the audit suite × ``AUDIT_SAMPLES_PER_PROMPT`` × 2 tiers at
temperature 1), a probe (the coding suite × repeat 2 × 2 tiers at temperature 0), a logprob
tripwire run, a border tripwire run and one border discovery. A month is 730 h.

Run: ``nice -n 10 .venv/bin/python benchmarks/tripwire_cadence.py [--trials 10] [--write]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402

from benchmarks.docs_section import write_section  # noqa: E402
from evals.client import make_client, stream_chat  # noqa: E402
from evals.records import ChatRequest, EndpointSpec, TimingRecord  # noqa: E402
from evals.stats import border, eprocess  # noqa: E402
from evals.stats import tripwire as logprob  # noqa: E402
from evals.suites import get_suite  # noqa: E402
from evals.vendors.simulated import serve_in_thread  # noqa: E402
from monitor.derived.tripwire import REFERENCE_RUNS, threshold  # noqa: E402
from monitor.runs.steps import AUDIT_SAMPLES_PER_PROMPT  # noqa: E402

HEADER = "## Tripwires, escalation and cost per month"
NOTES = [
    "Reading it:",
    "",
    "- The honest hours are too few to show the tripwires' budget (0.1 false alarms per tier "
    'per quarter, 2,160 hourly runs): the month replay measures it ("Month replay" below; '
    "a reference of a day of runs keeps it, one of 4 runs did not). The real-engine null "
    "pools of issue 20 are not run here (`benchmarks/tripwire_engines.py` needs the llama.cpp "
    "build).",
    "- Each tier's reference is its first day of hourly runs (24), and a run's p becomes "
    "evidence by the tripwires' own calibrator (floored at the permutation test's 1/10,000): "
    "a switched tier whose runs sit at that floor fires at the third run after the switch.",
    "- Border inputs catch the simulated quantization later than logprobs (median 5 h): it "
    "moves each near tie by one logit, seen through 10 one-token answers per input per run.",
    "- At hourly runs a border tripwire sends two thirds as many *requests* as hourly audits "
    "did (one-token ones: ~5 % of the audits' tokens). The paper samples once a day; an "
    "endpoint with a tight request-rate limit can set `tripwire_every: 24h` and detect in "
    "days instead.",
    "- Probes every 15 minutes are the largest part of the bill in every scheme: the next "
    "lever, not touched here.",
    "",
]
HOURS = 365 * 24 / 12
PRICES = (0.5, 2.0)  # USD per million input / output tokens: the README's example prices


async def _gather(spec: EndpointSpec, requests: Sequence[ChatRequest]) -> list[TimingRecord]:
    gate = asyncio.Semaphore(16)
    async with make_client() as client:

        async def one(r: ChatRequest) -> TimingRecord:
            async with gate:
                return await stream_chat(client, spec, r)

        return list(await asyncio.gather(*(one(r) for r in requests)))


def ask(url: str, model: str, requests: Sequence[ChatRequest], protocol: str = "openai") -> list:
    spec = EndpointSpec(name=model, protocol=protocol, base_url=url, model=model)
    return asyncio.run(_gather(spec, requests))


def switch(url: str, variant: str) -> None:
    httpx.post(f"{url}/_tierwatch/variant", json={"model": "demo-fast", "variant": variant})


def logprob_window(url: str, model: str) -> dict:
    reqs = [logprob.request(p) for p in logprob.DEFAULT_PROMPTS for _ in range(6)]
    prompts = [p for p in logprob.DEFAULT_PROMPTS for _ in range(6)]
    return logprob.window_of(list(zip(prompts, ask(url, model, reqs), strict=True)))[0]


def border_answers(url: str, model: str, prompts: Sequence[str]) -> dict:
    records = ask(url, model, [border.request(p) for p in prompts], protocol="anthropic")
    return border.distributions(
        [(p, border.answer(r)) for p, r in zip(prompts, records, strict=True)]
    )


def discover(url: str, seed: int) -> tuple[dict, int]:
    cands = border.candidates(seed=seed)
    first = border_answers(
        url, "demo-fast", [c for c in cands for _ in range(border.DISCOVERY_QUERIES)]
    )
    found = [c for c in cands if border.is_border(first.get(c, {}))][: border.DISCOVERY_TARGET]
    ref = border_answers(
        url, "demo-fast", [p for p in found for _ in range(border.REFERENCE_SAMPLES)]
    )
    keep = border.select(ref)
    sent = len(cands) * border.DISCOVERY_QUERIES + len(found) * border.REFERENCE_SAMPLES
    return {p: ref[p] for p in keep}, sent


def trial(url: str, method: str, change: str, seed: int, null_hours: int, max_hours: int) -> dict:
    """One trial: references, honest hours, the switch, hours until the detector fires."""
    state, limit = eprocess.EProcessState(), threshold()
    if method == "logprobs":
        ref: dict = {}
        for _ in range(REFERENCE_RUNS):
            for p, rows in logprob_window(url, "demo-fast").items():
                ref.setdefault(p, []).extend(rows)

        def p_of(model: str, hour: int) -> float:
            cur = logprob_window(url, model)
            return logprob.window_test(ref, cur, seed=seed * 1000 + hour).p_value
    else:
        ref, _ = discover(url, seed)
        asked = [p for p in ref for _ in range(border.SAMPLES)]

        def p_of(model: str, hour: int) -> float:
            cur = border_answers(url, model, asked)
            return border.window_test(ref, cur, seed=seed * 1000 + hour).p_value

    false_alarms = 0
    for hour in range(null_hours):
        state, d = eprocess.update(
            state,
            eprocess.AuditEvidence(
                p_value=p_of("demo-fast", hour), run_id=hour, calibrator=eprocess.TRIPWIRE
            ),
            threshold=limit,
        )
        false_alarms += d.new_alarm
    state = eprocess.EProcessState()  # detection measured from a fresh detector
    model = "demo-distilled" if change == "distilled" else "demo-fast"
    if change == "quantized":
        switch(url, "quantized")
    try:
        for hour in range(1, max_hours + 1):
            ev = eprocess.AuditEvidence(
                p_value=p_of(model, null_hours + hour), run_id=hour, calibrator=eprocess.TRIPWIRE
            )
            state, d = eprocess.update(state, ev, threshold=limit)
            if d.new_alarm:
                return {"hours": hour, "false_alarms": false_alarms}
    finally:
        switch(url, "")
    return {"hours": None, "false_alarms": false_alarms}


def usage(records: Sequence[TimingRecord]) -> tuple[int, int, int]:
    ok = [r for r in records if r.ok]
    return (
        len(records),
        sum(r.prompt_tokens or 0 for r in ok),
        sum(r.completion_tokens if r.completion_tokens is not None else 1 for r in ok),
    )


def sizes(url: str, discovery_sent: int) -> dict[str, tuple[int, int, int]]:
    """Requests, prompt and completion tokens of one run of each kind, as billed."""
    audit = [
        ChatRequest(messages=c.messages, max_tokens=c.max_tokens, temperature=1.0)
        for c in get_suite("audit").cases
    ]
    audit = [r for r in audit for _ in range(AUDIT_SAMPLES_PER_PROMPT)]
    probe = [
        ChatRequest(messages=c.messages, max_tokens=c.max_tokens, temperature=0.0)
        for c in get_suite("coding").cases
    ]
    probe = [r for r in probe for _ in range(2)]
    wire = [
        logprob.request(p) for p in logprob.DEFAULT_PROMPTS for _ in range(logprob.DEFAULT_REPEATS)
    ]
    kinds = {"audit": audit, "probe": probe, "logprob tripwire": wire}
    out = {}
    for kind, reqs in kinds.items():
        a, b = usage(ask(url, "demo-fast", reqs)), usage(ask(url, "demo-base", reqs))
        out[kind] = (a[0] + b[0], a[1] + b[1], a[2] + b[2])
    prompts = border.candidates(border.KEEP)  # 1–2 character prompts, as border inputs are
    reqs = [border.request(p) for p in prompts for _ in range(border.SAMPLES)]
    rec = ask(url, "demo-fast", reqs, "anthropic") + ask(url, "demo-base", reqs, "anthropic")
    out["border tripwire"] = usage(rec)
    per = out["border tripwire"][1] / out["border tripwire"][0]
    out["border discovery (once)"] = (
        discovery_sent * 2,
        round(discovery_sent * 2 * per),
        discovery_sent * 2,
    )
    return out


def month(per_run: dict, every_h: dict[str, float]) -> dict[str, tuple[float, float, float]]:
    out = {}
    for kind, hours in every_h.items():
        n, p, c = per_run[kind]
        runs = HOURS / hours
        out[kind] = (runs * n, runs * (p + c), runs * (p * PRICES[0] + c * PRICES[1]) / 1e6)
    return out


def fmt_hours(values: list[int | None], max_hours: int) -> str:
    caught = sorted(v for v in values if v is not None)
    if not caught:
        return f"not caught within {max_hours} h in {len(values)} trials"
    miss = len(values) - len(caught)
    tail = f"; {miss} not within {max_hours} h" if miss else ""
    middle = statistics.median(caught)
    return f"median {middle:g} h, max {max(caught)} h ({len(caught)}/{len(values)} caught{tail})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--null-hours", type=int, default=24)
    parser.add_argument("--max-hours", type=int, default=12)
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    args = parser.parse_args()
    started = time.monotonic()
    rows, discovery_sent = [], 0
    with serve_in_thread(seed=7, time_scale=0.0) as url:
        for method in ("logprobs", "border inputs"):
            for change in ("quantized", "distilled"):
                got = [
                    trial(url, method, change, seed, args.null_hours, args.max_hours)
                    for seed in range(args.trials)
                ]
                fa = sum(g["false_alarms"] for g in got)
                rows.append(
                    (method, change, fmt_hours([g["hours"] for g in got], args.max_hours), fa)
                )
                print(rows[-1], flush=True)
        discovery_sent = discover(url, 0)[1]
        per_run = sizes(url, discovery_sent)
    new = month(per_run, {"probe": 0.25, "audit": 24, "logprob tripwire": 1})
    new_border = month(per_run, {"probe": 0.25, "audit": 24, "border tripwire": 1})
    old = month(per_run, {"probe": 0.25, "audit": 1})
    text = render(
        args,
        rows,
        per_run,
        {
            "new default (logprobs)": new,
            "new default (no logprobs)": new_border,
            "hourly audits": old,
        },
        time.monotonic() - started,
    )
    print(text)
    if args.write:
        write_section(HEADER, text)


def render(args: Any, rows: list, per_run: dict, schemes: dict, seconds: float) -> str:
    load = os.getloadavg()[0]
    lines = [
        HEADER,
        "",
        "Command: `nice -n 10 .venv/bin/python benchmarks/tripwire_cadence.py "
        f"--trials {args.trials} --null-hours {args.null_hours} --max-hours {args.max_hours} "
        "--write`. Machine: "
        f"{platform.machine()}, {os.cpu_count()} cores, load {load:.1f} at the end (shared with "
        f"other sessions), {seconds / 60:.1f} min. Simulated vendor in-process (no delays); the "
        f"product's statistics and e-detector threshold {threshold():.0f} (the tripwires' share: "
        "0.1 false alarms per tier per quarter at hourly runs).",
        "",
        "Detection of a switched fast tier, hourly tripwire runs (from a fresh detector at the "
        "switch), and false alarms in the honest hours before it:",
        "",
        "| tripwire | switch | hours to fire | false alarms (honest hours) |",
        "|---|---|---|---|",
    ]
    for method, change, hours, fa in rows:
        lines.append(f"| {method} | {change} | {hours} | {fa} in {args.trials * args.null_hours} |")
    lines += [
        "",
        "The audit against the same switches: the quantized variant leaves every sampled text "
        "unchanged, so no audit at any cadence sees it; the distilled tier is rejected by every "
        "audit, and the e-detector alarms at its floor of 3 audits: **3 h at hourly audits, 3 "
        "days at daily audits**. With tripwires, a daily audit loses nothing: the tripwire fires "
        "first (above) and queues an audit and a capability probe at once.",
        "",
        "One run of each kind, as the vendor billed it (both tiers):",
        "",
        "| run | requests | prompt tokens | completion tokens |",
        "|---|---|---|---|",
    ]
    for kind, (n, p, c) in per_run.items():
        lines.append(f"| {kind} | {n:,} | {p:,} | {c:,} |")
    lines += [
        "",
        f"Per pair per month (730 h; probes every 15 min in every scheme; dollars at the README's "
        f"example prices, ${PRICES[0]} / ${PRICES[1]} per million input / output tokens):",
        "",
        "| scheme | kind | requests | tokens | USD |",
        "|---|---|---|---|---|",
    ]
    for name, kinds in schemes.items():
        total = [0.0, 0.0, 0.0]
        for kind, (n, tok, usd) in kinds.items():
            lines.append(f"| {name} | {kind} | {n:,.0f} | {tok:,.0f} | {usd:,.2f} |")
            total = [total[0] + n, total[1] + tok, total[2] + usd]
        n, tok, usd = total
        lines.append(f"| **{name}** | **total** | **{n:,.0f}** | **{tok:,.0f}** | **{usd:,.2f}** |")
    lines += ["", *NOTES]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
