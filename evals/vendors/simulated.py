"""The SIMULATED demo vendor: an OpenAI- and Anthropic-compatible streaming server.

Nothing here is a real model. It exists so that tierwatch can be demonstrated and tested end to
end without a key: every response carries ``x-tierwatch-simulated: true`` and ``/v1/models``
says "simulated". Three tiers play the story tierwatch is built to tell apart:

- ``demo-base``: the base tier, ~40 tokens/s, one token per chunk, no prefix cache.
- ``demo-fast``: the *same* simulated weights served faster: ~5x decode in bursts of 1-5 tokens
  per chunk (speculative decoding), a prefix cache (repeated long prompts skip prefill and
  report ``cached_tokens``), priority queueing, and rare near-tie flips late in the text at
  temperature 0 (batch-variant numerics) — a same-model verdict should come out. It reports
  ``service_tier: "priority"``; with ``downgrade_share`` > 0, that share of its streams beyond
  ``downgrade_above`` in flight is served on the base tier's stack and reports ``"default"``,
  as OpenAI's priority processing may do under load (Anthropic: ``usage.service_tier``).
- ``demo-distilled``: a smaller model sold as fast: other wording, and for built-in coding
  cases of difficulty "hard" it answers the case's ``weak_solution`` (fails the unit tests);
  on benchmark cases (HumanEval, BFCL tool calls, tierwatch's data files) it loses at the
  rates of :mod:`evals.benchmarks.simulate`, and tool calls are streamed as tool-call deltas.
  Multi-turn agent tasks (BFCL's, with tool results sent back) are answered turn by turn with
  the ground truth's calls by the base family, and lost on later turns by the distilled one
  (:func:`evals.benchmarks.simulate.agent_reply`).

Text: a toy language model whose "logits" are hashes of (weights family, prompt, step). At
temperature 0 it takes the argmax, so text is deterministic per (model, prompt); above 0 it
samples softmax(logits / T), so base-vs-base samples are draws from one distribution and
distilled-vs-base from two. A request ``seed`` makes sampling reproducible per serving stack.

Faults for tests, by model name or header ``x-tierwatch-fault``: ``demo-broken-html`` (HTML 502),
``demo-ratelimit`` (429, Retry-After: 2), ``demo-garbage`` (200 SSE with non-JSON data),
``demo-truncated`` (connection closed mid-stream), ``demo-slow`` (keep-alives, no token for an
hour), ``demo-empty`` (200 SSE, no token, no finish reason, then ``[DONE]``), ``demo-huge``
(5 MB of text in 64 KiB chunks). OpenAI protocol only: ``demo-nul`` (text with a NUL and a lone
surrogate, ``"\\u0000"`` and ``"\\ud800"`` in the JSON), ``demo-echokey`` (the request's
``Authorization`` value echoed in ``x-request-id``, ``server``, the model id, the fingerprint
and the text, as sent, lower-cased, URL-encoded and base64). ``time_scale`` multiplies every
scripted delay (tests use 0), except ``demo-slow``'s.

Logprobs (OpenAI ``logprobs``/``top_logprobs``): a function of (weights family, prompt, token)
with a little per-request jitter, so the two tiers on the same weights agree up to noise. A
tier's weights can be switched at run time to a "quantized" variant (``POST
/v1/_tierwatch/variant`` with ``{"model": "demo-fast", "variant": "quantized"}``): the
runners-up's logprobs move by a few hundredths of a nat, every chosen token stays the same.

Run: ``python -m evals.vendors.simulated --port 8811``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import dataclasses
import hashlib
import json
import math
import random
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web

from evals.suites import find_case
from evals.tokens import token_pieces


@dataclass(frozen=True)
class Tier:
    """One simulated model as served: its weights family and its serving stack's latency."""

    model: str
    family: str  # "base" or "distilled": which simulated weights
    fingerprint: str
    description: str
    queue_ms: tuple[float, float]  # uniform wait before admission
    prefill_ms: float  # fixed part of prefill
    prefill_per_token_ms: float  # per uncached prompt token
    step_ms: float  # one decode step (median; lognormal jitter)
    burst: tuple[float, ...] = (1.0,)  # weights of 1, 2, ... tokens per step
    prefix_cache: bool = False
    flips: bool = False  # near-tie argmax flips at temperature 0 (numerics)
    service_tier: str = "default"  # what the response reports serving


