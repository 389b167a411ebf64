"""The client against real recorded streams (tests/data/streams, replayed on 127.0.0.1): the
shapes vendors really send, each read into the record as the vendor meant it, on both wires."""

from __future__ import annotations

import json

import pytest

from tests.evals.calls import endpoint, run
from tests.evals.replay import Replay, recorded


@pytest.fixture(scope="module")
def replay():
    with Replay() as r:
        yield r


def play(replay, name, protocol="openai", backend="aiohttp", body=None, **kw):
    url = replay.add(recorded(name) if body is None else body, **kw)
    return run(endpoint(url, "m", protocol), backend=backend)


@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
def test_typed_content_parts_are_text_and_thinking_not_a_crash(replay, backend):
    rec = play(replay, "mistral_magistral_thinking_list_content.sse", backend=backend)
    assert rec.ok, rec.error_message
    assert rec.text.startswith("To cross the street safely")
    assert rec.reasoning_text.startswith("Okay, the user is asking how to cross the street")
    assert rec.ttft_ms is not None and rec.ttft_ms <= rec.e2e_ms
    assert rec.finish_reason == "stop" and rec.completion_tokens == 232


@pytest.mark.parametrize("name", ["openai_gpt4o_refusal.sse", "openai_gpt4o_refusal_logprobs.sse"])
def test_an_openai_refusal_is_its_own_class_with_its_text_kept(replay, name):
    rec = play(replay, name)
    assert (rec.ok, rec.error_class) == (False, "refusal")
    assert rec.text.startswith("I'm") and "can't assist" in rec.text
    assert rec.error_message.startswith("the model refused: I'm")
    assert rec.ttft_ms is not None and rec.e2e_ms is not None  # a refusal is generated tokens


def test_an_anthropic_refusal_stop_reason_is_a_refusal_too(replay):
    rec = play(replay, "anthropic_sdk_refusal_then_fallback.sse", "anthropic")
    assert (rec.ok, rec.error_class, rec.finish_reason) == (False, "refusal", "refusal")


@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compressed_stream_is_decoded_the_same_on_both_wires(replay, backend, encoding):
    plain = play(replay, "anthropic_thinking.sse", "anthropic")
    rec = play(replay, "anthropic_thinking.sse", "anthropic", backend, encoding=encoding, chunk=300)
    assert rec.ok, rec.error_message
    assert (rec.text, rec.reasoning_text) == (plain.text, plain.reasoning_text)
    assert rec.completion_tokens == plain.completion_tokens == 282
    assert len(rec.chunk_gaps_ms) == len(plain.chunk_gaps_ms)


@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
def test_an_encoding_the_client_cannot_decode_is_refused_by_name(replay, backend):
    rec = play(replay, "anthropic_thinking.sse", "anthropic", backend, encoding="br")
    assert (rec.ok, rec.error_class) == (False, "unsupported_encoding")
    assert "content-encoding 'br'" in rec.error_message


@pytest.mark.parametrize(
    ("name", "server"),
    [
        ("anthropic_mcp_tool_use.sse", {"type": "mcp_tool_use", "name": "ask_question"}),
        ("anthropic_web_search_server_tool.sse", {"type": "server_tool_use", "name": "web_search"}),
        (
            "anthropic_code_execution_server_tool_use.sse",
            {"type": "server_tool_use", "name": "bash_code_execution"},
        ),
    ],
)
def test_server_tool_blocks_are_not_client_tool_calls(replay, name, server):
    rec = play(replay, name, "anthropic")
    assert rec.ok, rec.error_message
    assert rec.tool_calls == []  # nothing for the checker to score as a wrong call
    assert server in rec.server_tools


def test_a_client_tool_call_beside_a_server_tool_stays_a_tool_call(replay):
    rec = play(replay, "anthropic_tool_search.sse", "anthropic")
    assert rec.server_tools == [{"type": "server_tool_use", "name": "tool_search_tool_bm25"}]
    assert [c["name"] for c in rec.tool_calls] == ["get_exchange_rate"]
    assert json.loads(rec.tool_calls[0]["arguments_json"])


def test_a_fallback_block_records_the_model_that_answered(replay):
    body = recorded("anthropic_sdk_fallback_relabel.sse") + b"\n\n"  # the fixture's last line
    rec = play(replay, "", "anthropic", body=body)
    assert rec.ok, rec.error_message
    assert (rec.model_id, rec.fallback_from) == ("claude-sonnet-4-5", "claude-opus-4-7")
    assert rec.text == "Hello there!"


def test_groq_usage_in_its_extension_object_is_the_usage(replay):
    rec = play(replay, "groq_compound_web_search_x_groq_usage.sse")
    assert rec.ok
    assert (rec.prompt_tokens, rec.completion_tokens) == (5003, 359)
    assert rec.tpot_ms == pytest.approx((rec.e2e_ms - rec.ttft_ms) / 358)


def test_unreported_cached_tokens_are_unknown_not_zero(replay):
    body = recorded("anthropic_sdk_basic.sse") + b"\n\n"  # usage has no cache fields at all
    rec = play(replay, "", "anthropic", body=body)
    assert rec.ok and rec.prompt_tokens == 11
    assert rec.cached_tokens is None
    reported = play(replay, "anthropic_short_text_service_tier.sse", "anthropic")
    assert reported.cached_tokens == 0  # cache_read_input_tokens: 0 was said


def _mutated(name: str, old: bytes, new: bytes) -> bytes:
    body = recorded(name)
    assert old in body
    return body.replace(old, new)


@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        (b'"completion_tokens":232', b'"completion_tokens":"3"', "usage.completion_tokens"),
        (
            b'"completion_tokens":232',
            b'"completion_tokens":' + b"1" * 31,
            "usage.completion_tokens",
        ),
        (b'{"content":"To"}', b'{"content":5}', "delta.content"),
        (b'{"type":"text","text":"Okay"}', b'{"type":"text","text":7}', "thinking"),
    ],
)
def test_a_type_confused_field_is_a_failed_sample_naming_it(replay, backend, old, new, field):
    body = _mutated("mistral_magistral_thinking_list_content.sse", old, new)
    rec = play(replay, "", backend=backend, body=body)
    assert (rec.ok, rec.error_class) == (False, "malformed_stream")
    assert field in rec.error_message


@pytest.mark.parametrize("backend", ["aiohttp", "httpcore"])
def test_a_responses_api_stream_is_read_with_its_served_tier_and_usage(replay, backend):
    rec = play(replay, "responses_openai_usage.sse", "responses", backend)
    assert rec.ok, rec.error_message
    assert (rec.model_id, rec.served_tier, rec.finish_reason) == (
        "gpt-5-2025-08-07",
        "flex",
        "completed",
    )
    assert (rec.prompt_tokens, rec.completion_tokens, rec.cached_tokens) == (53, 469, 0)
    assert rec.tool_calls == [{"name": "final_result", "arguments_json": '{"result":6666}'}]
    assert rec.ttft_ms is not None and rec.ttft_ms <= rec.e2e_ms
    thinking = play(replay, "responses_deepseek_text.sse", "responses", backend)
    assert thinking.text == "The capital of France is Paris." and thinking.reasoning_text


def test_a_responses_stream_cut_before_response_completed_is_incomplete(replay):
    body = recorded("responses_deepseek_text.sse")
    rec = play(replay, "", "responses", body=body[: body.index(b"event: response.completed")])
    assert (rec.ok, rec.error_class) == (False, "stream_incomplete")
    assert "response.completed" in rec.error_message
