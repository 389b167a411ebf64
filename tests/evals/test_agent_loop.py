"""The agent loop through the real client, against the simulated vendor and a looping server."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from evals.agent.environment import EnvLimits
from evals.agent.loop import Limits, run_episode
from evals.agent.score import first_divergence, score_episode
from evals.benchmarks import bfcl_multi_turn as mt
from evals.client import build_request, make_client
from evals.records import ChatRequest, EndpointSpec
from evals.sandbox import isolation
from evals.toolcalls import conversation_messages

CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Go to document."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "t0s0c0", "name": "cd", "arguments_json": '{"folder": "document"}'}],
    },
    {"role": "tool", "tool_call_id": "t0s0c0", "name": "cd", "content": "moved"},
    {"role": "assistant", "content": "Done.", "tool_calls": []},
    {"role": "user", "content": "Now list it."},
]


def test_it_sends_tool_calls_and_results_in_each_protocols_shape():
    openai = conversation_messages("openai", CONVERSATION)
    assert openai[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "t0s0c0",
                "type": "function",
                "function": {"name": "cd", "arguments": '{"folder": "document"}'},
            }
        ],
    }
    assert openai[3] == {"role": "tool", "tool_call_id": "t0s0c0", "content": "moved"}
    anthropic = conversation_messages("anthropic", CONVERSATION)
    roles = ["system", "user", "assistant", "user", "assistant", "user"]
    assert [m["role"] for m in anthropic] == roles
    assert anthropic[2]["content"] == [
        {"type": "tool_use", "id": "t0s0c0", "name": "cd", "input": {"folder": "document"}}
    ]
    assert anthropic[3]["content"] == [
        {"type": "tool_result", "tool_use_id": "t0s0c0", "content": "moved"},
    ]
    assert anthropic[4]["content"] == [{"type": "text", "text": "Done."}]
    assert anthropic[5]["content"] == [{"type": "text", "text": "Now list it."}]
    responses = conversation_messages("responses", CONVERSATION)
    assert {"type": "function_call_output", "call_id": "t0s0c0", "output": "moved"} in responses
    endpoint = EndpointSpec("a", "anthropic", "http://127.0.0.1:1/v1", "m")
    _, _, body = build_request(endpoint, ChatRequest(messages=anthropic))
    sent = json.loads(body)
    assert sent["system"] == "Be brief." and sent["messages"] == anthropic[1:]


def test_anthropic_results_and_the_next_words_share_one_user_message_as_roles_alternate():
    conversation = [*CONVERSATION[:4], {"role": "user", "content": "And list it."}]
    anthropic = conversation_messages("anthropic", conversation)
    assert anthropic[-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "t0s0c0", "content": "moved"},
        {"type": "text", "text": "And list it."},
    ]


needs_sandbox = pytest.mark.skipif(isolation() == "none", reason="no sandbox on this machine")


async def _play(url, protocol, model, task, limits=None):
    seen = []
    async with make_client() as client:
        endpoint = EndpointSpec(model, protocol, url, model)
        episode = await run_episode(
            client,
            endpoint,
            task,
            tier=model,
            on_request=lambda record, step: seen.append((record, step)),
            limits=limits,
        )
    return episode, seen


@needs_sandbox
@pytest.mark.usefixtures("benchmark_wheels")
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_the_base_tier_plays_every_turn_over_http_and_passes(vendor, protocol):
    task = mt.load_task("multi_turn_base_0")
    episode, seen = asyncio.run(_play(vendor, protocol, "demo-base", task))
    assert (episode.stop, episode.turns_done) == ("done", len(task.turns))
    assert len(seen) == episode.requests and all(record.ok for record, _ in seen)
    assert [step for _, step in seen] == episode.steps
    for turn in range(len(task.turns)):  # calls, their results back, then an answer
        steps = [s for s in episode.steps if s.turn == turn]
        assert steps[0].calls and all(c.result and not c.error for c in steps[0].calls)
        assert not steps[-1].calls and steps[-1].text == "Done."
    assert len(episode.states) == len(task.turns)
    score = score_episode(task, episode)
    assert score.passed and score.first_failing_turn is None


@needs_sandbox
@pytest.mark.usefixtures("benchmark_wheels")
def test_the_distilled_tier_loses_a_later_turn_where_it_diverges(vendor):
    task = mt.load_task("multi_turn_miss_func_0")
    base, _ = asyncio.run(_play(vendor, "openai", "demo-base", task))
    distilled, _ = asyncio.run(_play(vendor, "openai", "demo-distilled", task))
    assert score_episode(task, base).passed
    lost = score_episode(task, distilled)
    assert not lost.passed and lost.first_failing_turn == 1
    assert first_divergence(base, distilled) == (1, 0)


@needs_sandbox
@pytest.mark.usefixtures("benchmark_wheels")
def test_a_vendor_failure_ends_the_episode_and_is_still_a_sample(vendor):
    task = mt.load_task("multi_turn_base_0")
    episode, seen = asyncio.run(_play(vendor, "openai", "demo-broken-html", task))
    assert episode.stop == "error" and "http_status" in episode.stop_detail
    assert len(seen) == 1 and not seen[0][0].ok
    assert score_episode(task, episode).failure == "error"


@needs_sandbox
@pytest.mark.usefixtures("benchmark_wheels")
def test_the_request_limit_bounds_the_episode(vendor):
    task = mt.load_task("multi_turn_base_0")
    episode, _ = asyncio.run(_play(vendor, "openai", "demo-base", task, Limits(requests=3)))
    assert (episode.stop, episode.requests) == ("timeout", 3)


async def _always_calling(request: web.Request) -> web.StreamResponse:
    """A model that never stops: every answer is one more ``ls`` call."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    call = {"index": 0, "id": "c", "type": "function", "function": {"name": "ls"}}
    call["function"]["arguments"] = "{}"
    for delta, finish in (({"tool_calls": [call]}, None), ({}, "tool_calls")):
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        chunk = {"id": "x", "object": "chat.completion.chunk", "model": "loop", "choices": [choice]}
        await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    return response


