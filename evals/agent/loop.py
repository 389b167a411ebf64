"""The agent loop: one tier plays one task through tierwatch's own client, as BFCL's runner does.

Per turn (BFCL's ``inference_multi_turn_FC``): the turn's user messages are appended (miss_func's
held-back tools are offered from their turn on); then a request with the conversation so far and
the tools; the model's tool calls are executed in the task's sandboxed environment, in the order
made, and their results fed back as tool messages; again, until the model answers without a tool
call (the end of the turn). More than ``steps_per_turn`` requests with calls in one turn is
BFCL's force-quit (``step_limit``): the episode ends there, and BFCL scores it as failed.

Every request is timed by :func:`evals.client.stream_chat` and handed with its :class:`Step` to
the caller's ``on_request`` (the product stores each as a sample). The episode is bounded: a
request limit and a wall clock across all its turns (``timeout``), each request under the
endpoint's own deadline; a failed request ends it (``error``), and so does an environment that
cannot answer (``environment_error``). Nothing here raises for a vendor's or an environment's
failure.

A call's arguments are parsed as JSON and passed to the method as keyword arguments; arguments
that are not a JSON object are answered in BFCL's words ("Error during execution: ...") without
touching the environment, and a name the task does not know is the environment's NameError,
as when BFCL evaluates it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from evals.agent.environment import Environment, EnvironmentFailure, EnvLimits
from evals.agent.records import AgentTask, Episode, Step, ToolCall
from evals.client import stream_chat
from evals.records import ChatRequest, EndpointSpec, TimingRecord, storable
from evals.scrub import key_scrubber
from evals.toolcalls import conversation_messages

STORED_CHARS = 8192  # of a result, an answer text or a call's arguments, in the episode record
OnRequest = Callable[[TimingRecord, Step], None]


@dataclass(frozen=True)
class Limits:
    """Bounds of one episode."""

    steps_per_turn: int = 20  # BFCL's MAXIMUM_STEP_LIMIT: requests with calls in one turn
    requests: int = 60  # per episode, all turns together
    episode_s: float = 900.0  # wall clock per episode
    max_tokens: int = 1024  # per request


def _bounded(text: str, limit: int = STORED_CHARS) -> str:
    text = storable(text)
    return text if len(text) <= limit else text[:limit] + f"\n[... {len(text) - limit} more]"


class _Scrub:
    """Every secret of the endpoint scrubbed out of a text, as from any vendor text."""

    def __init__(self, endpoint: EndpointSpec) -> None:
        self.scrubbers = [key_scrubber(s) for s in (endpoint.api_key, *endpoint.secrets)]

    def __call__(self, text: str) -> str:
        for scrub in self.scrubbers:
            text = scrub(text)
        return text


def _step(turn: int, index: int, record: TimingRecord, scrub: _Scrub) -> Step:
    return Step(
        turn=turn,
        step=index,
        ok=record.ok,
        error_class=record.error_class,
        ttft_ms=record.ttft_ms,
        e2e_ms=record.e2e_ms,
        prompt_tokens=record.prompt_tokens,
        output_tokens=record.output_tokens,
        finish_reason=record.finish_reason,
        text=_bounded(scrub(record.text)),
    )


async def _execute(
    env: Environment, task: AgentTask, call: dict[str, str], call_id: str
) -> tuple[ToolCall, str]:
    """One call run in the environment: its record and the text fed back to the model."""
    name, arguments = call.get("name", ""), call.get("arguments_json", "")
    out = ToolCall(name=name, arguments_json=arguments, call_id=call_id)
    try:
        kwargs = json.loads(arguments or "{}")
    except ValueError:
        kwargs = None
    if not isinstance(kwargs, dict):
        out.error = "bad_arguments"
        return out, "Error during execution: the arguments are not a JSON object"
    if name not in task.methods:
        out.error = "unknown_tool"
    result = await asyncio.to_thread(env.call, task.methods.get(name, name), [], kwargs)
    return out, result


async def _run_calls(
    env: Environment,
    task: AgentTask,
    record: TimingRecord,
    ids: list[str],
    step: Step,
    scrub: _Scrub,
) -> tuple[list[str], str | None]:
    """The step's calls in order, recorded on ``step``: the results to feed back, and the
    environment's failure if one stopped them."""
    results: list[str] = []
    for call, call_id in zip(record.tool_calls, ids, strict=True):
        try:
            done, result = await _execute(env, task, call, call_id)
        except EnvironmentFailure as exc:
            done = ToolCall(call.get("name", ""), call.get("arguments_json", ""), call_id)
            done.error, done.result = "environment", scrub(f"environment error: {exc}")
            step.calls.append(done)
            return results, str(exc)
        done.result = _bounded(scrub(result))
        done.arguments_json = _bounded(scrub(done.arguments_json))
        done.name = _bounded(scrub(done.name), 200)
        step.calls.append(done)
        results.append(result)
    return results, None


