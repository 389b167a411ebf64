"""Presets: each real vendor tier's request shape and served-tier signal, as data.

A vendor's fast tier is asked for in its own words (a body field, a header, a model suffix or
another model id) and reported in its own place (a body field, a header, the model id). A
preset names all of that once, so an endpoint is configured by ``preset: openai-fast`` plus
its model and key, and a vendor's rename is one edit here and one fixture
(``tests/data/presets/<name>.json``, the exact body and headers the client sends).

Applying a preset (``resolve``) fills an endpoint's fields; fields the user gave win, and
dicts are merged key by key with the user's keys over the preset's. The preset's ``claim`` is
the vendor's promise as data (metric, form, value, percentile, wording), read by the claim
checks; nothing here measures.

Field names were checked against the vendors' public documentation (late 2026):

- OpenAI Fast mode (was Priority processing): ``service_tier: "priority"`` (``"fast"`` selects
  the same) on Chat Completions and the Responses API; the response's ``service_tier`` is the
  tier that served: ``"priority"`` (GPT-5.x; GPT-6 models report ``"fast"``: set
  ``expected_tier: fast`` there), ``"default"`` when downgraded. "Up to 2.5x faster".
- OpenAI Ultrafast: ``service_tier: "ultrafast"``, Responses API (HTTP or WebSocket
  ``response.create``); a request that falls back is billed and reported at the tier served.
- OpenAI reasoning models (GPT-5, o-series): ``max_completion_tokens``, no ``temperature``
  (only the default is taken), ``reasoning_effort`` (Chat) or ``reasoning.effort``
  (Responses).
- Anthropic fast mode: body ``speed: "fast"``, header ``anthropic-beta:
  fast-mode-2026-02-01`` (preview models); "up to 2.5x higher output tokens per second ...
  not time to first token"; ``usage.speed`` says which speed served (``usage.service_tier``
  stays ``"standard"``, so the named field must win).
- Gemini priority (OpenAI-compatible endpoint): ``service_tier: "priority"``; the response
  header ``x-gemini-service-tier`` is ``"standard"`` when the priority limit was exceeded.
- OpenRouter: body ``provider: {order, only, allow_fallbacks, quantizations, sort}``; the
  ``:nitro`` model suffix sorts by throughput; each chunk's ``provider`` names who served, by
  display name ("Groq", "OpenAI"), not by the request's slug.
- Groq: ``service_tier: performance | on_demand | flex | auto`` (on_demand is the default;
  flex fails fast with HTTP 498 ``capacity_exceeded``); usage in ``x_groq.usage``. Where the
  response reports the tier served is not documented: an OpenAI-style ``service_tier`` is
  read when present; without it samples count as unreported, never as downgraded.
- Fireworks, Together, Moonshot: the fast tier is another model id; the model id is the only
  served-tier signal.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from evals.records import Protocol

ClaimMetric = Literal["output_tps", "ttft", "e2e"]
ClaimForm = Literal["factor", "floor"]


@dataclass(frozen=True)
class Claim:
    """The vendor's promise: a ``factor`` over the base tier (2.5 = "2.5x") or a ``floor``
    at a percentile ("99 % of requests > 80 tok/s": value 80, percentile 99 — for TTFT and
    E2E a floor is a ceiling in ms; percentile None: the vendor names none), in the vendor's
    own ``wording``."""

    metric: ClaimMetric
    form: ClaimForm
    value: float
    percentile: float | None = None
    wording: str = ""


@dataclass(frozen=True)
class Preset:
    """One vendor tier's request shape and served-tier signal (see the module docstring)."""

    name: str
    title: str
    vendor: str
    role: Literal["fast", "base", "any"]
    protocol: Protocol
    base_url: str
    api_key_env: str
    body: Mapping[str, Any] = field(default_factory=dict)  # merged into extra_body
    headers: Mapping[str, str] = field(default_factory=dict)  # merged into extra_headers
    served_tier_fields: tuple[str, ...] = ()  # headers or dotted JSON keys
    expected_tier: str = ""
    # "model": the expected tier is the endpoint's model id (tiers that are model ids)
    expected_from: Literal["", "model"] = ""
    downgrade: str = ""  # what the vendor reports when it served another tier
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    send_temperature: bool = True
    reasoning_effort: str = ""  # OpenAI reasoning models; "" = the model's default
    model_hint: str = ""  # an example model id
    model_suffix: str = ""  # appended to the model when missing (OpenRouter ":nitro")
    base: str = ""  # a fast preset's base-tier counterpart, for pairs
    claim: Claim | None = None
    note: str = ""  # one line for people: what to set, what to watch