TIERS = {
    t.model: t
    for t in (
        Tier(
            "demo-base",
            "base",
            "fp_demo_base",
            "SIMULATED base tier (~40 tok/s)",
            (5, 40),
            40,
            0.30,
            25.0,
        ),
        Tier(
            "demo-fast",
            "base",
            "fp_demo_fast",
            "SIMULATED fast tier: same weights, speculative decoding, prefix cache",
            (1, 8),
            20,
            0.15,
            14.0,
            (0.2, 0.25, 0.25, 0.2, 0.1),
            True,
            True,
            "priority",
        ),
        Tier(
            "demo-distilled",
            "distilled",
            "fp_demo_distilled",
            "SIMULATED distilled model sold as fast (~180 tok/s, weaker on hard cases)",
            (1, 8),
            10,
            0.06,
            5.5,
        ),
    )
}
FAULT_MODELS = {
    "demo-broken-html": "html",
    "demo-ratelimit": "ratelimit",
    "demo-garbage": "garbage",
    "demo-truncated": "truncated",
    "demo-slow": "slow",
    "demo-empty": "empty",
    "demo-huge": "huge",
    "demo-nul": "nul",
    "demo-echokey": "echokey",
}
CACHE_BLOCK = 64  # tokens per prefix-cache block (vLLM-style block hashes)
CACHE_MIN_TOKENS = 256  # shorter prompts are never cached
SIMULATED = {"x-tierwatch-simulated": "true"}
VENDOR: web.AppKey[Vendor] = web.AppKey("vendor")

_TEMPLATES = {
    "base": [
        "{K} is best understood by looking at how it interacts with {j}.",
        "A careful approach starts with {k}: measure it first, then change one thing at a time.",
        "In practice, {k} matters most when {j} is under load.",
        "One common mistake is to treat {k} and {j} as independent.",
        "The short answer is that {k} depends on the context around it.",
        "To make this concrete, consider a small example involving {k} and {j}.",
        "If {k} misbehaves, check {j} before anything else.",
        "Keeping {k} explicit makes the behaviour predictable and easy to test.",
        "Document the assumptions behind {k} so that others can verify them.",
        "Note that {j} can change over time, so revisit the choice of {k} regularly.",
        "There is a trade-off here: {k} buys simplicity at the cost of {j}.",
        "A good first step is to write down what {k} should guarantee.",
    ],
    "distilled": [
        "{K} is important.",
        "You should think about {k} and {j}.",
        "Basically, {k} works by using {j}.",
        "It is good to test {k}.",
        "There are many ways to handle {k}.",
        "Overall, {k} is a useful idea.",
        "For example, {k} can be used with {j}.",
        "Make sure {k} is correct.",
        "{K} and {j} are related.",
        "In summary, {k} helps a lot.",
    ],
}
_CODE_INTROS = {
    "base": [
        "Here is a solution:",
        "Here is an implementation that passes the tests:",
        "This implementation handles the edge cases:",
    ],
    "distilled": ["Sure! Here is the code:", "Here you go:"],
}
_STOPWORDS = frozenset(
    "about above after again against also because been before being below between both could "
    "does doing down during each from further have having here into itself just more most "
    "other over same should some such than that their them then there these they this those "
    "through under until very what when where which while will with would your yours write "
    "please explain using make given return work works show tell describe many much like "
    "want need does".split()
)


