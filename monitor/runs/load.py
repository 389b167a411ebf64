"""Load probes: each tier alone at rising concurrency (1, 4, 16 by default), stored as a run
of kind "load" whose summary's ``load`` block holds, per level and tier, latency percentiles,
goodput against the pair's SLOs and throughput. A second kind of run: never in a trend, never
in an alert's mean (``Run.objects.trend``).

Its requests take leases from the same per-vendor limit as every other run
(``monitor.runs.ratelimit``, with Redis): a load probe never pushes a vendor past
``TIERWATCH_VENDOR_CONCURRENCY`` and waits out a 429's ``Retry-After`` like the others. A level
above what the limit leaves free is therefore not reached; each block says the concurrency it
reached (``in_flight_max``) next to the level asked for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from contextlib import asynccontextmanager, nullcontext
from typing import Any

from django.conf import settings
from django.utils import timezone

from evals.latency import goodput, percentiles
from evals.plan import STREAMS, PlannedRequest, execute_plan
from evals.records import ChatRequest, EndpointSpec, TimingRecord
from evals.suites import fill_nonce
from monitor.derived.run_end import record_run_end
from monitor.models import Case, Pair, Run, RunKind, RunStatus
from monitor.runs.ratelimit import RunGate
from monitor.runs.steps import (
    check_answered,
    check_keys,
    create_run,
    mark_failed,
    save_sample,
    summarise_run,
)

log = logging.getLogger(__name__)

LOAD_LEVELS = (1, 4, 16)
MAX_LOAD_CONCURRENCY = 64
MAX_LOAD_REQUESTS = 64  # per level per tier: a load probe stays short
TIERS = ("fast", "base")


def latest_load(pair: Pair) -> dict[str, Any] | None:
    """The pair's newest finished load probe: run id, time and its levels (as stored)."""
    run = (
        Run.objects.filter(pair=pair, kind=RunKind.LOAD, status=RunStatus.DONE)
        .order_by("-created_at", "-id")
        .first()
    )
    if run is None or not run.summary_obj.load:
        return None
    when = run.finished_at or run.created_at
    return {"run": run.id, "at": when.isoformat(), "levels": run.summary["load"]}


def load_cases(cases: Sequence[Case]) -> list[Case]:
    """Short, test-free cases first: a load probe measures the server, not the sandbox."""
    for scenario in ("mid", "short", None):
        chosen = [c for c in cases if scenario is None or c.scenario == scenario]
        if chosen:
            return [c for c in chosen if not c.unit_tests] or chosen
    return []


def load_block(
    records: Sequence[TimingRecord],
    wall_s: float,
    slo: dict[str, float],
    min_n: int,
    in_flight_max: int | None = None,
) -> dict[str, Any]:
    return {
        "n": len(records),
        "n_ok": sum(1 for r in records if r.ok),
        "in_flight_max": in_flight_max,
        "ttft_ms": percentiles(
            [r.ttft_ms for r in records if r.ok], min_n=min_n, per_quantile=True
        ),
        "e2e_ms": percentiles([r.e2e_ms for r in records if r.ok], min_n=min_n, per_quantile=True),
        "goodput": goodput(records, slo) if slo else None,
        "wall_s": wall_s,
        "throughput_rps": len(records) / wall_s if wall_s > 0 else None,
    }


