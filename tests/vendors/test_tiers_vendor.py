"""evals.vendors.tiers: the vendor shapes a preset's probe meets, beyond the presets' own
tests (tests/monitor/test_presets_probe.py): what the vendors refuse, and the exact share."""

from __future__ import annotations

import asyncio

from evals.client import make_client, stream_chat
from evals.records import ChatRequest, EndpointSpec, TimingRecord
from evals.vendors.tiers import Counter, serve_in_thread

ASK = ChatRequest(messages=[{"role": "user", "content": "Hi"}], max_tokens=16)


def fetch(url: str, protocol: str = "openai", n: int = 1, **kw) -> list[TimingRecord]:
    spec = EndpointSpec(name="e", protocol=protocol, base_url=url, model="m", **kw)

    async def go() -> list[TimingRecord]:
        async with make_client() as client:
            return [await stream_chat(client, spec, ASK) for _ in range(n)]

    return asyncio.run(go())


def test_ultrafast_is_refused_on_chat_completions_and_served_on_the_responses_api():
    body = {"service_tier": "ultrafast"}
    with serve_in_thread() as url:
        (chat,) = fetch(f"{url}/openai/v1", extra_body=body)
        (resp,) = fetch(f"{url}/openai/v1", "responses", extra_body=body)
    assert not chat.ok and chat.http_status == 400 and "Responses API only" in chat.error_message
    assert resp.ok and resp.served_tier == "ultrafast"


def test_a_standard_request_is_never_downgraded_and_the_share_is_exact():
    with serve_in_thread(downgrade_share=1.0) as url:
        plain = fetch(f"{url}/groq/v1", n=2, extra_body={"service_tier": "on_demand"})
    assert [r.served_tier for r in plain] == ["on_demand", "on_demand"]
    counter = Counter(0.25)
    assert [counter.next_downgraded() for _ in range(8)].count(True) == 2


def test_anthropic_fast_mode_s_own_rate_limit_headers_are_kept_with_the_sample():
    beta = {"anthropic-beta": "fast-mode-2026-02-01"}
    with serve_in_thread() as url:
        (fast,) = fetch(
            f"{url}/anthropic/v1", "anthropic", extra_body={"speed": "fast"}, extra_headers=beta
        )
        (standard,) = fetch(f"{url}/anthropic/v1", "anthropic")
    assert fast.ok and fast.headers["anthropic-fast-output-tokens-remaining"] == "9000"
    assert not any(name.startswith("anthropic-fast-") for name in standard.headers)