def _h(*key: object) -> int:
    digest = hashlib.blake2b("|".join(map(str, key)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _logits(n: int, *key: object) -> list[float]:
    rnd = random.Random(_h(*key))
    return [rnd.gauss(0.0, 1.5) for _ in range(n)]


def _choose(logits: list[float], temperature: float, rng: random.Random, flip: bool) -> int:
    """Argmax at temperature 0 (the runner-up on a near tie if ``flip``), else a softmax draw."""
    order = sorted(range(len(logits)), key=lambda i: -logits[i])
    if temperature <= 0:
        if flip and len(order) > 1 and logits[order[0]] - logits[order[1]] < 0.05:
            return order[1]
        return order[0]
    top = logits[order[0]]
    weights = [math.exp((x - top) / temperature) for x in logits]
    return rng.choices(range(len(logits)), weights=weights)[0]


def _keywords(text: str) -> list[str]:
    words: list[str] = []
    for raw in text.lower().replace("_", " ").split():
        word = "".join(c for c in raw if c.isalnum() or c == "-").strip("-")
        if len(word) >= 4 and word.isascii() and word not in _STOPWORDS and word not in words:
            words.append(word)
    return words[:8] or ["this topic", "the details"]


def compose(
    tier: Tier, messages: list[dict[str, Any]], temperature: float, rng: random.Random
) -> str:
    """The full answer of ``tier`` to ``messages`` (before ``max_tokens`` truncation)."""
    fam = tier.family
    key = _h(json.dumps(messages, sort_keys=True, default=str))
    perturb = tier.fingerprint if temperature > 0 else ""  # tiny logit noise per serving stack

    def pick(n: int, step: int, slot: str, late: bool) -> int:
        logits = _logits(n, fam, key, step, slot)
        if perturb:
            noise = _logits(n, perturb, key, step, slot)
            logits = [x + 0.02 * e for x, e in zip(logits, noise, strict=True)]
        return _choose(logits, temperature, rng, tier.flips and late)

    case = find_case(messages)
    bench = _benchmark_case(messages) if case is None else None
    answer: str | None = _simulate().answer_text(bench, fam) if bench is not None else None
    if answer is not None:
        return answer
    if case is not None and case.reference_solution:
        code = case.reference_solution
        if fam == "distilled" and case.difficulty == "hard" and case.weak_solution:
            code = case.weak_solution
        intro = _CODE_INTROS[fam][pick(len(_CODE_INTROS[fam]), 0, "intro", False)]
        return f"{intro}\n\n```python\n{code.rstrip()}\n```\n"

    last_user: dict[str, Any] = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    kws = _keywords(_content_text(last_user.get("content", "")))
    templates = _TEMPLATES[fam]
    target = 3 + _h(fam, key, "length") % (4 if fam == "base" else 3)
    sentences: list[str] = []
    for step in range(12):
        if step >= 2:
            stop = _logits(2, fam, key, step, "stop")
            stop[1] += 1.5 * (step - target)
            if _pick_stop(stop, temperature, rng):
                break
        late = step >= 2
        template = templates[pick(len(templates), step, "t", late)]
        k = kws[pick(len(kws), step, "k", False)]
        j = kws[pick(len(kws), step, "j", False)] if len(kws) > 1 else "the rest"
        if j == k:
            j = "the rest of the system"
        sentences.append(template.format(k=k, K=k[:1].upper() + k[1:], j=j))
        if step == 2 and target >= 5:
            sentences.append("\n\n")
    return " ".join(sentences).replace(" \n\n ", "\n\n")


def _pick_stop(logits: list[float], temperature: float, rng: random.Random) -> bool:
    return _choose(logits, temperature, rng, False) == 1


def _simulate() -> Any:
    from evals.benchmarks import simulate

    return simulate


def _benchmark_case(messages: list[dict[str, Any]], tools: Any = None) -> Any:
    """A benchmark case (HumanEval, BFCL, tierwatch's data files) the request comes from."""
    return _simulate().find_case(messages, tools)


def _content_text(content: Any) -> str:
    if isinstance(content, list):  # content blocks
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content)


class PrefixCache:
    """Block-hash prefix cache (as vLLM and the big vendors do): a prompt's leading blocks of
    ``CACHE_BLOCK`` tokens hit if an earlier prompt had exactly the same prefix."""

    def __init__(self, capacity: int = 50_000) -> None:
        self.blocks: OrderedDict[int, None] = OrderedDict()
        self.capacity = capacity

    def lookup_and_store(self, pieces: list[str]) -> int:
        if len(pieces) < CACHE_MIN_TOKENS:
            return 0
        cached, chain, hit = 0, 0, True
        for start in range(0, len(pieces) - CACHE_BLOCK + 1, CACHE_BLOCK):
            chain = _h(chain, "".join(pieces[start : start + CACHE_BLOCK]))
            if hit and chain in self.blocks:
                cached += CACHE_BLOCK
                self.blocks.move_to_end(chain)
            else:
                hit = False
                self.blocks[chain] = None
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)
        return cached


@dataclass
class Plan:
    """One answer and its timeline (seconds, already scaled)."""

    pieces: list[str]
    chunks: list[list[str]]
    finish_reason: str
    prompt_tokens: int
    cached_tokens: int
    queue_s: float
    prefill_s: float
    step_s: list[float]
    tool_calls: list[dict[str, str]] = field(default_factory=list)  # [{name, arguments_json}]


BORDER_SHARE = 0.15  # of short prompts whose temperature-0 first token is a near tie
BORDER_ALTERNATIVES = (" I", " the", "Hello", " 1", ".", " a")
QUANTIZED_BORDER_SHIFT = 1.0  # logit shift of a border input's near tie under "quantized"