_OPENAI_KEY = "OPENAI_API_KEY"
_OPENAI_CLAIM = Claim("output_tps", "factor", 2.5, None, "up to 2.5x faster speeds")
_ANTHROPIC_BETA = {"anthropic-beta": "fast-mode-2026-02-01"}
_ANTHROPIC_SPEED = ("usage.speed", "message.usage.speed")  # message_delta, message_start


def _standard_of(fast: Preset, name: str, title: str, tier: str, **changes: Any) -> Preset:
    """A fast preset's base-tier counterpart: the same request but for the tier asked for
    (``body`` = ``{service_tier: tier}`` unless ``changes`` gives another), so only the tier
    differs between the two endpoints of a pair."""
    fields: dict[str, Any] = {
        "body": {"service_tier": tier},
        "expected_tier": tier,
        "downgrade": "",
        "base": "",
        "claim": None,
        "note": "",
        **changes,
    }
    return replace(fast, name=name, title=title, role="base", **fields)


def _model_id(name: str, title: str, vendor: str, base_url: str, key: str, **more: Any) -> Preset:
    """A vendor whose fast tier is another model id: the model id is the only served-tier
    signal, and the expected tier is the endpoint's model."""
    return Preset(
        name=name,
        title=title,
        vendor=vendor,
        role="any",
        protocol="openai",
        base_url=base_url,
        api_key_env=key,
        served_tier_fields=("model",),
        expected_from="model",
        downgrade="another model id",
        **more,
    )


_OPENAI_FAST = Preset(
    name="openai-fast",
    title="OpenAI Fast mode (Chat Completions)",
    role="fast",
    protocol="openai",
    api_key_env=_OPENAI_KEY,
    body={"service_tier": "priority"},
    expected_tier="priority",
    downgrade="default",
    model_hint="gpt-5.6-sol",
    base="openai-standard",
    claim=_OPENAI_CLAIM,
    note="GPT-6 models report service_tier 'fast': set expected_tier: fast there.",
    vendor="OpenAI",
    base_url="https://api.openai.com/v1",
)
_OPENAI_FAST_REASONING = replace(
    _OPENAI_FAST,
    name="openai-fast-reasoning",
    title="OpenAI Fast mode, reasoning model (GPT-5, o-series)",
    reasoning_effort="low",
    base="openai-standard-reasoning",
    note="max_completion_tokens, no temperature: the model takes only its default.",
    max_tokens_field="max_completion_tokens",
    send_temperature=False,
)
_OPENAI_FAST_RESPONSES = replace(
    _OPENAI_FAST,
    name="openai-fast-responses",
    title="OpenAI Fast mode (Responses API)",
    protocol="responses",
    base="openai-standard-responses",
    note="",
)
_ANTHROPIC_FAST = Preset(
    name="anthropic-fast",
    title="Anthropic fast mode",
    role="fast",
    protocol="anthropic",
    api_key_env="ANTHROPIC_API_KEY",
    body={"speed": "fast"},
    headers=_ANTHROPIC_BETA,
    served_tier_fields=_ANTHROPIC_SPEED,
    expected_tier="fast",
    downgrade="standard",
    model_hint="claude-opus-5-5",
    base="anthropic-standard",
    claim=Claim(
        "output_tps",
        "factor",
        2.5,
        None,
        "up to 2.5x higher output tokens per second (not time to first token)",
    ),
    vendor="Anthropic",
    base_url="https://api.anthropic.com/v1",
)
_GEMINI_PRIORITY = Preset(
    name="gemini-priority",
    title="Gemini Priority (OpenAI-compatible endpoint)",
    role="fast",
    protocol="openai",
    api_key_env="GEMINI_API_KEY",
    body={"service_tier": "priority"},
    served_tier_fields=("x-gemini-service-tier",),
    expected_tier="priority",
    downgrade="standard",
    model_hint="gemini-3.5-flash",
    base="gemini-standard",
    vendor="Google",
    base_url="https://generativelanguage.googleapis.com/v1beta/openai",
)
_GROQ_PERFORMANCE = Preset(
    name="groq-performance",
    title="Groq Performance tier",
    role="fast",
    protocol="openai",
    api_key_env="GROQ_API_KEY",
    body={"service_tier": "performance"},
    expected_tier="performance",
    downgrade="on_demand",
    model_hint="llama-3.3-70b-versatile",
    base="groq-on-demand",
    note="Groq does not document a served-tier field: without one, samples are unreported.",
    vendor="Groq",
    base_url="https://api.groq.com/openai/v1",
)
_OPENROUTER_PINNED = Preset(
    name="openrouter-pinned",
    title="OpenRouter, pinned to one provider",
    role="any",
    protocol="openai",
    api_key_env="OPENROUTER_API_KEY",
    body={"provider": {"allow_fallbacks": False}},
    served_tier_fields=("provider",),
    downgrade="another provider",
    model_hint="meta-llama/llama-3.3-70b-instruct",
    note="Set extra_body.provider.only (slugs, e.g. [groq]) and expected_tier to the "
    "provider's name as OpenRouter reports it (e.g. Groq).",
    vendor="OpenRouter",
    base_url="https://openrouter.ai/api/v1",
)