def _started(task: AgentTask, env_limits: EnvLimits | None) -> Environment:
    """The task's environment, started (reads the wheel, spawns the sandbox: blocking)."""
    env = Environment(
        task.involved_classes,
        task.initial_config,
        long_context=task.long_context,
        limits=env_limits,
    )
    env.start()
    return env


async def run_episode(
    client: httpx.AsyncClient,
    endpoint: EndpointSpec,
    task: AgentTask,
    *,
    tier: str,
    on_request: OnRequest | None = None,
    limits: Limits | None = None,
    env_limits: EnvLimits | None = None,
) -> Episode:
    """Play ``task`` against ``endpoint``; the episode as played, never an exception for a
    vendor's or an environment's failure (module docstring)."""
    limits = limits or Limits()
    episode = Episode(task_key=task.key, tier=tier)
    try:
        env = await asyncio.to_thread(_started, task, env_limits)
    except Exception as exc:  # no environment (sandbox, wheel, classes): that is its stop
        episode.stop, episode.stop_detail = "environment_error", _bounded(str(exc), 500)
        return episode
    try:
        await _play(client, endpoint, task, episode, env, limits, on_request)
    finally:
        await asyncio.to_thread(env.close)
    return episode


async def _play(
    client: httpx.AsyncClient,
    endpoint: EndpointSpec,
    task: AgentTask,
    episode: Episode,
    env: Environment,
    limits: Limits,
    on_request: OnRequest | None,
) -> None:
    scrub = _Scrub(endpoint)
    deadline = time.monotonic() + limits.episode_s
    conversation: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = list(task.tools)
    for turn, messages in enumerate(task.turns):
        tools += task.added_tools.get(turn, [])
        conversation += [dict(m) for m in messages]
        with_calls = 0
        while True:
            left = deadline - time.monotonic()
            if episode.requests >= limits.requests or left <= 0:
                episode.stop = "timeout"
                episode.stop_detail = (
                    f"the episode's request limit ({limits.requests})"
                    if left > 0
                    else f"the episode's wall clock ({limits.episode_s:g} s)"
                )
                return
            request = ChatRequest(
                messages=conversation_messages(endpoint.protocol, conversation),
                max_tokens=limits.max_tokens,
                tools=tools,
            )
            bounded = dataclasses.replace(endpoint, timeout_s=min(endpoint.timeout_s, left))
            record = await stream_chat(client, bounded, request)
            step = _step(turn, sum(s.turn == turn for s in episode.steps), record, scrub)
            episode.steps.append(step)
            failure = None if record.ok else f"{record.error_class}: {record.error_message}"
            ids = [f"t{turn}s{step.step}c{i}" for i in range(len(record.tool_calls))]
            results: list[str] = []
            if failure is None:
                results, failure = await _run_calls(env, task, record, ids, step, scrub)
            if on_request is not None:
                on_request(record, step)
            if failure is not None:  # the vendor's request failed, or the environment
                if record.ok:
                    episode.stop = "environment_error"
                else:
                    episode.stop = "timeout" if time.monotonic() >= deadline else "error"
                episode.stop_detail = _bounded(scrub(failure), 500)
                return
            if not record.tool_calls:
                break  # answered without a call: the end of the turn
            conversation.append(
                {
                    "role": "assistant",
                    "content": record.text,
                    "tool_calls": [
                        {
                            "id": i,
                            "name": c.get("name", ""),
                            "arguments_json": c.get("arguments_json", ""),
                        }
                        for c, i in zip(record.tool_calls, ids, strict=True)
                    ],
                }
            )
            conversation += [
                {"role": "tool", "tool_call_id": i, "name": c.get("name", ""), "content": r}
                for c, i, r in zip(record.tool_calls, ids, results, strict=True)
            ]
            with_calls += 1
            if with_calls > limits.steps_per_turn:
                episode.stop = "step_limit"
                episode.stop_detail = f"turn {turn}: over {limits.steps_per_turn} steps with calls"
                return
        conversation.append({"role": "assistant", "content": record.text, "tool_calls": []})
        try:
            episode.states.append(storable(await asyncio.to_thread(env.state)))
        except EnvironmentFailure as exc:
            episode.stop, episode.stop_detail = "environment_error", _bounded(str(exc), 500)
            return
        episode.turns_done = turn + 1
    episode.stop = "done"
