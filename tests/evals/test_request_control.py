"""What the client sends, as a real server on 127.0.0.1 receives it: the body of a reasoning
model (``max_completion_tokens``, no temperature), an endpoint's extra headers beside the
client's own, and header secrets scrubbed from what comes back like the key."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.evals.calls import KEY, endpoint, run
from tests.evals.replay import Replay, recorded


@pytest.fixture(scope="module")
def replay():
    with Replay() as r:
        yield r


def _sent(replay, ep):
    rec = run(ep)
    got = replay.requests[-1]
    return rec, json.loads(got["body"]), {k.lower(): v for k, v in got["headers"].items()}


def test_a_reasoning_model_gets_max_completion_tokens_and_no_temperature(replay):
    url = replay.add(recorded("openai_gpt5_moderation_service_tier.sse"))
    ep = endpoint(url, "gpt-5", max_tokens_field="max_completion_tokens", send_temperature=False)
    rec, body, _ = _sent(replay, ep)
    assert rec.ok and rec.text == "Paris."
    assert body["max_completion_tokens"] == 120
    assert "max_tokens" not in body and "temperature" not in body
    assert body["stream"] is True and body["model"] == "gpt-5"


def test_the_default_body_keeps_max_tokens_and_temperature(replay):
    url = replay.add(recorded("openai_gpt4o_text_a.sse"))
    _, body, _ = _sent(replay, endpoint(url, "gpt-4o"))
    assert (body["max_tokens"], body["temperature"]) == (120, 0.0)
    assert "max_completion_tokens" not in body


def test_anthropic_without_temperature_still_sends_max_tokens(replay):
    url = replay.add(recorded("anthropic_thinking.sse"))
    _, body, _ = _sent(replay, endpoint(url, "claude", "anthropic", send_temperature=False))
    assert body["max_tokens"] == 120 and "temperature" not in body


def test_extra_headers_are_sent_and_the_clients_own_win(replay):
    url = replay.add(recorded("anthropic_short_text_service_tier.sse"))
    ep = endpoint(
        url,
        "claude",
        "anthropic",
        extra_headers={"anthropic-beta": "fast-mode-2026-02-01", "Accept-Encoding": "gzip"},
    )
    rec, _, headers = _sent(replay, ep)
    assert rec.ok
    assert headers["anthropic-beta"] == "fast-mode-2026-02-01"
    assert headers["accept-encoding"] == "identity" and headers["x-api-key"] == KEY


def test_a_header_secret_echoed_back_is_scrubbed_like_the_key(replay):
    secret = "gw-secret-9f8e7d6c5b4a39281706"
    piece = f'"content":"{secret}"'.encode()
    body = recorded("openai_gpt4o_text_a.sse").replace(b'"content":"San"', piece)
    ep = dataclasses.replace(
        endpoint(replay.add(body), "gpt-4o"),
        extra_headers={"x-gateway-key": f"Bearer {secret}"},
        secrets=(secret,),
    )
    rec, _, headers = _sent(replay, ep)
    assert headers["x-gateway-key"] == f"Bearer {secret}"  # sent as configured
    assert rec.ok and secret not in rec.text and secret[:8] not in rec.text
    assert "***" in rec.text


def test_the_responses_api_gets_input_and_max_output_tokens(replay):
    url = replay.add(recorded("responses_deepseek_text.sse"))
    rec, body, _ = _sent(replay, endpoint(url, "deepseek-v4-flash", "responses"))
    assert replay.requests[-1]["path"].endswith("/v1/responses")
    assert rec.ok and rec.text == "The capital of France is Paris."
    assert body["input"][0]["content"].startswith("Explain connection pooling")
    assert body["max_output_tokens"] == 120 and body["stream"] is True
    assert "max_tokens" not in body and "messages" not in body