_ALL = [
    _OPENAI_FAST,
    _standard_of(_OPENAI_FAST, "openai-standard", "OpenAI Standard (Chat Completions)", "default"),
    _OPENAI_FAST_REASONING,
    _standard_of(
        _OPENAI_FAST_REASONING,
        "openai-standard-reasoning",
        "OpenAI Standard, reasoning model (GPT-5, o-series)",
        "default",
    ),
    _OPENAI_FAST_RESPONSES,
    _standard_of(
        _OPENAI_FAST_RESPONSES,
        "openai-standard-responses",
        "OpenAI Standard (Responses API)",
        "default",
        model_hint="gpt-6-astra",
    ),
    replace(
        _OPENAI_FAST_RESPONSES,
        name="openai-ultrafast",
        title="OpenAI Ultrafast (Responses API only)",
        body={"service_tier": "ultrafast"},
        expected_tier="ultrafast",
        model_hint="gpt-6-astra",
        claim=Claim("output_tps", "factor", 8.0, None, "up to 8x faster speeds than Standard"),
        note="Measured over HTTP SSE; OpenAI recommends WebSockets for many short turns.",
    ),
    _ANTHROPIC_FAST,
    _standard_of(
        _ANTHROPIC_FAST,
        "anthropic-standard",
        "Anthropic standard speed",
        "standard",
        body={"speed": "standard"},
        note="The same request as anthropic-fast but for speed, so only the speed differs.",
    ),
    _GEMINI_PRIORITY,
    _standard_of(
        _GEMINI_PRIORITY,
        "gemini-standard",
        "Gemini Standard (OpenAI-compatible endpoint)",
        "standard",
        body={},
    ),
    _OPENROUTER_PINNED,
    replace(
        _OPENROUTER_PINNED,
        name="openrouter-nitro",
        title="OpenRouter :nitro (fastest provider first)",
        role="fast",
        body={},
        downgrade="",
        model_suffix=":nitro",
        base="openrouter-pinned",
        note="Any provider may serve: the provider is recorded, no tier is expected.",
    ),
    _GROQ_PERFORMANCE,
    _standard_of(_GROQ_PERFORMANCE, "groq-on-demand", "Groq On-demand tier", "on_demand", note=""),
    _model_id(
        "fireworks-model",
        "Fireworks (the fast tier is a model id, e.g. …-fast)",
        "Fireworks",
        "https://api.fireworks.ai/inference/v1",
        "FIREWORKS_API_KEY",
        model_hint="accounts/fireworks/models/llama-v3p3-70b-instruct",
        claim=Claim("output_tps", "floor", 100.0, None, "100+ tokens per second"),
        note="Use the fast model id on the fast endpoint and the standard one on base.",
    ),
    _model_id(
        "together-model",
        "Together (Turbo = FP8: the tier is the model id)",
        "Together",
        "https://api.together.xyz/v1",
        "TOGETHER_API_KEY",
        model_hint="meta-llama/Llama-3.3-70B-Instruct-Turbo",
    ),
    _model_id(
        "moonshot-model",
        "Moonshot (the turbo tier is a model id)",
        "Moonshot",
        "https://api.moonshot.ai/v1",
        "MOONSHOT_API_KEY",
        model_hint="kimi-k2-turbo-preview",
    ),
    _model_id(
        "cerebras-model",
        "Cerebras, a direct provider of an open model",
        "Cerebras",
        "https://api.cerebras.ai/v1",
        "CEREBRAS_API_KEY",
        model_hint="llama-3.3-70b",
    ),
]
PRESETS: dict[str, Preset] = {p.name: p for p in _ALL}


