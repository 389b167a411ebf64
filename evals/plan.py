"""Plan and execute a run: cases × tiers × repetitions, interleaved in seeded random order.

Why interleave: load on a vendor changes over minutes. Sending all fast requests and then all
base requests would attribute that change to the tier; a shuffled, shared order spreads it over
both alike. The seed makes the order reproducible from the run's record.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import httpx

from evals.client import make_client, stream_chat
from evals.records import ChatRequest, EndpointSpec, TimingRecord

AUDIT_TIERS: tuple[tuple[str, int], ...] = (("fast", 0), ("base", 0))
"""The tiers of an audit's plan: fast and base, one batch each — no second in-plan base batch.

Why (the A-vs-A decision): two base batches shuffled into one plan are exchangeable by
construction (same endpoint, same minutes, same interleaving), so a base-vs-base test
between them rejects with probability exactly α whatever the vendor does: it cannot detect
anything, it voids α of honest runs at random, and it costs 50% more base requests. The same
requests spent on power do better: at a fixed 750 requests (25 prompts), 15 samples per
prompt per tier instead of 10 + 10 + 10 raised the MMD test's power on a small synthetic
difference (per-character substitution 30% vs 36%, 60 characters, B = 200, 200 repetitions)
from 21% [16, 27] to 31% [25, 38] (Wilson 95%). Stability of the base tier itself is a
question about *time*: compare a base batch with one from an earlier run
(:func:`evals.stats.stability.base_stability`), which can fail when the base tier changes.
"""


@dataclass(frozen=True)
class PlannedRequest:
    seq: int
    case_key: str
    tier: str  # "fast" | "base"
    repetition: int
    batch: int = 0  # independent batches of one tier (audits use one: see AUDIT_TIERS)


def plan_run(
    case_keys: Sequence[str],
    *,
    repeat: int,
    seed: int,
    tiers: Sequence[tuple[str, int]] = (("fast", 0), ("base", 0)),
) -> list[PlannedRequest]:
    """Every (case, tier, batch, repetition) once, shuffled with ``random.Random(seed)``."""
    items = [
        (case_key, tier, rep, batch)
        for case_key in case_keys
        for tier, batch in tiers
        for rep in range(repeat)
    ]
    random.Random(seed).shuffle(items)
    return [
        PlannedRequest(seq=i, case_key=c, tier=t, repetition=r, batch=b)
        for i, (c, t, r, b) in enumerate(items)
    ]


class TooManyStreams(ValueError):
    """A run asks for more concurrent streams than one process times faithfully."""


class StreamBudget:
    """The concurrent streams of one process, shared by all its runs: a Celery worker's thread
    pool runs several at once, each on its own event loop, under one GIL and one garbage
    collector. Up to ``limit`` streams the client's TTFT P99 error stays near the raw-socket
    floor; at 200 it is 5-22x the floor (docs/benchmarks.md, "Timing fidelity": connection
    opening in the first wave and collection pauses). So a run asking for more than ``limit``
    alone is refused, and one that would take the process past it waits for others to end."""

    def __init__(self) -> None:
        self.in_use = 0
        self._cond = threading.Condition()

    @contextmanager
    def reserve(
        self,
        n: int,
        limit: int,
        *,
        what: str = "",
        on_wait: Callable[[], None] = lambda: None,
        poll_s: float = 1.0,
    ) -> Iterator[None]:
        """Hold ``n`` streams while the block runs; ``on_wait`` is called (outside the lock)
        every ``poll_s`` while waiting, e.g. a run's heartbeat."""
        if n > limit:
            raise TooManyStreams(
                f"{n} concurrent streams asked{what}, but one worker process keeps its timing "
                f"close to the socket floor only up to {limit} (TIERWATCH_MAX_STREAMS; "
                "docs/benchmarks.md, 'Timing fidelity'): lower the endpoints' max_concurrency"
            )
        while True:
            with self._cond:
                if self.in_use + n <= limit:
                    self.in_use += n
                    break
                self._cond.wait(poll_s)
            on_wait()
        try:
            yield
        finally:
            with self._cond:
                self.in_use -= n
                self._cond.notify_all()


STREAMS = StreamBudget()  # this process's


OnRecord = Callable[[PlannedRequest, TimingRecord], Awaitable[None]]
BuildRequest = Callable[[PlannedRequest], ChatRequest]
# plays one planned item as a multi-turn agent episode (``evals.agent.loop.run_episode``): it
# sends the episode's requests itself, one after another, and hands each record over itself
PlayEpisode = Callable[[PlannedRequest, httpx.AsyncClient, EndpointSpec], Awaitable[None]]


async def execute_plan(
    plan: Sequence[PlannedRequest],
    *,
    endpoints: dict[str, EndpointSpec],
    build_request: BuildRequest,
    concurrency: dict[str, int],
    on_record: OnRecord,
    client: httpx.AsyncClient | None = None,
    gate: Callable[[str], AbstractAsyncContextManager[Any]] | None = None,
    episodes: Mapping[str, PlayEpisode] | None = None,
) -> int:
    """Send every planned request, at most ``concurrency[tier]`` at once per endpoint.

    Requests start in plan order (asyncio's semaphore wakes waiters first-in first-out) and
    ``on_record`` receives each record as soon as it completes, so a crash mid-run loses
    nothing already measured. A request that fails is a failed record, never an exception.
    Returns the number of records handed to ``on_record``. ``gate(tier)``, when given, is
    entered around each request as well: a limit shared with other processes (the product's
    Redis per-vendor limit).

    ``episodes`` maps the case keys played as agent episodes to their player: such an item
    holds one of its tier's slots (and one ``gate``) for the whole episode, whose requests are
    sequential anyway, so the episodes of both tiers interleave in plan order like single
    requests do. It counts as one item handed over.
    """
    limits = {tier: asyncio.Semaphore(max(1, concurrency.get(tier, 1))) for tier in endpoints}
    own_client = client is None
    http = client or make_client()
    done = 0

    async def one(item: PlannedRequest) -> None:
        nonlocal done
        play = (episodes or {}).get(item.case_key)
        async with limits[item.tier], gate(item.tier) if gate else nullcontext():
            if play is not None:
                await play(item, http, endpoints[item.tier])
                done += 1
                return
            record = await stream_chat(http, endpoints[item.tier], build_request(item))
        await on_record(item, record)
        done += 1

    try:
        tasks = [asyncio.create_task(one(item)) for item in plan]
        await asyncio.gather(*tasks)
    finally:
        if own_client:
            await http.aclose()
    return done