def border_token(
    family: str, messages: list[dict[str, Any]], first: str, variant: str, rng: random.Random
) -> str:
    """The first token at temperature 0 of a one-token answer. For a share ``BORDER_SHARE`` of
    prompts (a function of the weights family and the prompt) the top two tokens are a near
    tie that the serving stack's numerics decide, request by request: a *border input* (B3IT,
    ``evals.stats.border``). The "quantized" variant moves each tie's odds by
    ``QUANTIZED_BORDER_SHIFT`` in logit; every other prompt answers ``first``, always."""
    key = json.dumps(messages, sort_keys=True, default=str)
    draw = random.Random(_h("border", family, key))
    if draw.random() >= BORDER_SHARE:
        return first
    logit = draw.uniform(-1.5, 1.5)
    alternative = BORDER_ALTERNATIVES[draw.randrange(len(BORDER_ALTERNATIVES))]
    if alternative == first:
        alternative = "?"
    if variant == "quantized":
        logit += QUANTIZED_BORDER_SHIFT if draw.random() < 0.5 else -QUANTIZED_BORDER_SHIFT
    return first if rng.random() < 1 / (1 + math.exp(-logit)) else alternative


class Vendor:
    def __init__(
        self, seed: int, time_scale: float, downgrade_share: float = 0.0, downgrade_above: int = 8
    ) -> None:
        self.rng = random.Random(seed)
        self.time_scale = time_scale
        self.cache = PrefixCache()
        self.counter = 0
        self.downgrade_share, self.downgrade_above = downgrade_share, downgrade_above
        self.in_flight = 0  # OpenAI streams being served
        # model → weights variant switched at run time (``POST /v1/_tierwatch/variant``):
        # "quantized" moves the logprobs a little and keeps every chosen token
        self.variants: dict[str, str] = {}

    def admit(self, tier: Tier) -> Tier:
        """The stack that serves this request: a priority request beyond ``downgrade_above``
        in flight is, with probability ``downgrade_share``, served on the base tier's stack
        (same weights) and reports ``"default"``."""
        if (
            tier.service_tier == "priority"
            and self.downgrade_share
            and self.in_flight > self.downgrade_above
            and self.rng.random() < self.downgrade_share
        ):
            base = TIERS["demo-base"]
            return replace(
                base,
                model=tier.model,
                family=tier.family,
                fingerprint=tier.fingerprint,
                flips=tier.flips,
            )
        return tier

    def plan(
        self,
        tier: Tier,
        messages: list[dict[str, Any]],
        max_tokens: int,
        temperature: float,
        seed: int | None,
        tools: Any = None,
    ) -> Plan:
        prompt = "".join(f"{m.get('role')}: {_content_text(m.get('content'))}\n" for m in messages)
        prompt_pieces = token_pieces(prompt)
        cached = self.cache.lookup_and_store(prompt_pieces) if tier.prefix_cache else 0
        if seed is not None:
            sampler = random.Random(_h("sample", seed, prompt, tier.fingerprint))
        else:
            sampler = random.Random(self.rng.getrandbits(64))
        calls: list[dict[str, str]] = []
        agent = _simulate().agent_reply(messages, tools, tier.family) if tools else None
        bench = _benchmark_case(messages, tools) if tools and agent is None else None
        if agent is not None:  # a step of an agent episode: the turn's calls, or its end
            calls, text = agent
            pieces = token_pieces(text)
        elif bench is not None:  # a tool case: calls (streamed as deltas after the text)
            calls, text = _simulate().tool_calls(bench, tier.family)
            pieces = token_pieces(text)
        else:
            pieces = token_pieces(compose(tier, messages, temperature, sampler))
            if max_tokens == 1 and temperature <= 0 and pieces:
                variant = self.variants.get(tier.model, "")
                pieces[0] = border_token(tier.family, messages, pieces[0], variant, sampler)
        finish = "stop"
        if len(pieces) > max_tokens:
            pieces, finish = pieces[: max(0, max_tokens)], "length"
        chunks: list[list[str]] = []
        i = 0
        while i < len(pieces):
            k = self.rng.choices(range(1, len(tier.burst) + 1), weights=tier.burst)[0]
            chunks.append(pieces[i : i + k])
            i += k
        s = self.time_scale / 1000.0
        steps = [tier.step_ms * math.exp(self.rng.gauss(0, 0.2)) * s for _ in chunks]
        if calls:
            finish = "tool_calls"
        return Plan(
            pieces,
            chunks,
            finish,
            len(prompt_pieces),
            cached,
            self.rng.uniform(*tier.queue_ms) * s,
            (tier.prefill_ms + tier.prefill_per_token_ms * (len(prompt_pieces) - cached)) * s,
            steps,
            calls,
        )


