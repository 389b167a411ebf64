"""A tripwire run (kind "tripwire"): per tier a few fixed prompts, one output token at
temperature 0 with the top-k logprobs (``evals.stats.tripwire``), folded into the pair's
``TripwireState`` (``monitor.derived.tripwire``). A few dozen one-token requests per tier:
cheap enough to run hourly, where an audit costs hundreds of long answers.

An endpoint that returns no logprobs (Anthropic's API has none) is skipped with that reason,
stored in its tier's state and shown on the page; the run still ends done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from evals.client import make_client, stream_chat
from evals.records import EndpointSpec
from evals.stats import tripwire as stats
from monitor.derived import tripwire as derived
from monitor.derived.run_end import record_run_end
from monitor.models import Pair, Run, RunStatus
from monitor.runs import steps

log = logging.getLogger(__name__)

NO_LOGPROBS = "the endpoint's protocol ({protocol}) returns no logprobs: tripwire skipped"


async def _ask(spec: EndpointSpec, prompts: tuple[str, ...], repeats: int) -> list[Any]:
    async with make_client() as client:
        requests = [(p, stats.request(p)) for p in prompts for _ in range(repeats)]
        records = await asyncio.gather(*(stream_chat(client, spec, r) for _, r in requests))
    return [(p, rec) for (p, _), rec in zip(requests, records, strict=True)]


def execute(
    *,
    run_id: int,
    attempt: int,
    notify: Callable[[int], Any] | None = None,
    escalate: Callable[[Pair], Run] | None = None,
    prompts: tuple[str, ...] = stats.DEFAULT_PROMPTS,
    repeats: int = stats.DEFAULT_REPEATS,
) -> Run:
    """Measure both tiers, fold them into the pair's tripwires, end the run."""
    run = Run.objects.select_related("pair__fast", "pair__base").get(id=run_id)
    pair = run.pair
    try:
        Run.objects.filter(id=run_id).update(planned=2 * len(prompts) * repeats)
        windows, skipped, notes = {}, {}, []
        for tier, endpoint in (("fast", pair.fast), ("base", pair.base)):
            if endpoint.protocol == "anthropic":
                skipped[tier] = NO_LOGPROBS.format(protocol=endpoint.protocol)
                continue
            answers = asyncio.run(_ask(endpoint.spec(), prompts, repeats))
            window, failed, why = stats.window_of(answers)
            if not window:
                skipped[tier] = f"no usable answer ({failed} failed or without logprobs: {why})"
                continue
            windows[tier] = window
            if failed:
                notes.append(f"{tier}: {failed} queries without logprobs ({why})")
        _, alerts = derived.after_run(run=run, windows=windows, skipped=skipped, escalate=escalate)
        done = sum(len(v) for w in windows.values() for v in w.values())
        Run.objects.filter(id=run_id).update(completed=done, verdict="; ".join(notes))
        steps.mark_done(run_id=run_id, attempt=attempt)
    except Exception as exc:
        log.exception("tripwire run %s failed", run_id)
        steps.mark_failed(run_id=run_id, exc=exc, attempt=attempt)
        alerts = []
    for alert in alerts:  # announced after the run's end: a broker outage never fails it
        try:
            if notify is not None:
                notify(alert.id)
        except Exception:
            log.exception("tripwire alert %s not announced", alert.id)
    if Run.objects.filter(id=run_id, status__in=(RunStatus.DONE, RunStatus.FAILED)).exists():
        record_run_end(run_id)
    return Run.objects.get(id=run_id)
