"""The plain records that cross the boundary between ``evals`` and ``monitor``.

They are dataclasses rather than model instances so that the client, the statistics and the
demo vendor can be used and tested without Django. ``monitor`` copies them into rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

Protocol = Literal["openai", "anthropic", "responses"]  # responses: OpenAI Responses API
# body fields the probe sets itself: ``extra_body`` may not override them (the request would no
# longer be the one measured, or not streamed); refused at validation, naming the field
PROBE_FIELDS = frozenset(
    {
        "model",
        "messages",
        "system",
        "stream",
        "stream_options",
        "temperature",
        "max_tokens",
        "max_completion_tokens",
        "max_output_tokens",
        "input",
        "tools",
        "tool_choice",
        "response_format",
    }
)
# request headers the client sets itself (the key, the framing, ``Accept-Encoding: identity``)
PROBE_HEADERS = frozenset(
    {
        "authorization",
        "x-api-key",
        "api-key",
        "accept",
        "accept-encoding",
        "content-type",
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "host",
    }
)

# Error classes of a failed sample (never dropped, always classified; docs/measures.md).
# The two tiers of a pair, in the order pages and exports list them: the one definition (evals
# cannot import Django; monitor takes it from here).
TIERS: tuple[str, str] = ("fast", "base")
ERROR_CLASSES = (
    "connect",  # DNS, refused, TLS: the request never reached an HTTP server
    "timeout",  # connect/read/overall deadline passed
    "http_status",  # a non-2xx answer other than 429
    "rate_limited",  # HTTP 429 (Retry-After kept); counted apart in availability
    "malformed_stream",  # not SSE, not JSON, an HTML page, a JSON error body in a 200
    "stream_incomplete",  # the connection ended before the end-of-stream marker
    "body_too_large",  # the response grew past the endpoint's byte limit
    "protocol",  # anything else the client could not interpret
    "empty_stream",  # a 2xx stream that ended with no token and no finish reason
    "store_error",  # the measured record could not be saved; kept as this failed sample
    "refusal",  # the model declined (OpenAI delta.refusal, Anthropic stop_reason refusal)
    "unsupported_encoding",  # a compressed body in an encoding the client cannot decode
)
# a served tier as kept: long enough for a model id reported as the tier (Fireworks'
# "accounts/fireworks/models/…-fast"), whose difference is often at the end
TIER_CHARS = 200
TEXT_KEPT_CHARS = 65_536  # of an oversized body's text: a bounded prefix, said so in the record
REPLACEMENT = "\ufffd"


def storable(value: Any) -> Any:
    """``value`` made storable in PostgreSQL text and jsonb columns (and SQLite alike).

    PostgreSQL refuses NUL in text (``A string literal cannot contain NUL``) and jsonb refuses
    ``\\u0000``; UTF-8 cannot encode a lone surrogate (a JSON ``"\\ud800"`` decodes to one);
    jsonb refuses NaN and infinities. One rule for all three: what cannot be stored becomes
    U+FFFD, the Unicode replacement character (meant for exactly this: "a character was here
    that could not be kept"; it never looks like padding or a space), or ``None`` for a
    non-finite float inside JSON. A valid surrogate pair that arrived split in two code units
    becomes its character. Applied to strings, and recursively to dict keys and values, lists
    and tuples; every other value is returned as is.
    """
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", REPLACEMENT)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # surrogates: pairs rejoined, lone ones replaced
            value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, dict):
        return {storable(k): _json_storable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_storable(v) for v in value]
    return value


def _json_storable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return storable(value)


@dataclass(frozen=True)
class EndpointSpec:
    """Where and how to send requests. ``api_key`` is resolved by the caller from the
    environment variable named on the endpoint and is never persisted."""

    name: str
    protocol: Protocol
    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 120.0
    max_body_bytes: int = 4_000_000
    extra_body: dict[str, Any] = field(default_factory=dict)
    # headers or (dotted) JSON keys reporting the tier served, besides the protocol's own
    served_tier_fields: tuple[str, ...] = ()
    # request headers beside the client's own (e.g. ``anthropic-beta``), values resolved; the
    # values that came from environment variables are in ``secrets``, scrubbed like the key
    extra_headers: dict[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    # reasoning models: OpenAI's GPT-5 and o-series take ``max_completion_tokens`` and only
    # their default temperature
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    send_temperature: bool = True
    # reasoning as part of the request shape: OpenAI ``reasoning_effort`` (Chat Completions) or
    # ``reasoning.effort`` (Responses); Anthropic extended thinking's ``budget_tokens`` (the
    # request then has no temperature: thinking takes only the default)
    reasoning_effort: str = ""
    thinking_budget: int | None = None
    # connect to public addresses only, each address the host resolves to checked and then the
    # one connected to (``evals.addresses``); ``monitor`` sets it for every endpoint that is
    # not local. Off by default: a script or a test aims this library at its own servers.
    public_only: bool = False


@dataclass(frozen=True)
class ChatRequest:
    """One request of a case: the same object is sent to both tiers. ``messages`` are in the
    endpoint's protocol's shape (an agent episode's tool calls and results included:
    :func:`evals.toolcalls.conversation_messages`)."""

    messages: list[dict[str, Any]]
    max_tokens: int = 256
    temperature: float = 0.0
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    # functions offered to the model: {name, description, parameters (JSON Schema)}; sent as
    # OpenAI ``tools`` or Anthropic ``tools`` (tool_use) by :mod:`evals.toolcalls`
    tools: list[dict[str, Any]] = field(default_factory=list)
    # OpenAI ``response_format`` ({"type": "json_object"} or a json_schema), for structured cases
    response_format: dict[str, Any] | None = None


@dataclass
class TimingRecord:
    """One request's full record (a *sample* in the glossary), times in milliseconds from t0.

    t0 is ``time.perf_counter()`` just before the request is sent (docs/measures.md).
    """

    ok: bool
    error_class: str | None = None
    error_message: str = ""
    http_status: int | None = None
    retry_after_s: float | None = None
    started_at: float = 0.0  # wall clock (time.time()) at t0, for the timeline
    connect_ms: float | None = None  # until the TCP/TLS connection was ready (trace events)
    headers_ms: float | None = None  # until response headers were read
    ttfb_ms: float | None = None  # first response body byte
    ttft_ms: float | None = None  # first token-bearing SSE event (reasoning included)
    ttft_answer_ms: float | None = None  # first answer token: text, refusal or tool call
    e2e_ms: float | None = None  # last token-bearing SSE event
    tpot_ms: float | None = None  # (E2E - TTFT) / (output tokens - 1)
    chunk_gaps_ms: list[float] = field(default_factory=list)  # between token-bearing events
    chunk_tokens: list[int] = field(default_factory=list)  # estimated tokens per such event
    text: str = ""
    reasoning_text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # server's usage.completion_tokens
    estimated_tokens: int | None = None  # our tokenizer estimate over the whole text
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens
    model_id: str = ""
    system_fingerprint: str = ""
    served_tier: str = ""  # the tier the vendor says it served (service_tier), "" if unsaid
    headers: dict[str, str] = field(default_factory=dict)
    logprobs: list[dict[str, Any]] | None = None  # per token: token, logprob, top_logprobs
    server_timings: dict[str, Any] | None = None  # llama.cpp's ``timings`` object if sent
    # assembled from the streamed deltas: [{"name": ..., "arguments_json": ...}] in call order
    tool_calls: list[dict[str, str]] = field(default_factory=list)
    # tools the vendor ran itself (Anthropic server_tool_use, mcp_tool_use): [{"type", "name"}]
    server_tools: list[dict[str, str]] = field(default_factory=list)
    fallback_from: str = ""  # the model the vendor said it fell back from (Anthropic fallback)

    @property
    def output_tokens(self) -> int | None:
        """Server count when reported, else our estimate (docs/measures.md: usage first)."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        return self.estimated_tokens


@dataclass(frozen=True)
class CaseSpec:
    """One case of a suite, as shipped in ``evals.suites`` or read from a config file.

    ``scenario`` names the speed scenario (see ``evals.suites.SCENARIOS``); ``unit_tests`` is
    plain Python (asserts, or ``def test_*`` functions) run against the generated code in the
    sandbox; ``constraints`` are verifiable checks on the text. ``reference_solution`` and
    ``weak_solution`` exist only for built-in coding cases: the simulated demo vendor answers
    with them (a distilled model fails the hard ones), never the real tiers.
    """

    key: str
    messages: list[dict[str, str]]
    category: str = "general"  # general | long_tail | coding | constraints
    scenario: str = "mid"
    max_tokens: int = 256
    difficulty: str = "easy"  # easy | hard (long-tail, where distilled models lose)
    unit_tests: str = ""
    entry_point: str = ""
    constraints: list[dict[str, Any]] = field(default_factory=list)
    reference_solution: str = ""
    weak_solution: str = ""
    # tool-call cases (evals.benchmarks.bfcl): the functions offered, and the possible answers
    # [{function name: {param: [acceptable values]}}]; ``[]`` = no call is correct (irrelevance)
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_answers: list[dict[str, dict[str, list[Any]]]] | None = None
    response_format: dict[str, Any] | None = None  # structured-output cases
    # multi-turn agent tasks (evals.benchmarks.bfcl_multi_turn): where the task is read from,
    # {"source": "bfcl", "id": "multi_turn_base_0", "category": "multi_turn_base",
    #  "involved_classes": [...], "turns": n}; the whole task is
    # evals.benchmarks.bfcl_multi_turn.task_for(case)
    agent: dict[str, Any] | None = None


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    version: int
    description: str
    cases: list[CaseSpec]


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of running generated code against a case's unit tests."""

    passed: bool
    n_tests: int = 0
    n_failed: int = 0
    # syntax | timeout | memory | crash | no_code | sandbox | sandbox_unavailable
    error_class: str | None = None
    output: str = ""  # truncated stdout+stderr, for the samples table
    duration_ms: float = 0.0
    isolation: str = "none"  # bwrap | unsafe-subprocess | none (nothing ran)
    # tests decided inside the process that ran the candidate (its code could forge them)
    n_in_child: int = 0