async def _play_looping(task, limits):
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _always_calling)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        return await _play(f"http://127.0.0.1:{port}/v1", "openai", "loop", task, limits)
    finally:
        await runner.cleanup()


@needs_sandbox
@pytest.mark.usefixtures("benchmark_wheels")
def test_a_model_that_calls_forever_stops_at_the_step_limit():
    task = mt.load_task("multi_turn_base_0")
    episode, seen = asyncio.run(_play_looping(task, Limits(steps_per_turn=3)))
    assert episode.stop == "step_limit" and episode.turns_done == 0
    assert episode.requests == 4 == len(seen)  # BFCL: force-quit once over the limit
    assert all(s.calls[0].name == "ls" and s.calls[0].result for s in episode.steps)
    assert score_episode(task, episode).failure == "force_terminated"


@needs_sandbox
@pytest.mark.usefixtures("benchmark_wheels")
def test_a_result_over_its_cap_ends_the_episode_as_an_environment_error(vendor):
    task = mt.load_task("multi_turn_base_0")

    async def play():
        seen = []
        async with make_client() as client:
            endpoint = EndpointSpec("b", "openai", vendor, "demo-base")
            episode = await run_episode(
                client,
                endpoint,
                task,
                tier="base",
                on_request=lambda record, step: seen.append(step),
                env_limits=EnvLimits(result_chars=10),
            )
        return episode, seen

    episode, seen = asyncio.run(play())
    assert episode.stop == "environment_error" and "result_too_large" in episode.stop_detail
    assert seen == episode.steps and len(seen) == 1
    assert seen[0].calls[-1].error == "environment"
    assert score_episode(task, episode).failure == "environment_error"
