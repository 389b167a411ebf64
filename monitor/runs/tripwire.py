"""A tripwire run (kind "tripwire"): per tier a few fixed prompts, one output token at
temperature 0 with the top-k logprobs (``evals.stats.tripwire``), folded into the pair's
``TripwireState`` (``monitor.derived.tripwire``). A few dozen one-token requests per tier:
cheap enough to run hourly, where an audit costs hundreds of long answers.

An endpoint that returns no logprobs (Anthropic's API has none; an OpenAI-compatible server
that answers without them) gets border inputs instead (``monitor.runs.border``): a discovery
once its cost was accepted, then the kept inputs sampled each run. Until then the tier is
skipped with the reason and the cost, stored in its state and shown on the page; the run
still ends done. Why one run kind with two modes rather than a new kind: both feed the same
per-tier e-detector, schedule and escalation; the mode is the endpoint's, not the operator's.
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
from monitor.models import Endpoint, Pair, Run, RunStatus, TripwireState
from monitor.runs import border, steps

log = logging.getLogger(__name__)

NO_LOGPROBS = (
    "the endpoint returns no logprobs; its border-input tripwire needs a discovery first: "
    "{cost} for this tier. Confirm it on the pair page, or set `border_discovery: true` in "
    "the pair's schedule"
)


def _border(
    endpoint: Endpoint, block: dict[str, Any], allowed: bool, sizes: border.Sizes | None, seed: int
) -> dict[str, Any] | str:
    """A tier without logprobs: discover its border inputs (once allowed), or sample them;
    a string is the reason the tier is skipped."""
    sizes = sizes or border.Sizes()
    found = block.get("border")
    if found is None:
        if not allowed:
            return NO_LOGPROBS.format(
                cost=border.cost_words(border.discovery_cost(endpoint, sizes))
            )
        return {"discovered": border.discover(endpoint, sizes, seed)}
    if not found.get("inputs"):
        return f"border inputs: {found.get('failed', 'none found')}"
    current = border.sample(endpoint, found["inputs"], sizes.samples)
    if not current:  # every request failed: nothing to test, said rather than raised
        return f"border inputs: no usable answer among {sizes.per_run} requests"
    return {"current": current}


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
    border_sizes: border.Sizes | None = None,
) -> Run:
    """Measure both tiers, fold them into the pair's tripwires, end the run."""
    run = Run.objects.select_related("pair__fast", "pair__base").get(id=run_id)
    pair = run.pair
    try:
        Run.objects.filter(id=run_id).update(planned=2 * len(prompts) * repeats)
        windows, skipped, notes, border_results = {}, {}, [], {}
        state = TripwireState.objects.filter(pair=pair).first()
        tiers = state.tiers if state else {}
        allowed = bool(state and state.border_allowed)
        for tier, endpoint in (("fast", pair.fast), ("base", pair.base)):
            block = tiers.get(tier, {})
            if endpoint.protocol != "anthropic" and block.get("mode") != "border":
                answers = asyncio.run(_ask(endpoint.spec(), prompts, repeats))
                window, failed, why = stats.window_of(answers)
                if window:
                    windows[tier] = window
                    if failed:
                        notes.append(f"{tier}: {failed} queries without logprobs ({why})")
                    continue
                if why != "no logprobs in the answer":
                    skipped[tier] = f"no usable answer ({failed} failed: {why})"
                    continue
            # no logprobs from this endpoint: border inputs instead
            outcome = _border(endpoint, block, allowed, border_sizes, run.seed)
            if isinstance(outcome, str):
                skipped[tier] = outcome
            else:
                border_results[tier] = outcome
        _, alerts = derived.after_run(
            run=run, windows=windows, skipped=skipped, escalate=escalate, border=border_results
        )
        done = sum(len(v) for w in windows.values() for v in w.values()) + sum(
            sum(n for c in r.get("current", {}).values() for n in c.values())
            + r.get("discovered", {}).get("requests", 0)
            for r in border_results.values()
        )
        Run.objects.filter(id=run_id).update(
            completed=done, planned=max(done, 2 * len(prompts) * repeats), verdict="; ".join(notes)
        )
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
