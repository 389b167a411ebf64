"""Reasoning as part of an endpoint's request shape: OpenAI's effort in each of its two APIs'
words, Anthropic's thinking budget (and then no temperature), none by default."""

from __future__ import annotations

import json

from evals.client import build_request
from evals.records import ChatRequest, EndpointSpec

ASK = ChatRequest(messages=[{"role": "user", "content": "Why?"}], max_tokens=4096)


def body(protocol: str, **kw) -> dict:
    spec = EndpointSpec(name="e", protocol=protocol, base_url="http://h/v1", model="m", **kw)
    return json.loads(build_request(spec, ASK)[2])


def test_openai_reasoning_effort_in_chat_completions_and_the_responses_api():
    assert body("openai", reasoning_effort="high")["reasoning_effort"] == "high"
    assert body("responses", reasoning_effort="high")["reasoning"] == {"effort": "high"}
    assert "reasoning_effort" not in body("openai") and "reasoning" not in body("responses")


def test_anthropic_thinking_budget_drops_the_temperature():
    sent = body("anthropic", thinking_budget=2048)
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in sent
    plain = body("anthropic")
    assert "thinking" not in plain and plain["temperature"] == 0.0