async def _sleep(seconds: float) -> None:
    await asyncio.sleep(seconds if seconds > 0 else 0)


def _error(
    status: int,
    message: str,
    kind: str,
    anthropic: bool = False,
    headers: dict[str, str] | None = None,
) -> web.Response:
    body = (
        {"type": "error", "error": {"type": kind, "message": message}}
        if anthropic
        else {"error": {"message": message, "type": kind, "code": None}}
    )
    return web.json_response(body, status=status, headers=headers)


async def _fault(request: web.Request, fault: str, anthropic: bool) -> web.StreamResponse:
    if fault == "html":
        html = "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1>"
        return web.Response(status=502, text=html + "</body></html>", content_type="text/html")
    if fault == "ratelimit":
        return _error(
            429,
            "Rate limit reached (simulated)",
            "rate_limit_error",
            anthropic,
            {"Retry-After": "2"},
        )
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    if fault == "garbage":
        await resp.write(b"data: <<not json>> this is garbage\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp
    if fault in ("empty", "huge"):
        role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        await resp.write(b"data: " + json.dumps(role).encode() + b"\n\n")
        for _ in range(80 if fault == "huge" else 0):  # 80 x 64 KiB: 5 MB
            piece = {"choices": [{"index": 0, "delta": {"content": "x" * 65_536}}]}
            await resp.write(b"data: " + json.dumps(piece).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp
    if fault == "slow":
        await resp.write(b": keep-alive\n\n")
        try:
            for _ in range(3600):  # an hour, far beyond any sane timeout
                await asyncio.sleep(1.0)
                await resp.write(b": keep-alive\n\n")
        except (ConnectionError, RuntimeError):
            pass  # the client gave up
        return resp
    raise ValueError(f"unknown fault {fault!r}")


def _tool_tokens(plan: Plan) -> int:
    return len(token_pieces("".join(c["name"] + c["arguments_json"] for c in plan.tool_calls)))


def _argument_pieces(arguments: str) -> list[str]:
    """A call's arguments in three streamed pieces, as real servers split them."""
    cut = [0, len(arguments) // 3, 2 * len(arguments) // 3, len(arguments)]
    return [arguments[a:b] for a, b in zip(cut, cut[1:], strict=False) if b > a]


def _openai_chunk(
    tier: Tier,
    rid: str,
    created: int,
    delta: dict[str, Any],
    finish: str | None = None,
    **extra: Any,
) -> bytes:
    choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
    if "logprobs" in extra:
        choice["logprobs"] = extra.pop("logprobs")
    obj = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": tier.model,
        "system_fingerprint": tier.fingerprint,
        "service_tier": tier.service_tier,
        "choices": [choice],
        **extra,
    }
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


QUANTIZED_SHIFT = 0.05  # nats added to the runners-up: an 8-bit quantization's size of change
LOGPROB_NOISE = 0.01  # nats of per-request jitter: a real stack's batch-variant numerics


def _logprobs(
    pieces: list[str],
    top_n: int,
    family: str = "base",
    prompt_key: int = 0,
    variant: str = "",
    rng: random.Random | None = None,
) -> dict[str, Any]:
    """Logprobs for streamed pieces: a function of (weights family, prompt, piece), so two
    tiers on the same weights report the same numbers up to ``LOGPROB_NOISE``; the
    "quantized" variant raises the runners-up by ``QUANTIZED_SHIFT``, never enough to change
    the chosen token (its margin is ≥ 1.5 nats)."""
    content = []
    for p in pieces:
        draw = random.Random(_h("lp", family, prompt_key, p))
        lp = -abs(draw.gauss(0, 0.4))
        gaps = [1.5 + abs(draw.gauss(0, 1.0)) + i for i in range(3)]
        top: list[dict[str, Any]] = [{"token": p, "logprob": lp}]
        for alt, gap in zip((" the", " a", ","), gaps, strict=True):
            alt_lp = lp - gap + (QUANTIZED_SHIFT if variant == "quantized" else 0.0)
            top.append({"token": alt, "logprob": alt_lp})
        if rng is not None:
            for t in top:
                t["logprob"] += rng.gauss(0, LOGPROB_NOISE)
            top[1:] = [t for t in top[1:] if t["logprob"] < top[0]["logprob"]]
        content.append({"token": p, "logprob": top[0]["logprob"], "top_logprobs": top[:top_n]})
    return {"content": content}


def _usage(plan: Plan) -> dict[str, Any]:
    out = len(plan.pieces) + _tool_tokens(plan)
    return {
        "prompt_tokens": plan.prompt_tokens,
        "completion_tokens": out,
        "total_tokens": plan.prompt_tokens + out,
        "prompt_tokens_details": {"cached_tokens": plan.cached_tokens},
    }


async def _parse(
    request: web.Request, anthropic: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]] | web.Response:
    try:
        body = await request.json()
    except ValueError:
        return _error(400, "body is not JSON", "invalid_request_error", anthropic)
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return _error(400, "messages must be a list of objects", "invalid_request_error", anthropic)
    if anthropic and body.get("system"):
        messages = [{"role": "system", "content": _content_text(body["system"])}, *messages]
    return body, messages


def _tier_or_fault(request: web.Request, body: dict[str, Any]) -> Tier | str | None:
    fault = request.headers.get("x-tierwatch-fault") or FAULT_MODELS.get(str(body.get("model")))
    return fault or TIERS.get(str(body.get("model")))


async def chat_completions(request: web.Request) -> web.StreamResponse:
    parsed = await _parse(request, anthropic=False)
    if isinstance(parsed, web.Response):
        return parsed
    body, messages = parsed
    tier = _tier_or_fault(request, body)
    if isinstance(tier, str):
        if tier in ("truncated", "nul", "echokey"):
            return await _openai_stream(
                request, TIERS["demo-base"], body, messages, cut=tier == "truncated", fault=tier
            )
        return await _fault(request, tier, anthropic=False)
    if tier is None:
        return _error(404, f"model {body.get('model')!r} not found", "invalid_request_error")
    vendor: Vendor = request.app[VENDOR]
    if body.get("stream"):
        vendor.in_flight += 1
        try:
            return await _openai_stream(request, vendor.admit(tier), body, messages)
        finally:
            vendor.in_flight -= 1
    plan = vendor.plan(
        tier,
        messages,
        int(body.get("max_tokens") or 256),
        float(body.get("temperature", 1.0)),
        body.get("seed"),
    )
    await _sleep(plan.queue_s + plan.prefill_s + sum(plan.step_s))
    vendor.counter += 1
    return web.json_response(
        {
            "id": f"chatcmpl-demo-{vendor.counter}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": tier.model,
            "system_fingerprint": tier.fingerprint,
            "service_tier": tier.service_tier,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "".join(plan.pieces)},
                    "finish_reason": plan.finish_reason,
                }
            ],
            "usage": _usage(plan),
        },
        headers={"x-request-id": f"req_demo_{vendor.counter}"},
    )


