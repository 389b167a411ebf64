"""Tool calls over the wire: offered through both protocols, streamed back as deltas by the
simulated vendor (a real local server in its own process), assembled into the record."""

from __future__ import annotations

import asyncio
import json

import pytest

from evals.benchmarks import bfcl, score, simulate
from evals.client import make_client, stream_chat
from evals.records import ChatRequest, EndpointSpec
from evals.toolcalls import ToolCallAssembler, anthropic_fields, openai_fields

pytestmark = pytest.mark.usefixtures("benchmark_wheels")
TOOL = {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}


def test_it_offers_tools_in_each_protocols_shape():
    request = ChatRequest(messages=[], tools=[TOOL], response_format={"type": "json_object"})
    assert openai_fields(request) == {
        "tools": [{"type": "function", "function": TOOL}],
        "response_format": {"type": "json_object"},
    }
    assert anthropic_fields(request) == {
        "tools": [{"name": "f", "description": "d", "input_schema": TOOL["parameters"]}]
    }
    assert openai_fields(ChatRequest(messages=[])) == {}


def test_it_assembles_pieces_by_index():
    calls = ToolCallAssembler()
    calls.openai({"index": 0, "function": {"name": "a", "arguments": '{"x"'}})
    calls.openai({"index": 1, "function": {"name": "b", "arguments": ""}})
    calls.openai({"index": 0, "function": {"arguments": ": 1}"}})
    calls.openai({"index": 1, "function": {"arguments": "{}"}})
    assert calls.result() == [
        {"name": "a", "arguments_json": '{"x": 1}'},
        {"name": "b", "arguments_json": "{}"},
    ]
    anthropic = ToolCallAssembler()
    anthropic.anthropic_start(1, {"type": "tool_use", "name": "c", "input": {}})
    anthropic.anthropic_delta(1, '{"y": ')
    anthropic.anthropic_delta(1, "2}")
    anthropic.anthropic_start(2, {"type": "tool_use", "name": "d", "input": {"z": 3}})
    assert anthropic.result() == [
        {"name": "c", "arguments_json": '{"y": 2}'},
        {"name": "d", "arguments_json": '{"z": 3}'},
    ]


async def _answers(url: str, protocol: str, model: str, cases):
    endpoint = EndpointSpec("sim", protocol, url, model)
    async with make_client() as client:
        return await asyncio.gather(
            *(stream_chat(client, endpoint, score.request_for(c)) for c in cases)
        )


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_it_records_streamed_tool_calls_from_the_simulated_vendor(demo_vendor_url, protocol):
    cases = bfcl.load_cases(["parallel", "irrelevance"], limit=15)
    base = asyncio.run(_answers(demo_vendor_url, protocol, "demo-base", cases))
    distilled = asyncio.run(_answers(demo_vendor_url, protocol, "demo-distilled", cases))
    for case, rec in zip(cases, base, strict=True):
        assert rec.ok, rec.error_message
        expected, _ = simulate.tool_calls(case, "base")
        assert [(c["name"], json.loads(c["arguments_json"])) for c in rec.tool_calls] == [
            (c["name"], json.loads(c["arguments_json"])) for c in expected
        ]
        assert score.score(case, rec).passed
        if rec.tool_calls:  # the calls are the generated tokens: TTFT and usage count them
            assert rec.ttft_ms is not None and rec.completion_tokens
            assert rec.finish_reason in ("tool_calls", "tool_use")
    lost = [not score.score(c, r).passed for c, r in zip(cases, distilled, strict=True)]
    assert lost == [simulate.loses(c, "distilled") for c in cases]
    assert any(lost)


def test_it_answers_humaneval_prompts_and_the_distilled_tier_fails_its_share(demo_vendor_url):
    from evals.benchmarks import humaneval

    cases = humaneval.load_cases(16)
    base = asyncio.run(_answers(demo_vendor_url, "openai", "demo-base", cases))
    distilled = asyncio.run(_answers(demo_vendor_url, "openai", "demo-distilled", cases))
    assert all(score.score(c, r).passed for c, r in zip(cases, base, strict=True))
    lost = [not score.score(c, r).passed for c, r in zip(cases, distilled, strict=True)]
    assert lost == [simulate.loses(c, "distilled") for c in cases] and any(lost)
