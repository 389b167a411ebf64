"""The plain records of a multi-turn agent task: the task, the episode a tier played, its score.

Why apart from :mod:`evals.records`: an agent task is several requests with state between them,
so its records nest (an episode holds steps, a step holds tool calls) where a case's sample is
one request. They are dataclasses with ``to_json``/``from_json`` so ``monitor`` stores an
episode and its score as JSON beside the samples, and a page replays them without ``evals``
running anything again. Every text a vendor or an environment sent is scrubbed and bounded
before it is put here (:func:`evals.scrub.scrub`, :func:`evals.records.storable`).

Words (docs/measures.md, "Multi-turn agent tasks"): a *task* is one BFCL multi-turn entry; a
*turn* is one user request of it (the user messages of that turn, answered by the model until it
answers without a tool call); a *step* is one model request inside a turn; an *episode* is one
tier's play of the whole task.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# why an episode ended (docs/measures.md): every turn answered | a turn used its step limit |
# the vendor failed a request | the environment failed (a result over its caps, a call over its
# time or memory, the sandbox itself) | the episode's request limit or wall clock ran out
StopReason = Literal["done", "step_limit", "error", "environment_error", "timeout"]
STOP_REASONS: tuple[str, ...] = ("done", "step_limit", "error", "environment_error", "timeout")
# a tool call's own outcome, "" when the environment answered (the answer may be BFCL's
# "Error during execution: ..." text: that is the environment's reply, fed back like any other)
CallError = Literal["", "bad_arguments", "unknown_tool", "environment"]


@dataclass(frozen=True)
class AgentTask:
    """One multi-turn task as read from the benchmark, everything a tier's episode needs.

    ``turns[i]`` are the user messages of turn ``i``; a turn of ``[]`` is BFCL's held-back-
    function turn (miss_func): its tools are added then and the user says so
    (:data:`evals.benchmarks.bfcl_multi_turn.ADDED_FUNCTIONS_PROMPT`). ``tools`` are offered from
    the first turn, ``added_tools[i]`` from turn ``i`` on. Tool names are API-safe;
    ``methods`` maps each to the environment's method name. ``ground_truth[i]`` are BFCL's call
    strings for turn ``i`` (``[]``: no call is expected).
    """

    key: str  # "bfcl/multi_turn_base_0", the case key
    bfcl_id: str  # "multi_turn_base_0"
    category: str  # tierwatch category: "agent/base", "agent/miss_func", ...
    turns: list[list[dict[str, str]]]
    tools: list[dict[str, Any]]
    added_tools: dict[int, list[dict[str, Any]]]
    methods: dict[str, str]  # API-safe tool name -> environment method name
    involved_classes: list[str]
    initial_config: dict[str, Any]
    ground_truth: list[list[str]]
    long_context: bool = False


@dataclass
class ToolCall:
    """One tool call a model made, and what the environment answered."""

    name: str  # as the model sent it
    arguments_json: str  # as the model sent it (bounded)
    call_id: str  # the id the conversation gave it (``t<turn>s<step>c<i>``)
    result: str = ""  # the environment's answer, scrubbed and bounded
    error: CallError = ""


@dataclass
class Step:
    """One model request in a turn: the numbers of its TimingRecord, the calls it made."""

    turn: int
    step: int  # 0-based within the turn
    ok: bool
    error_class: str | None = None
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None  # server's count, else the estimate
    finish_reason: str | None = None
    text: str = ""  # the model's answer text (scrubbed, bounded)
    calls: list[ToolCall] = field(default_factory=list)


@dataclass
class Episode:
    """One tier's play of one task.

    ``states[i]`` is the environment's state after turn ``i`` (per involved class, its public
    attributes as JSON): scoring compares it with the ground truth's; a turn the episode never
    finished has none.
    """

    task_key: str
    tier: str
    steps: list[Step] = field(default_factory=list)
    stop: StopReason = "done"
    stop_detail: str = ""  # why, in words (scrubbed)
    turns_done: int = 0
    states: list[dict[str, Any]] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return len(self.steps)

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens or 0 for s in self.steps)

    @property
    def output_tokens(self) -> int:
        return sum(s.output_tokens or 0 for s in self.steps)

    def calls(self, turn: int) -> list[list[ToolCall]]:
        """Turn ``turn``'s calls, one list per step that made any."""
        return [s.calls for s in self.steps if s.turn == turn and s.calls]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Episode:
        steps = [
            Step(**{**s, "calls": [ToolCall(**c) for c in s.get("calls", [])]})
            for s in data.get("steps", [])
        ]
        return cls(**{**data, "steps": steps})


@dataclass
class TurnScore:
    """One turn checked as BFCL checks it (docs/measures.md): state and response."""

    turn: int
    checked: bool  # False: the ground truth expects no call this turn (BFCL skips it)
    state_ok: bool = True
    response_ok: bool = True
    # per class, per differing attribute: {"model": ..., "ground_truth": ...} (bounded)
    differences: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # ground-truth results the model lacks


@dataclass
class TaskScore:
    """An episode scored against the ground truth.

    ``passed`` is BFCL's verdict: every turn played (no force-quit), a call in every turn that
    expects one, and at each such turn the state and the responses match. ``failure`` names
    the first reason in BFCL's words (``force_terminated``, ``empty_turn_model_response``,
    ``instance_state_mismatch``, ``execution_response_mismatch``) or the episode's own stop
    when it was not the model's doing (``error``: a vendor request failed; ``timeout``: the
    episode's request limit or wall clock; ``environment_error``: the sandbox), kept apart so
    the product can leave them out of a comparison like any failed sample.
    """

    task_key: str
    tier: str
    passed: bool
    state_ok: bool
    response_ok: bool
    first_failing_turn: int | None = None
    failure: str = ""
    turns: list[TurnScore] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TaskScore:
        turns = [TurnScore(**t) for t in data.get("turns", [])]
        return cls(**{**data, "turns": turns})
