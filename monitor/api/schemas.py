"""What the API returns and accepts. Sample fields are ``monitor.reporting.exports.SAMPLE_COLUMNS``
(the
CSV export's columns), so both leave out headers and error messages."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import AfterValidator, BeforeValidator, ConfigDict, WithJsonSchema

from evals.stats.labels import Label
from monitor.models import Alert, Pair, Run, Sample
from monitor.reporting.exports import run_figures
from monitor.selectors import ALERT_STATES, alert_state


class ClaimOut(Schema):
    """The vendor's speed claim in its own metric and form (``evals.claims``)."""

    metric: Literal["output_tps", "ttft", "e2e"]
    form: Literal["factor", "floor"]
    value: float
    percentile: float | None
    text: str


class PairOut(Schema):
    name: str
    fast: str
    base: str
    suite: str
    claim: ClaimOut | None
    include_downgraded: bool
    active: bool
    simulated: bool

    @staticmethod
    def resolve_claim(obj: Pair) -> dict[str, Any] | None:
        claim = obj.claim
        if claim is None:
            return None
        return {**claim.__dict__, "text": claim.text()}

    @staticmethod
    def resolve_fast(obj: Pair) -> str:
        return obj.fast.name

    @staticmethod
    def resolve_base(obj: Pair) -> str:
        return obj.base.name

    @staticmethod
    def resolve_suite(obj: Pair) -> str:
        return str(obj.suite)


class RunOut(Schema):
    id: int
    pair: str
    kind: str
    trigger: str
    status: str
    planned: int
    completed: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    figures: dict[str, Any]

    @staticmethod
    def resolve_pair(obj: Run) -> str:
        return obj.pair.name

    @staticmethod
    def resolve_figures(obj: Run) -> dict[str, Any]:
        """The summary's headline figures under flat names
        (``monitor.reporting.exports.RUN_COLUMNS``)."""
        return run_figures(obj.summary_obj)


class RunDetailOut(RunOut):
    summary: dict[str, Any]
    verdict: str
    error: str


class SampleOut(Schema):
    id: int
    seq: int
    tier: str
    case: str
    scenario: str
    repetition: int
    batch: int
    turn: int | None  # an agent episode's turn and step (None and 0 for a one-request case)
    step: int
    started_at: datetime
    ok: bool
    error_class: str
    http_status: int | None
    retry_after_s: float | None
    connect_ms: float | None
    ttfb_ms: float | None
    ttft_ms: float | None
    ttft_answer_ms: float | None
    e2e_ms: float | None
    tpot_ms: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    estimated_tokens: int | None
    cached_tokens: int | None
    finish_reason: str
    model_id: str
    system_fingerprint: str
    served_tier: str
    tests_passed: bool | None
    text: str | None = None

    @staticmethod
    def resolve_case(obj: Sample) -> str:
        return obj.case.key

    @staticmethod
    def resolve_scenario(obj: Sample) -> str:
        return obj.case.scenario

    @staticmethod
    def resolve_text(obj: Sample, context: dict[str, Any]) -> str | None:
        """Only with ``?include_text=true``: texts are long and often not needed."""
        wanted = context["request"].GET.get("include_text") in ("1", "true")
        return obj.text if wanted else None


class VerdictOut(Schema):
    pair: str
    run_id: int
    at: datetime
    label: Label  # the one label set (evals.stats.labels), an enum in the OpenAPI schema
    sentence: str
    p_value: float | None
    statistic: float | None
    noise_floor: float | None
    min_detectable_effect: float | None
    alpha: float
    n_per_tier: int


class AlertOut(Schema):
    id: int
    pair: str
    rule: str
    metric: str
    state: str
    opened_at: datetime
    resolved_at: datetime | None
    message: str
    value: float | None
    run_id: int | None
    acknowledged_by: str | None
    acknowledged_at: datetime | None
    ack_note: str
    silenced_until: datetime | None

    @staticmethod
    def resolve_acknowledged_by(obj: Alert) -> str | None:
        return obj.acknowledged_by.get_username() if obj.acknowledged_by else None

    @staticmethod
    def resolve_pair(obj: Alert) -> str:
        return obj.pair.name

    @staticmethod
    def resolve_rule(obj: Alert) -> str:
        return obj.rule.name

    @staticmethod
    def resolve_metric(obj: Alert) -> str:
        return obj.rule.metric

    @staticmethod
    def resolve_state(obj: Alert) -> str:
        return alert_state(obj)


def _not_a_number(value: Any) -> Any:
    """pydantic reads a bare number as Unix time; the schema says an ISO 8601 date-time, and a
    client that sent ``0.5`` meant something else."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise ValueError("an ISO 8601 date-time (e.g. 2026-11-01T00:00:00Z), not a number")
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            return value
        raise ValueError("an ISO 8601 date-time (e.g. 2026-11-01T00:00:00Z), not a number")
    return value


def _storable_moment(value: datetime) -> datetime:
    """PostgreSQL stores offsets within ±15:59 and years up to 9999 once in UTC."""
    offset = value.utcoffset()
    if offset is not None and abs(offset.total_seconds()) > 14 * 3600:
        raise ValueError("a UTC offset within ±14:00")
    return value


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("text without NUL characters")
    return value


# A date-time in a query or a body: ISO 8601 only, as the schema's format says
# The schema says what the validators refuse, so a client (or a fuzzer) generating from the
# schema never sends a value that is then a 422: an offset within ±14:00, no NUL.
OFFSET = r"(?:[Zz]|[+-](?:0[0-9]|1[0-3]):[0-5][0-9]|[+-]14:00)$"
NO_NUL = "^[^\u0000]*$"
DateTime = Annotated[
    datetime,
    BeforeValidator(_not_a_number),
    AfterValidator(_storable_moment),
    WithJsonSchema({"type": "string", "format": "date-time", "pattern": OFFSET}),
]
Note = Annotated[
    str, AfterValidator(_no_nul), WithJsonSchema({"type": "string", "pattern": NO_NUL})
]
# A pair's name in a path or a query: PostgreSQL refuses NUL even in a WHERE clause (a 500 the
# stateful fuzzer found on PostgreSQL only; SQLite just finds no row), so it is a 422 first
PairName = Annotated[
    str, AfterValidator(_no_nul), WithJsonSchema({"type": "string", "pattern": NO_NUL})
]


class NoteIn(Schema):
    """A JSON object; anything else (a list, a string, unknown fields) is a 422."""

    model_config = ConfigDict(extra="forbid")

    note: Note = ""


class SilenceIn(Schema):
    model_config = ConfigDict(extra="forbid")

    until: DateTime
    note: Note = ""


class RunIn(Schema):
    """A JSON object (``[]``, ``"x"`` or ``null`` are a 422 naming the body); unknown fields
    refused too, so a misspelt ``kind`` is not silently a probe."""

    model_config = ConfigDict(extra="forbid")

    kind: Literal["probe", "audit"] = "probe"


class ErrorOut(Schema):
    """Every error: a sentence, or (422) the list of fields that did not validate."""

    detail: str | list[dict[str, Any]]


# The states ``selectors.alerts`` filters by (``selectors.ALERT_STATES``), as an enum in the schema
AlertState = Literal[ALERT_STATES]  # type: ignore[valid-type]
