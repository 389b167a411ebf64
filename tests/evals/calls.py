"""One streamed call of ``evals.client`` to a test endpoint, for the client tests: the test key,
a default request, an ``EndpointSpec`` builder and ``run`` (one call on a fresh client)."""

from __future__ import annotations

import asyncio
from typing import Any

from evals.client import make_client, stream_chat
from evals.records import ChatRequest, EndpointSpec, TimingRecord

KEY = "sk-probe-test-0123456789abcdef"  # shares no 8 characters with a header name the client keeps
ASK = ChatRequest(
    messages=[{"role": "user", "content": "Explain connection pooling in drivers"}], max_tokens=120
)


def endpoint(url: str, model: str, protocol: str = "openai", **kw: Any) -> EndpointSpec:
    return EndpointSpec(name=model, protocol=protocol, base_url=url, model=model, api_key=KEY, **kw)


def run(
    ep: EndpointSpec,
    request: ChatRequest = ASK,
    backend: str = "aiohttp",
    t0: list[float] | None = None,
) -> TimingRecord:
    async def go() -> TimingRecord:
        async with make_client(backend=backend) as client:
            sink = t0.append if t0 is not None else None
            return await stream_chat(client, ep, request, on_start=sink)

    return asyncio.run(go())
