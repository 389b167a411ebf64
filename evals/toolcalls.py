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
