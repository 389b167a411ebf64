"""``measure_ladder``: re-measure the reference ladder of MMD² distances on real engines.

The verdict quotes, as context beside a run's MMD², distances measured on the local llama.cpp
vendor (``evals.vendors.llamacpp.vendor``): the base tier against itself (two independent
batches, A-vs-A), the same weights in Q8_0 and in Q4_0, and a different model.
One interleaved plan samples every tier at temperature 1 on the same prompts (the built-in
``audit`` suite), so load drifts hit all rungs alike; each rung is ``mmd_test`` of that tier
against base batch 0, with the verdict's kernel and L. The result is written where
``evals.stats.ladder`` reads it (``reference_ladder.json``), replacing the placeholder rungs.

The endpoints must be registered and up: ``python manage.py local_vendor up --targets
smollm2-f16 smollm2-q8 smollm2-q4 gemma-270m``.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evals.plan import PlannedRequest, execute_plan, plan_run
from evals.records import ChatRequest, EndpointSpec, TimingRecord
from evals.stats.ladder import LADDER_PATH
from evals.stats.mmd import DEFAULT_B, DEFAULT_L, mmd_test
from evals.suites import get_suite
from monitor.models import Endpoint

# rung key → (tier name in the plan, registered endpoint, batch, words for the verdict)
RUNGS = {
    "a_vs_a": ("base", "smollm2-f16", 1, "the same model against itself"),
    "q8_0": ("q8_0", "smollm2-q8", 0, "an 8-bit quantization of the same model"),
    "q4_0": ("q4_0", "smollm2-q4", 0, "a 4-bit quantization of the same model"),
    "different_model": ("different", "gemma-270m", 0, "a different model"),
}
BASE = "smollm2-f16"
START_HINT = (
    "Start and register them with:\n  python manage.py local_vendor up --targets "
    "smollm2-f16 smollm2-q8 smollm2-q4 gemma-270m\n(the first run builds llama.cpp and "
    "prepares the models: minutes, once; `local_vendor status` shows them)."
)


def answering(endpoint: Endpoint, timeout_s: float = 5.0) -> str | None:
    """None when the endpoint's OpenAI-compatible ``/models`` answers 200, else why not."""
    url = endpoint.base_url.rstrip("/") + "/models"
    try:
        status = httpx.get(url, timeout=timeout_s).status_code
    except httpx.HTTPError as exc:
        return f"{url}: {type(exc).__name__}"
    return None if status == 200 else f"{url}: HTTP {status}"


def registered(names: list[str]) -> dict[str, Endpoint]:
    """The registered, answering endpoints by name; CommandError saying how to start them."""
    rows = {e.name: e for e in Endpoint.objects.filter(name__in=names)}
    missing = [n for n in names if n not in rows]
    if missing:
        raise CommandError(f"endpoints not registered: {', '.join(missing)}.\n{START_HINT}")
    down = [why for e in rows.values() if (why := answering(e))]
    if down:
        raise CommandError(
            "local vendor endpoints registered but not answering:\n  "
            + "\n  ".join(down)
            + f"\n{START_HINT}"
        )
    return rows


