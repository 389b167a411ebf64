"""The black-box half of a tripwire run: border inputs (``evals.stats.border``) for a tier whose
endpoint returns no logprobs (Anthropic's API, or an OpenAI-compatible server with them off).

A tier's first border run *discovers* its border inputs (hundreds of one-token requests,
``discovery_requests``), but only once its cost was accepted: an operator confirmed it on the
pair page, or the config set ``border_discovery: true`` (``TripwireState.border_allowed``).
Until then the tier is skipped with the cost in the reason. After discovery each run asks the
kept inputs ``SAMPLES`` times and hands the answer distributions to
``monitor.derived.tripwire``, which tests them against the reference and folds the p into the
tier's tripwire e-detector. An acknowledged change empties the tier's state, so discovery is
done again on the model now served.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evals.client import make_client, stream_chat
from evals.records import EndpointSpec
from evals.stats import border as stats
from monitor.models import Endpoint
from monitor.runs.budget import priced, sample_cost

CONCURRENCY = 8  # requests in flight per tier: discovery sends hundreds
PROMPT_TOKENS = 10  # a 1–2 character prompt in a vendor's chat template, for the cost stated


@dataclass(frozen=True)
class Sizes:
    """How big discovery and each run are (the module defaults; tests and the demo shrink)."""

    candidates: int = stats.DISCOVERY_CANDIDATES
    queries: int = stats.DISCOVERY_QUERIES
    target: int = stats.DISCOVERY_TARGET
    reference: int = stats.REFERENCE_SAMPLES
    keep: int = stats.KEEP
    samples: int = stats.SAMPLES

    @property
    def discovery(self) -> int:
        return stats.discovery_requests(self.candidates, self.queries, self.target, self.reference)

    @property
    def per_run(self) -> int:
        return self.keep * self.samples


def query_cost(endpoint: Endpoint) -> float | None:
    """USD of one one-token query at the endpoint's prices (``PROMPT_TOKENS`` in, 1 out)."""
    return sample_cost(endpoint, PROMPT_TOKENS, 1) if priced(endpoint) else None


def discovery_cost(endpoint: Endpoint, sizes: Sizes = Sizes()) -> dict[str, Any]:
    """What one tier's discovery costs at most, stated before it starts."""
    each = query_cost(endpoint)
    usd = None if each is None else each * sizes.discovery
    return {"requests": sizes.discovery, "usd": usd}


def cost_words(cost: dict[str, Any]) -> str:
    usd = "unpriced" if cost["usd"] is None else f"≈ ${cost['usd']:.2f}"
    return f"{cost['requests']} one-token requests ({usd})"


async def _ask(spec: EndpointSpec, prompts: Sequence[str]) -> list[tuple[str, str | None]]:
    gate = asyncio.Semaphore(CONCURRENCY)
    async with make_client() as client:

        async def one(prompt: str) -> str | None:
            async with gate:
                return stats.answer(await stream_chat(client, spec, stats.request(prompt)))

        answers = await asyncio.gather(*(one(p) for p in prompts))
    return list(zip(prompts, answers, strict=True))


def discover(endpoint: Endpoint, sizes: Sizes, seed: int) -> dict[str, Any]:
    """Candidates × queries, then a reference for the border inputs found, the best kept.
    Returns the tier's ``border`` block (``inputs`` empty when too few were found: the reason
    says so, and discovery waits for an acknowledged change rather than paying again)."""
    spec = endpoint.spec()
    cands = stats.candidates(sizes.candidates, seed)
    first = stats.distributions(
        asyncio.run(_ask(spec, [c for c in cands for _ in range(sizes.queries)]))
    )
    found = [c for c in cands if stats.is_border(first.get(c, {}))][: sizes.target]
    asked = [p for p in found for _ in range(sizes.reference)]
    reference = stats.distributions(asyncio.run(_ask(spec, asked))) if asked else {}
    inputs = stats.select(reference, sizes.keep)
    block: dict[str, Any] = {
        "inputs": inputs,
        "reference": {p: dict(reference[p]) for p in inputs},
        "candidates": len(cands),
        "found": len(found),
        "requests": len(cands) * sizes.queries + len(asked),
    }
    if len(inputs) < stats.MIN_KEEP:
        block["inputs"], block["reference"] = [], {}
        block["failed"] = (
            f"only {len(inputs)} border inputs among {len(cands)} candidates (at least "
            f"{stats.MIN_KEEP} needed): this endpoint answers them the same at temperature 0"
        )
    return block


def sample(endpoint: Endpoint, inputs: Sequence[str], samples: int) -> dict[str, dict[str, int]]:
    """One run's answers: each kept input ``samples`` times, as distributions."""
    asked = [p for p in inputs for _ in range(samples)]
    return {
        p: dict(c)
        for p, c in stats.distributions(asyncio.run(_ask(endpoint.spec(), asked))).items()
    }