async def _openai_stream(
    request: web.Request,
    tier: Tier,
    body: dict[str, Any],
    messages: list[dict[str, Any]],
    cut: bool = False,
    fault: str = "",
) -> web.StreamResponse:
    vendor: Vendor = request.app[VENDOR]
    headers, inject = {}, ""
    if fault == "nul":
        inject = "NUL\x00 and lone surrogate \ud800: "
    elif fault == "echokey":
        auth = request.headers.get("Authorization", "")
        b64 = base64.b64encode(auth.removeprefix("Bearer ").encode()).decode()
        inject = f"{auth} {auth.lower()} {urllib.parse.quote(auth)} {b64} "
        headers = {"x-request-id": auth, "server": f"echo/{auth}"}
        tier = dataclasses.replace(tier, model=auth, fingerprint=auth.lower())
    plan = vendor.plan(
        tier,
        messages,
        int(body.get("max_tokens") or 256),
        float(body.get("temperature", 1.0)),
        body.get("seed"),
        body.get("tools"),
    )
    vendor.counter += 1
    rid, created = f"chatcmpl-demo-{vendor.counter}", int(time.time())
    top_n = int(body.get("top_logprobs") or 0) if body.get("logprobs") else -1
    prompt_key = _h(json.dumps(messages, sort_keys=True, default=str))
    variant = vendor.variants.get(str(body.get("model")), "")
    await _sleep(plan.queue_s)
    resp = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "x-request-id": f"req_demo_{vendor.counter}",
            **headers,
        }
    )
    await resp.prepare(request)
    try:
        await resp.write(_openai_chunk(tier, rid, created, {"role": "assistant", "content": ""}))
        await _sleep(plan.prefill_s)
        last = len(plan.chunks) - 1
        for i, (chunk, step) in enumerate(zip(plan.chunks, plan.step_s, strict=True)):
            if cut and i >= len(plan.chunks) // 2:
                assert request.transport is not None
                request.transport.abort()  # a cut connection: no [DONE], no chunked terminator
                return resp
            extra = (
                {"logprobs": _logprobs(chunk, top_n, tier.family, prompt_key, variant, vendor.rng)}
                if top_n >= 0
                else {}
            )
            finish = plan.finish_reason if i == last and not plan.tool_calls else None
            text = (inject if i == 0 else "") + "".join(chunk)
            await resp.write(_openai_chunk(tier, rid, created, {"content": text}, finish, **extra))
            await _sleep(step if i < last else 0)
        for n, call in enumerate(plan.tool_calls):  # delta.tool_calls[i]: name, then pieces
            head = {
                "index": n,
                "id": f"call_demo_{n}",
                "type": "function",
                "function": {"name": call["name"], "arguments": ""},
            }
            await resp.write(_openai_chunk(tier, rid, created, {"tool_calls": [head]}))
            for piece in _argument_pieces(call["arguments_json"]):
                await _sleep(tier.step_ms * vendor.time_scale / 1000.0)
                await resp.write(
                    _openai_chunk(
                        tier,
                        rid,
                        created,
                        {"tool_calls": [{"index": n, "function": {"arguments": piece}}]},
                    )
                )
        if plan.tool_calls:
            await resp.write(_openai_chunk(tier, rid, created, {}, plan.finish_reason))
        elif not plan.chunks:
            await resp.write(_openai_chunk(tier, rid, created, {}, plan.finish_reason))
        options = body.get("stream_options") or {}
        if options.get("include_usage"):
            obj = {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": tier.model,
                "system_fingerprint": tier.fingerprint,
                "service_tier": tier.service_tier,
                "choices": [],
                "usage": _usage(plan),
            }
            await resp.write(b"data: " + json.dumps(obj).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
    except ConnectionError:
        pass  # the client went away
    return resp


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


async def messages_endpoint(request: web.Request) -> web.StreamResponse:
    """Anthropic's Messages API (stream and not), for testing the client's anthropic protocol."""
    parsed = await _parse(request, anthropic=True)
    if isinstance(parsed, web.Response):
        return parsed
    body, messages = parsed
    tier = _tier_or_fault(request, body)
    if isinstance(tier, str):
        if tier == "truncated":
            tier = TIERS["demo-base"]
            body = {**body, "_cut": True}
        else:
            return await _fault(request, tier, anthropic=True)
    if tier is None:
        return _error(404, f"model {body.get('model')!r} not found", "not_found_error", True)
    vendor: Vendor = request.app[VENDOR]
    plan = vendor.plan(
        tier,
        messages,
        int(body.get("max_tokens") or 256),
        float(body.get("temperature", 1.0)),
        None,
        body.get("tools"),
    )
    vendor.counter += 1
    mid = f"msg_demo_{vendor.counter}"
    stop = {"length": "max_tokens", "tool_calls": "tool_use"}.get(plan.finish_reason, "end_turn")
    usage = {
        "input_tokens": plan.prompt_tokens - plan.cached_tokens,
        "cache_read_input_tokens": plan.cached_tokens,
        "cache_creation_input_tokens": 0,
        "service_tier": "priority" if tier.service_tier == "priority" else "standard",
    }
    headers = {"request-id": f"req_demo_{vendor.counter}"}
    if not body.get("stream"):
        await _sleep(plan.queue_s + plan.prefill_s + sum(plan.step_s))
        return web.json_response(
            {
                "id": mid,
                "type": "message",
                "role": "assistant",
                "model": tier.model,
                "content": [{"type": "text", "text": "".join(plan.pieces)}],
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {**usage, "output_tokens": len(plan.pieces)},
            },
            headers=headers,
        )
    await _sleep(plan.queue_s)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", **headers})
    await resp.prepare(request)
    try:
        await resp.write(
            _sse(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": mid,
                        "type": "message",
                        "role": "assistant",
                        "content": [],
                        "model": tier.model,
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": {**usage, "output_tokens": 1},
                    },
                },
            )
        )
        await resp.write(
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
        )
        await resp.write(_sse("ping", {"type": "ping"}))
        await _sleep(plan.prefill_s)
        for i, (chunk, step) in enumerate(zip(plan.chunks, plan.step_s, strict=True)):
            if body.get("_cut") and i >= len(plan.chunks) // 2:
                assert request.transport is not None
                request.transport.abort()
                return resp
            await resp.write(
                _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": "".join(chunk)},
                    },
                )
            )
            await _sleep(step if i < len(plan.chunks) - 1 else 0)
        await resp.write(_sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
        for n, call in enumerate(plan.tool_calls, 1):  # tool_use blocks after the text block
            await resp.write(
                _sse(
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": n,
                        "content_block": {
                            "type": "tool_use",
                            "id": f"toolu_demo_{n}",
                            "name": call["name"],
                            "input": {},
                        },
                    },
                )
            )
            for piece in _argument_pieces(call["arguments_json"]):
                await resp.write(
                    _sse(
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": n,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                    )
                )
            await resp.write(_sse("content_block_stop", {"type": "content_block_stop", "index": n}))
        await resp.write(
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": len(plan.pieces) + _tool_tokens(plan)},
                },
            )
        )
        await resp.write(_sse("message_stop", {"type": "message_stop"}))
        await resp.write_eof()
    except ConnectionError:
        pass
    return resp


