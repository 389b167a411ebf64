"""A SIMULATED server that speaks each real vendor's tier shape, for the presets' tests.

Each vendor lives under its own path, ``http://127.0.0.1:<port>/<vendor>/v1`` (vendor one of
``VENDORS``), and answers a streamed request with the served-tier signal that vendor
documents, read from the request's own preset fields:

- ``openai``: Chat Completions and the Responses API; ``service_tier`` "priority"/"fast" or
  "ultrafast" (Responses only; Chat answers 400) is reported as served in the chunks'
  ``service_tier`` (Responses: ``response.completed``); a downgrade reports "default".
- ``anthropic``: Messages; ``speed: "fast"`` needs the ``anthropic-beta: fast-mode-2026-02-01``
  header (400 without it, as on preview models); ``usage.speed`` is "fast", or "standard" when
  downgraded, while ``usage.service_tier`` stays "standard"; fast requests get an
  ``anthropic-fast-*`` rate-limit header.
- ``gemini``: the OpenAI-compatible endpoint; header ``x-gemini-service-tier`` is "priority"
  when served so, "standard" otherwise.
- ``openrouter``: ``provider.only``/``order`` pins a provider (reported by display name in each
  chunk's ``provider``), ``:nitro`` picks the fastest; a pinned provider that is "down" (a
  downgrade) falls back to another unless ``allow_fallbacks`` is false (then 503).
- ``groq``: ``service_tier`` "performance" reported as served ("on_demand" when downgraded),
  usage only in ``x_groq.usage``.
- ``fireworks``, ``together``, ``moonshot``, ``cerebras``: the tier is the model id; a
  downgraded request answers from another model id (``<model>-standard``).

Only requests for a premium tier are downgraded, exactly ``downgrade_share`` of them in arrival
order per vendor (request n is downgraded when ⌊n·share⌋ moves), so tests can assert the rate.
Every response carries ``x-tierwatch-simulated: true``. The text is a short fixed sentence;
``python -m evals.vendors.tiers --port 8300``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

VENDORS = (
    "openai",
    "anthropic",
    "gemini",
    "openrouter",
    "groq",
    "fireworks",
    "together",
    "moonshot",
    "cerebras",
)
MODEL_ID_VENDORS = frozenset({"fireworks", "together", "moonshot", "cerebras"})
FAST_MODEL_MARKS = ("fast", "turbo")  # model-id tiers: a premium model id says so
PROVIDER_NAMES = {"groq": "Groq", "cerebras": "Cerebras", "together": "Together"}
NITRO_PROVIDER, FALLBACK_PROVIDER = "Cerebras", "DeepInfra"
WORDS = ("Hello", " from", " a", " simulated", " vendor", " tier", ".")
STATE = web.AppKey("tiers_state", dict)


@dataclass
class Counter:
    """Premium requests seen, to downgrade exactly ``share`` of them."""

    share: float
    seen: int = 0
    downgraded: list[bool] = field(default_factory=list)

    def next_downgraded(self) -> bool:
        self.seen += 1
        down = math.floor(self.seen * self.share) > math.floor((self.seen - 1) * self.share)
        self.downgraded.append(down)
        return down


def _premium(vendor: str, body: dict[str, Any]) -> bool:
    tier = str(body.get("service_tier") or "")
    model = str(body.get("model") or "")
    if vendor == "anthropic":
        return body.get("speed") == "fast"
    if vendor == "openrouter":
        return bool(_pinned(body)) or model.endswith(":nitro")
    if vendor in MODEL_ID_VENDORS:
        return any(mark in model.lower() for mark in FAST_MODEL_MARKS)
    return tier in ("priority", "fast", "ultrafast", "performance")


def _pinned(body: dict[str, Any]) -> list[str]:
    provider = body.get("provider") or {}
    return list(provider.get("only") or provider.get("order") or [])


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "invalid_request"}}, status=status
    )


def _served(vendor: str, body: dict[str, Any], down: bool) -> dict[str, Any]:
    """What this vendor reports for this request: {"tier": body value or "", "header": ...,
    "provider": ..., "model": ...}."""
    model = str(body.get("model") or "")
    tier = str(body.get("service_tier") or "")
    if vendor == "openai":
        asked = {"fast": "priority", "": "default", "auto": "default"}.get(tier, tier)
        return {"tier": "default" if down else asked}
    if vendor == "groq":
        return {"tier": "on_demand" if down or not tier or tier == "auto" else tier}
    if vendor == "gemini":
        served = "priority" if tier == "priority" and not down else "standard"
        return {"header": {"x-gemini-service-tier": served}}
    if vendor == "openrouter":
        pinned = _pinned(body)
        if model.endswith(":nitro"):
            name = FALLBACK_PROVIDER if down else NITRO_PROVIDER
        elif pinned and not down:
            name = PROVIDER_NAMES.get(pinned[0], pinned[0].title())
        else:
            name = FALLBACK_PROVIDER
        return {"provider": name}
    if vendor in MODEL_ID_VENDORS:
        return {"model": f"{model}-standard" if down else model}
    return {}


def _chunk(model: str, served: dict[str, Any], delta: dict[str, Any], **extra: Any) -> bytes:
    obj: dict[str, Any] = {
        "id": "chatcmpl-tiers",
        "object": "chat.completion.chunk",
        "model": served.get("model", model),
        "choices": [{"index": 0, "delta": delta, "finish_reason": extra.pop("finish", None)}],
        **extra,
    }
    if served.get("tier"):
        obj["service_tier"] = served["tier"]
    if served.get("provider"):
        obj["provider"] = served["provider"]
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def _open(request: web.Request, headers: dict[str, str] | None = None) -> web.StreamResponse:
    resp = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "x-tierwatch-simulated": "true",
            **(headers or {}),
        }
    )
    await resp.prepare(request)
    return resp


async def chat(request: web.Request) -> web.StreamResponse:
    vendor = request.match_info["vendor"]
    body = await request.json()
    if body.get("service_tier") == "ultrafast" and vendor == "openai":
        return _error(400, "service_tier 'ultrafast' is available on the Responses API only")
    down = _premium(vendor, body) and request.app[STATE][vendor].next_downgraded()
    provider = body.get("provider") or {}
    if (
        vendor == "openrouter"
        and down
        and _pinned(body)
        and provider.get("allow_fallbacks") is False
    ):
        return _error(503, "no allowed provider is available (allow_fallbacks: false)")
    served = _served(vendor, body, down)
    model = str(body.get("model") or "")
    resp = await _open(request, served.get("header"))
    for word in WORDS:
        await resp.write(_chunk(model, served, {"content": word}))
    usage = {"prompt_tokens": 5, "completion_tokens": len(WORDS), "total_tokens": 5 + len(WORDS)}
    extra: dict[str, Any] = {"x_groq": {"usage": usage}} if vendor == "groq" else {"usage": usage}
    await resp.write(_chunk(model, served, {}, finish="stop", **extra))
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


def _event(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


async def responses(request: web.Request) -> web.StreamResponse:
    vendor = request.match_info["vendor"]
    body = await request.json()
    down = _premium(vendor, body) and request.app[STATE][vendor].next_downgraded()
    served = _served(vendor, body, down)
    asked = str(body.get("service_tier") or "default")
    resp = await _open(request)
    base = {"id": "resp_tiers", "model": body.get("model"), "status": "in_progress"}
    await resp.write(_event("response.created", {"response": {**base, "service_tier": asked}}))
    for word in WORDS:
        await resp.write(_event("response.output_text.delta", {"delta": word}))
    usage = {"input_tokens": 5, "output_tokens": len(WORDS), "total_tokens": 5 + len(WORDS)}
    final = {**base, "status": "completed", "service_tier": served["tier"], "usage": usage}
    await resp.write(_event("response.completed", {"response": final}))
    await resp.write_eof()
    return resp


async def messages(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    fast = body.get("speed") == "fast"
    if fast and "fast-mode-2026-02-01" not in request.headers.get("anthropic-beta", ""):
        return _error(400, "speed: 'fast' needs the anthropic-beta header fast-mode-2026-02-01")
    down = fast and request.app[STATE]["anthropic"].next_downgraded()
    usage = {"input_tokens": 5, "output_tokens": 1, "service_tier": "standard"}
    usage["speed"] = "fast" if fast and not down else "standard"
    limits = {"anthropic-fast-output-tokens-remaining": "9000"} if fast else {}
    resp = await _open(request, limits)
    message = {
        "id": "msg_tiers",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
    }
    await resp.write(
        _event("message_start", {"message": {**message, "content": [], "usage": usage}})
    )
    block = {"index": 0, "content_block": {"type": "text", "text": ""}}
    await resp.write(_event("content_block_start", block))
    for word in WORDS:
        delta = {"index": 0, "delta": {"type": "text_delta", "text": word}}
        await resp.write(_event("content_block_delta", delta))
    await resp.write(_event("content_block_stop", {"index": 0}))
    end = {"delta": {"stop_reason": "end_turn"}, "usage": {**usage, "output_tokens": len(WORDS)}}
    await resp.write(_event("message_delta", end))
    await resp.write(_event("message_stop", {}))
    await resp.write_eof()
    return resp


def create_app(downgrade_share: float = 0.0) -> web.Application:
    app = web.Application()
    app[STATE] = {v: Counter(downgrade_share) for v in VENDORS}
    vendors = "{vendor:" + "|".join(VENDORS) + "}"
    app.router.add_post(f"/{vendors}/v1/chat/completions", chat)
    app.router.add_post(f"/{vendors}/v1/responses", responses)
    app.router.add_post("/anthropic/v1/messages", messages)
    return app


@contextmanager
def serve_in_thread(downgrade_share: float = 0.0) -> Iterator[str]:
    """Serve on an ephemeral port in a background thread; yields ``http://127.0.0.1:<port>``
    (append ``/<vendor>/v1``)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True, name="tiers-vendor")
    thread.start()

    async def start() -> tuple[web.AppRunner, int]:
        runner = web.AppRunner(create_app(downgrade_share), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return runner, runner.addresses[0][1]

    runner, port = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="SIMULATED vendor tiers (each vendor's shape).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8300)
    parser.add_argument("--downgrade-share", type=float, default=0.0)
    args = parser.parse_args()
    web.run_app(create_app(args.downgrade_share), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
