"""Tool calls on the wire: offering functions in a request, assembling the calls from a stream.

Why here and not in the client: the two protocols shape tools differently, and a streamed call
arrives in pieces, so both directions are plain functions over dicts that the client and the
SSE parser call with one line each (and that tests can drive without a socket).

- Request: a function is ``{name, description, parameters}`` with a JSON Schema ``parameters``
  (OpenAI's function object). OpenAI takes ``tools: [{"type": "function", "function": f}]``
  (Chat Completions API reference, "tools"); Anthropic takes ``tools: [{name, description,
  input_schema}]`` and answers with ``tool_use`` content blocks (Messages API, "Tool use").
- Stream: OpenAI sends ``delta.tool_calls[i]`` with an ``index``, the ``function.name`` once
  and ``function.arguments`` as string pieces to concatenate; Anthropic opens a
  ``content_block_start`` of type ``tool_use`` (name, empty ``input``) and sends the arguments
  as ``input_json_delta.partial_json`` pieces of that block's index. Either way the result is
  ``[{"name": ..., "arguments_json": ...}]`` in call order; the text is kept as sent (a model's
  invalid JSON is a finding, classified by :mod:`evals.benchmarks.toolcheck`).

TTFT counts tool-call pieces as generated tokens (the measure's definition in
:mod:`evals.client`); that happens in :mod:`evals._sse`, not here.
"""

from __future__ import annotations

import json
from typing import Any

from evals.records import ChatRequest


def openai_fields(request: ChatRequest) -> dict[str, Any]:
    """Body fields for OpenAI's Chat Completions: ``tools`` and ``response_format``."""
    fields: dict[str, Any] = {}
    if request.tools:
        fields["tools"] = [{"type": "function", "function": f} for f in request.tools]
    if request.response_format:
        fields["response_format"] = request.response_format
    return fields


def anthropic_fields(request: ChatRequest) -> dict[str, Any]:
    """Body fields for Anthropic's Messages API. Anthropic has no ``response_format``: a
    structured-output case states its format in the prompt, and is checked the same way."""
    if not request.tools:
        return {}
    return {
        "tools": [
            {
                "name": f["name"],
                "description": f.get("description", ""),
                "input_schema": f.get("parameters") or {"type": "object", "properties": {}},
            }
            for f in request.tools
        ]
    }


class ToolCallAssembler:
    """Collects one response's streamed tool-call pieces, keyed by their index."""

    __slots__ = ("calls", "inputs")

    def __init__(self) -> None:
        self.calls: dict[int, dict[str, str]] = {}  # insertion order = call order
        self.inputs: dict[int, Any] = {}  # Anthropic: a tool_use block's non-empty start input

    def _entry(self, index: Any) -> dict[str, str]:
        key = index if isinstance(index, int) else len(self.calls)
        return self.calls.setdefault(key, {"name": "", "arguments_json": ""})

    def openai(self, call: dict[str, Any]) -> None:
        """One element of ``delta.tool_calls``."""
        entry = self._entry(call.get("index", 0))
        fn = call.get("function") or {}
        name = fn.get("name") or ""
        if name and name != entry["name"]:  # sent once; some servers repeat it whole
            entry["name"] += name
        entry["arguments_json"] += fn.get("arguments") or ""

    def anthropic_start(self, index: Any, block: dict[str, Any]) -> None:
        """A ``content_block_start`` whose block is ``tool_use``."""
        entry = self._entry(index)
        entry["name"] = str(block.get("name") or "")
        if block.get("input"):
            self.inputs[index] = block["input"]

    def anthropic_delta(self, index: Any, partial_json: str) -> None:
        self._entry(index)["arguments_json"] += partial_json

    def result(self) -> list[dict[str, str]]:
        out = []
        for index, entry in self.calls.items():
            args = entry["arguments_json"]
            if not args and index in self.inputs:  # whole input in the start block
                args = json.dumps(self.inputs[index])
            out.append({"name": entry["name"], "arguments_json": args})
        return out


def conversation_messages(
    protocol: str, conversation: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A multi-turn conversation in each protocol's own message shapes.

    ``conversation`` is neutral: ``{"role": "user" | "system", "content"}``, an assistant turn
    ``{"role": "assistant", "content", "tool_calls": [{"id", "name", "arguments_json"}]}`` and
    a tool result ``{"role": "tool", "tool_call_id", "name", "content"}``. OpenAI's Chat
    Completions takes the assistant's ``tool_calls`` (``type: function``, arguments as a JSON
    string) and ``role: tool`` messages with their ``tool_call_id``; Anthropic's Messages API
    takes ``tool_use`` blocks (``input`` an object) in the assistant message and the results
    as ``tool_result`` blocks in the next user message, which also holds the next user text
    (roles alternate; an assistant text may not be empty); OpenAI's Responses API takes
    ``function_call`` and ``function_call_output`` input items.
    """
    if protocol == "anthropic":
        return _anthropic_messages(conversation)
    if protocol == "responses":
        return _responses_items(conversation)
    out: list[dict[str, Any]] = []
    for m in conversation:
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments_json"] or "{}"},
                }
                for c in m["tool_calls"]
            ]
            out.append(
                {"role": "assistant", "content": m.get("content") or None, "tool_calls": calls}
            )
        elif m["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        else:
            out.append({"role": m["role"], "content": m.get("content") or ""})
    return out


def _arguments(arguments_json: str) -> dict[str, Any]:
    """A call's arguments as an object; a model's invalid JSON becomes ``{}`` on the wire (the
    call itself was already answered with the error)."""
    try:
        value = json.loads(arguments_json or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _anthropic_messages(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in conversation:
        if m["role"] == "system":  # the client lifts it into ``system``
            out.append({"role": "system", "content": m["content"]})
            continue
        if m["role"] == "assistant":
            blocks: list[dict[str, Any]] = []
            if m.get("content"):
                blocks.append({"type": "text", "text": m["content"]})
            for c in m.get("tool_calls") or []:
                arguments = _arguments(c["arguments_json"])
                blocks.append(
                    {"type": "tool_use", "id": c["id"], "name": c["name"], "input": arguments}
                )
            out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": "-"}]})
            continue
        if m["role"] == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": m["content"],
            }
        else:
            block = {"type": "text", "text": m["content"]}
        if out and out[-1]["role"] == "user":
            out[-1]["content"].append(block)
        else:
            out.append({"role": "user", "content": [block]})
    return out


def _responses_items(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in conversation:
        if m["role"] == "assistant":
            if m.get("content"):
                out.append({"role": "assistant", "content": m["content"]})
            for c in m.get("tool_calls") or []:
                out.append(
                    {
                        "type": "function_call",
                        "call_id": c["id"],
                        "name": c["name"],
                        "arguments": c["arguments_json"] or "{}",
                    }
                )
        elif m["role"] == "tool":
            out.append(
                {
                    "type": "function_call_output",
                    "call_id": m["tool_call_id"],
                    "output": m["content"],
                }
            )
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out