def run_load_probe(
    *,
    pair: Pair,
    concurrency_levels: Sequence[int] = LOAD_LEVELS,
    requests_per_level: int | None = None,
    suite=None,
    seed: int | None = None,
) -> Run:
    """Probe each tier alone at each concurrency level (bounded, short) and store a Run with
    kind "load" and its summary's ``load[str(level)][tier]`` block.

    Per level and tier, ``requests_per_level`` requests (default max(8, 2 × level), at most
    ``MAX_LOAD_REQUESTS``) cycle through short cases, at most ``level`` in flight. Tiers go one
    after the other so each curve shows a tier under its own load. Samples are saved after
    each level, outside the timed loop.
    """
    run = create_run(pair=pair, kind=RunKind.LOAD, repeat=1, seed=seed)
    if suite is not None:
        run.suite = suite
    run.status, run.started_at = RunStatus.RUNNING, timezone.now()
    run.save(update_fields=["suite", "status", "started_at"])
    levels = sorted({min(MAX_LOAD_CONCURRENCY, int(c)) for c in concurrency_levels if c >= 1})
    min_n, slo = int(settings.TIERWATCH_MIN_N), pair.slo
    try:
        check_keys(pair)
        cases = load_cases(list(run.suite.cases.order_by("key")))
        if not cases:
            raise ValueError(f"suite {run.suite} has no cases")
        counts = {lv: min(MAX_LOAD_REQUESTS, requests_per_level or max(8, 2 * lv)) for lv in levels}
        Run.objects.filter(id=run.id).update(planned=2 * sum(counts.values()))
        endpoints = {"fast": pair.fast, "base": pair.base}
        seq = 0
        load: dict[Any, Any] = {}
        for level in levels:
            load[str(level)] = {}
            for tier in TIERS:
                items = [
                    PlannedRequest(
                        seq=seq + i,
                        case_key=cases[i % len(cases)].key,
                        tier=tier,
                        repetition=i // len(cases),
                    )
                    for i in range(counts[level])
                ]
                seq += len(items)
                with STREAMS.reserve(
                    level, settings.TIERWATCH_MAX_STREAMS, what=f" (load level {level})"
                ):
                    records, wall_s, peak = asyncio.run(
                        _send(run, items, cases, endpoints[tier].spec(), level)
                    )
                for item, record in records:
                    save_sample(
                        run=run,
                        case=next(c for c in cases if c.key == item.case_key),
                        endpoint=endpoints[tier],
                        item=item,
                        record=record,
                    )
                load[str(level)][tier] = load_block(
                    [r for _, r in records], wall_s, slo, min_n, in_flight_max=peak
                )
        summarise_run(run_id=run.id)
        Run.objects.merge_summary(run.id, load=load)
        check_answered(run_id=run.id)
        Run.objects.filter(id=run.id).end(RunStatus.DONE)
    except Exception as exc:  # the run says why; samples already saved stay
        log.exception("load probe %s failed", run.id)
        mark_failed(run_id=run.id, exc=exc)
    record_run_end(run.id)
    return Run.objects.get(id=run.id)


async def _send(
    run: Run, items: list[PlannedRequest], cases: Sequence[Case], spec: EndpointSpec, level: int
) -> tuple[list[tuple[PlannedRequest, TimingRecord]], float, int]:
    """The level's records, its wall time and the most requests in flight at once (each
    request holds a vendor lease while it is counted)."""
    by_key = {c.key: c for c in cases}
    out: list[tuple[PlannedRequest, TimingRecord]] = []
    tier = items[0].tier
    vendor = RunGate.from_settings({tier: spec.base_url})
    in_flight = peak = 0

    def build(item: PlannedRequest) -> ChatRequest:
        case = by_key[item.case_key]
        return ChatRequest(
            messages=fill_nonce(case.messages, f"{run.id}-{item.seq}"),
            max_tokens=case.max_tokens,
            temperature=0.0,
            seed=0,
        )

    @asynccontextmanager
    async def gate(tier: str):
        nonlocal in_flight, peak
        async with vendor.gate(tier) if vendor else nullcontext():
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                yield
            finally:
                in_flight -= 1

    async def keep(item: PlannedRequest, record: TimingRecord) -> None:
        out.append((item, record))
        if vendor:
            await vendor.after(item.tier, record)

    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        await execute_plan(
            items,
            endpoints={tier: spec},
            build_request=build,
            concurrency={tier: level},
            on_record=keep,
            gate=gate,
        )
    finally:
        if vendor:
            await vendor.close()
    return out, loop.time() - start, peak
