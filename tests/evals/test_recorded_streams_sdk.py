"""Every recorded stream (tests/data/streams) read by the client and by the vendor's official
SDK from the same bytes on 127.0.0.1, field by field: text, reasoning, finish reason, tool
calls, usage, model id, served tier. A difference fails unless it is listed in ``KNOWN`` with
why the client's reading is the right one.

The SDKs are imported in the functions that call them, and the module's tests run on one xdist
worker: their imports (pydantic models by the thousand) are seconds of CPU, paid once instead of
by every worker that collects or runs one of them."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from tests.evals.calls import KEY, endpoint, run
from tests.evals.replay import INDEX, Replay, recorded, streams

pytestmark = pytest.mark.xdist_group("official_sdks")
ASK = [{"role": "user", "content": "x"}]
SSE_END = "the body ends without the blank line that ends its last event, which the SSE "
SSE_END += "specification discards: the client's stream_incomplete is right, the SDK dispatches it"
KNOWN = {
    # (file, field): why the client's reading is the right one
    ("anthropic_sdk_basic.sse", "ok"): SSE_END,
    ("anthropic_sdk_fallback_relabel.sse", "ok"): SSE_END,
    ("anthropic_sdk_incomplete_partial_json.sse", "ok"): SSE_END,
    ("anthropic_sdk_tool_use.sse", "ok"): SSE_END,
    ("groq_compound_web_search_x_groq_usage.sse", "completion_tokens"): "Groq's usage is in "
    "x_groq.usage, which the OpenAI SDK does not read",
    ("groq_compound_web_search_x_groq_usage.sse", "prompt_tokens"): "the same x_groq.usage",
    ("mistral_magistral_thinking_list_content.sse", "reasoning"): "Mistral's thinking parts "
    "in a list-typed delta.content: the OpenAI SDK keeps only the text",
    ("openai_gpt4o_text_short.sse", "ok"): "a 1-token answer cut by max_tokens: the SDK's "
    "stream helper fails parsing '{\"' as JSON (JSONDecodeError), the stream is sound",
    ("openai_gpt5_moderation_service_tier.sse", "completion_tokens"): "usage sent once, then "
    "a moderation chunk with usage: null, which the SDK's accumulator keeps as the usage",
    ("openai_gpt5_moderation_service_tier.sse", "prompt_tokens"): "the same usage: null",
    ("openrouter_web_search_annotations.sse", "ok"): "OpenRouter's delta.annotations list has "
    "no index key: the SDK's accumulator raises RuntimeError, the stream is sound",
}


@pytest.fixture(scope="module")
def replay():
    with Replay() as r:
        yield r


def _json(text: str) -> Any:
    try:
        return json.loads(text or "{}")
    except ValueError:
        return text  # cut by max_tokens: compared as the text it is


def _tierwatch(url: str, protocol: str) -> dict[str, Any]:
    rec = run(endpoint(url, "m", protocol))
    return {
        "ok": rec.ok or rec.error_class == "refusal",  # a refusal is an answer to the SDKs
        "text": rec.text,
        "reasoning": rec.reasoning_text,
        "finish": rec.finish_reason,
        "tools": [(c["name"], _json(c["arguments_json"])) for c in rec.tool_calls],
        "completion_tokens": rec.completion_tokens,
        "prompt_tokens": rec.prompt_tokens,
        "model": rec.model_id,
        "tier": rec.served_tier,
    }


def _openai_sdk(url: str) -> dict[str, Any]:
    import openai

    client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)
    try:
        with client.chat.completions.stream(model="m", messages=ASK) as stream:
            for _ in stream:
                pass
            done = stream.get_final_completion()
    except (openai.OpenAIError, ValueError, RuntimeError) as exc:  # the SDK gave up
        return {"ok": False, "error": type(exc).__name__}
    choice = done.choices[0]
    msg, extra = choice.message, choice.message.model_extra or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning") or ""
    usage = done.usage
    return {
        "ok": True,
        "text": (msg.content if isinstance(msg.content, str) else "") + (msg.refusal or ""),
        "reasoning": reasoning if isinstance(reasoning, str) else "",
        "finish": choice.finish_reason,
        "tools": [
            (t.function.name, json.loads(t.function.arguments or "{}"))
            for t in msg.tool_calls or ()
        ],  # fmt: skip
        "completion_tokens": usage.completion_tokens if usage else None,
        "prompt_tokens": usage.prompt_tokens if usage else None,
        "model": done.model,
        "tier": done.service_tier or "",
    }


def _responses_sdk(url: str) -> dict[str, Any]:
    import openai

    client = openai.OpenAI(base_url=url, api_key=KEY, max_retries=0)
    try:
        with client.responses.stream(model="m", input="x") as stream:
            for _ in stream:
                pass
            done = stream.get_final_response()
    except (openai.OpenAIError, ValueError, RuntimeError) as exc:  # the SDK gave up
        return {"ok": False, "error": type(exc).__name__}
    reasoning = ""
    for item in done.output:
        if item.type == "reasoning":
            reasoning += "".join(c.text for c in item.content or ())
            reasoning += "".join(c.text for c in item.summary or ())
    usage = done.usage
    return {
        "ok": True,
        "text": done.output_text,
        "reasoning": reasoning,
        "finish": done.status,
        "tools": [
            (o.name, json.loads(o.arguments or "{}"))
            for o in done.output
            if o.type == "function_call"
        ],  # fmt: skip
        "completion_tokens": usage.output_tokens if usage else None,
        "prompt_tokens": usage.input_tokens if usage else None,
        "model": done.model,
        "tier": done.service_tier or "",
    }


def _anthropic_sdk(url: str) -> dict[str, Any]:
    import anthropic

    client = anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key=KEY, max_retries=0)
    try:
        with client.messages.stream(model="m", max_tokens=10, messages=ASK) as stream:
            for _ in stream:
                pass
            msg = stream.get_final_message()
    except (anthropic.AnthropicError, ValueError, RuntimeError) as exc:  # the SDK gave up
        return {"ok": False, "error": type(exc).__name__}
    blocks, usage = msg.content, msg.usage
    cached = (usage.cache_read_input_tokens or 0) + (usage.cache_creation_input_tokens or 0)
    return {
        "ok": True,
        "text": "".join(b.text for b in blocks if b.type == "text"),
        "reasoning": "".join(b.thinking for b in blocks if b.type == "thinking"),
        "finish": msg.stop_reason,
        "tools": [(b.name, b.input) for b in blocks if b.type == "tool_use"],
        "completion_tokens": usage.output_tokens,
        "prompt_tokens": usage.input_tokens + cached,
        "model": msg.model,
        "tier": usage.service_tier or "",
    }


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic, on Mistral's list content
@pytest.mark.parametrize("name", streams("openai", "anthropic", "responses"))
def test_the_client_reads_a_recorded_stream_as_the_sdk_does(replay, name):
    protocol = INDEX[name]["protocol"]
    url = replay.add(recorded(name))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sdk = {"anthropic": _anthropic_sdk, "responses": _responses_sdk}.get(protocol, _openai_sdk)(
            url
        )
    ours = _tierwatch(url, protocol)
    fields = ["ok"] + ([k for k in ours if k != "ok"] if sdk["ok"] and ours["ok"] else [])
    differ = {f: (ours[f], sdk[f]) for f in fields if ours[f] != sdk[f]}
    unexplained = {f: v for f, v in differ.items() if (name, f) not in KNOWN}
    assert not unexplained, f"{name}: client vs SDK {unexplained}"
    gone = [f for (n, f) in KNOWN if n == name and f not in differ]
    assert not gone, f"{name}: a known difference is gone (update KNOWN): {gone}"