async def set_variant(request: web.Request) -> web.Response:
    """Switch a tier's weights at run time: ``{"model": "demo-fast", "variant":
    "quantized"}`` (``""`` switches back). What a silent vendor change looks like: the
    same name, the same answers at temperature 0, slightly different logprobs."""
    try:
        body = await request.json()
        model, variant = str(body["model"]), str(body.get("variant") or "")
    except (ValueError, KeyError, TypeError):
        return _error(400, 'body must be {"model": ..., "variant": ...}', "invalid_request_error")
    if model not in TIERS or variant not in ("", "quantized"):
        return _error(
            400, f"unknown model {model!r} or variant {variant!r}", "invalid_request_error"
        )
    vendor: Vendor = request.app[VENDOR]
    vendor.variants[model] = variant
    return web.json_response({"model": model, "variant": variant})


async def models(request: web.Request) -> web.Response:
    return web.json_response(
        {
            "object": "list",
            "data": [
                {
                    "id": t.model,
                    "object": "model",
                    "created": 0,
                    "owned_by": "tierwatch-simulated",
                    "description": t.description,
                    "simulated": True,
                }
                for t in TIERS.values()
            ],
        }
    )


async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "simulated": True})


async def _mark_simulated(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(SIMULATED)


def create_app(
    seed: int = 0, time_scale: float = 1.0, downgrade_share: float = 0.0, downgrade_above: int = 8
) -> web.Application:
    """The demo vendor as an aiohttp application (``time_scale`` 0 removes every delay)."""
    app = web.Application()
    app[VENDOR] = Vendor(seed, time_scale, downgrade_share, downgrade_above)
    app.on_response_prepare.append(_mark_simulated)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/v1/messages", messages_endpoint)
    app.router.add_post("/v1/_tierwatch/variant", set_variant)
    return app


async def start(
    host: str = "127.0.0.1", port: int = 0, seed: int = 0, time_scale: float = 1.0, **downgrade: Any
) -> tuple[web.AppRunner, int]:
    """Serve in the running loop; returns the runner (``await runner.cleanup()``) and port."""
    runner = web.AppRunner(
        create_app(seed, time_scale, **downgrade),
        handle_signals=False,
        access_log=None,
        shutdown_timeout=1.0,
    )
    await runner.setup()
    site = web.TCPSite(runner, host, port, backlog=1024)
    await site.start()
    return runner, runner.addresses[0][1]


@contextmanager
def serve_in_thread(seed: int = 0, time_scale: float = 1.0, **downgrade: Any) -> Iterator[str]:
    """Run the vendor on an ephemeral port in a background thread; yields its ``/v1`` URL."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True, name="demo-vendor")
    thread.start()
    runner, port = asyncio.run_coroutine_threadsafe(
        start(seed=seed, time_scale=time_scale, **downgrade), loop
    ).result(timeout=10)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="SIMULATED demo vendor (OpenAI/Anthropic API).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8811)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument(
        "--downgrade-share",
        type=float,
        default=0.0,
        help="share of fast streams served on the base stack under load",
    )
    parser.add_argument(
        "--downgrade-above",
        type=int,
        default=8,
        help="streams in flight beyond which fast ones may be downgraded",
    )
    args = parser.parse_args()
    app = create_app(args.seed, args.time_scale, args.downgrade_share, args.downgrade_above)
    web.run_app(
        app,
        host=args.host,
        port=args.port,
        print=lambda *_: print(
            f"SIMULATED demo vendor on http://{args.host}:{args.port}/v1", flush=True
        ),
    )


if __name__ == "__main__":
    main()