@dataclass(frozen=True)
class PairPreset:
    """Two presets that make a pair: a vendor's fast tier and its base tier, or the same
    open model at two providers (a direct fast provider against a reference)."""

    name: str
    title: str
    fast: str
    base: str


PAIR_PRESETS: tuple[PairPreset, ...] = (
    *(
        PairPreset(p.name, p.title + " vs " + PRESETS[p.base].title, p.name, p.base)
        for p in _ALL
        if p.role == "fast" and p.base
    ),
    PairPreset(
        "same-model-two-providers",
        "The same open model at two providers (a direct fast provider vs a reference)",
        "cerebras-model",
        "together-model",
    ),
    PairPreset(
        "openrouter-two-providers",
        "The same model through OpenRouter, pinned to two providers",
        "openrouter-pinned",
        "openrouter-pinned",
    ),
)


def presets_for_pair() -> list[dict[str, Any]]:
    """The pair choices for onboarding, as plain data: name, title, and each tier's preset
    (name, title, protocol, base_url, api_key_env, model_hint, note)."""

    def tier(name: str) -> dict[str, Any]:
        p = PRESETS[name]
        keys = ("name", "title", "protocol", "base_url", "api_key_env", "model_hint", "note")
        return {k: getattr(p, k) for k in keys}

    return [
        {"name": pp.name, "title": pp.title, "fast": tier(pp.fast), "base": tier(pp.base)}
        for pp in PAIR_PRESETS
    ]


def unknown_preset(name: str) -> str:
    """The message for a preset name that is not in ``PRESETS``."""
    return f"unknown preset {name!r} (known: {', '.join(sorted(PRESETS))})"


def merged(preset: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` over ``preset``, key by key; nested dicts merged the same way, anything else
    (lists too) taken whole from ``given``."""
    out = copy.deepcopy(dict(preset))
    for key, value in given.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def resolve(name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The endpoint fields preset ``name`` sets, with the ``given`` fields winning: scalars
    from ``given`` when present, ``extra_body``/``extra_headers`` merged (``merged``), the
    model suffix appended when missing, the expected tier taken from the model when the tier
    is a model id. Raises KeyError (``unknown_preset``) for an unknown name."""
    if name not in PRESETS:
        raise KeyError(unknown_preset(name))
    p = PRESETS[name]
    out: dict[str, Any] = {
        "protocol": p.protocol,
        "base_url": p.base_url,
        "api_key_env": p.api_key_env,
        "served_tier_fields": list(p.served_tier_fields),
        "expected_tier": p.expected_tier,
        "max_tokens_field": p.max_tokens_field,
        "send_temperature": p.send_temperature,
        "reasoning_effort": p.reasoning_effort,
    }
    out = {k: given.get(k, v) for k, v in out.items()}
    out["extra_body"] = merged(p.body, given.get("extra_body") or {})
    out["extra_headers"] = merged(p.headers, given.get("extra_headers") or {})
    model = given.get("model")
    if isinstance(model, str) and model:
        if p.model_suffix and not model.endswith(p.model_suffix):
            model += p.model_suffix
        out["model"] = model
        if p.expected_from == "model" and "expected_tier" not in given:
            out["expected_tier"] = model
    return out