def sample(
    specs: dict[str, EndpointSpec],
    tiers: list[tuple[str, int]],
    *,
    prompts: int,
    samples: int,
    seed: int,
) -> tuple[dict[tuple[str, int], dict[str, list[str]]], dict[str, int]]:
    """Temperature-1 completions of the audit prompts: (tier, batch) → case → texts, and the
    failed requests per tier."""
    cases = get_suite("audit").cases
    cases = sorted(random.Random(seed).sample(cases, min(prompts, len(cases))), key=lambda c: c.key)
    by_key = {c.key: c for c in cases}
    plan = plan_run(list(by_key), repeat=samples, seed=seed, tiers=tiers)
    texts: dict[tuple[str, int], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    failed: dict[str, int] = defaultdict(int)

    def build(item: PlannedRequest) -> ChatRequest:
        case = by_key[item.case_key]
        return ChatRequest(messages=case.messages, max_tokens=case.max_tokens, temperature=1.0)

    async def on_record(item: PlannedRequest, record: TimingRecord) -> None:
        if record.ok:
            texts[(item.tier, item.batch)][item.case_key].append(record.text)
        else:
            failed[item.tier] += 1

    asyncio.run(
        execute_plan(
            plan,
            endpoints=specs,
            build_request=build,
            concurrency={t: 1 for t in specs},
            on_record=on_record,
        )
    )
    return texts, dict(failed)


class Command(BaseCommand):
    help = "Re-measure the reference ladder (A-vs-A, Q8_0, Q4_0, different model) on llama.cpp."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--prompts", type=int, default=25, help="audit prompts (max 30)")
        parser.add_argument("--samples", type=int, default=10, help="samples per prompt and tier")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--B", type=int, default=DEFAULT_B, help="permutations per test")
        parser.add_argument("--out", type=Path, default=LADDER_PATH)
        parser.add_argument(
            "--rungs",
            nargs="+",
            choices=list(RUNGS),
            default=list(RUNGS),
            help="measure a subset (different_model is required in the file)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        rungs = {k: RUNGS[k] for k in opts["rungs"]}
        if "different_model" not in rungs:
            raise CommandError("the ladder needs the different_model rung")
        rows = registered(list(dict.fromkeys([BASE, *(r[1] for r in rungs.values())])))
        specs = {"base": rows[BASE].spec()}
        specs |= {tier: rows[name].spec() for tier, name, _, _ in rungs.values()}
        tiers = sorted({("base", 0), *((tier, batch) for tier, _, batch, _ in rungs.values())})
        n = opts["prompts"] * opts["samples"]
        self.stdout.write(f"sampling {len(tiers)} batches × {n} requests at temperature 1 …")
        started = time.monotonic()
        texts, failed = sample(
            specs, tiers, prompts=opts["prompts"], samples=opts["samples"], seed=opts["seed"]
        )
        sampled_s = time.monotonic() - started
        base = texts[("base", 0)]
        out_rungs = []
        for key, (tier, name, batch, label) in rungs.items():
            result = mmd_test(
                texts[(tier, batch)], base, L=DEFAULT_L, B=opts["B"], seed=opts["seed"]
            )
            if result.statistic is None:
                raise CommandError(
                    f"{key}: no prompt has 2 samples on both sides "
                    f"({failed.get(tier, 0)} requests failed)"
                )
            out_rungs.append(
                {
                    "key": key,
                    "label": label,
                    "mmd2": result.statistic,
                    "p_value": result.p_value,
                    "endpoint": name,
                    "n_per_tier": list(result.n_per_tier),
                    "n_prompts": result.n_prompts,
                    "null_q95": result.critical_value(0.05),
                }
            )
            self.stdout.write(
                f"{key:16} MMD² {result.statistic:9.5f}  p = {result.p_value:.3g}  "
                f"n = {result.n_per_tier[0]}/{result.n_per_tier[1]}  ({name})"
            )
        ladder = {
            "placeholder": False,
            "note": (
                f"measured by `manage.py measure_ladder` on {datetime.now(UTC):%Y-%m-%d}: "
                f"llama.cpp local vendor, {opts['prompts']} audit prompts × "
                f"{opts['samples']} samples per tier at temperature 1, each rung against "
                f"{BASE} batch 0"
            ),
            "L": DEFAULT_L,
            "B": opts["B"],
            "seed": opts["seed"],
            "failed_requests": failed,
            "sampling_seconds": round(sampled_s, 1),
            "rungs": sorted(out_rungs, key=lambda r: r["mmd2"]),
        }
        opts["out"].write_text(json.dumps(ladder, indent=2) + "\n")
        a_vs_a = next((r for r in out_rungs if r["key"] == "a_vs_a"), None)
        if a_vs_a and a_vs_a["p_value"] < 0.05:
            # Under the null this happens 1 time in 20; more often means the base server is not
            # stable (failed requests, a restart, caching): the ladder then grades noise.
            self.stderr.write(
                self.style.WARNING(
                    f"warning: the base tier differs from itself "
                    f"(A-vs-A p = {a_vs_a['p_value']:.3g});"
                    " check failed requests and the server, then measure again before shipping"
                )
            )
        self.stdout.write(
            self.style.SUCCESS(
                f"wrote {opts['out']} ({sampled_s:.0f} s of sampling; failed requests: "
                f"{failed or 'none'})"
            )
        )
