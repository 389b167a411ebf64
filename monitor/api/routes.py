"""The API's endpoints. Reads need the view permission of what they return; acknowledge and
silence need ``monitor.change_alert``; starting a run needs ``monitor.add_run`` (operators).

Acknowledge and silence go through the alert lifecycle (``monitor.alerting.lifecycle``);
a change that does not apply to the alert's state is a 409 with the lifecycle's reason. No
``from __future__ import annotations`` here: django-ninja reads the parameter types at import.
"""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, NinjaAPI, Schema, Status
from ninja.pagination import PageNumberPagination, paginate
from ninja.throttling import SimpleRateThrottle

from monitor import selectors
from monitor.alerting import lifecycle
from monitor.api.auth import BearerToken, docs_access, require
from monitor.api.schemas import (
    AlertOut,
    AlertState,
    DateTime,
    ErrorOut,
    NoteIn,
    PairName,
    PairOut,
    RunDetailOut,
    RunIn,
    RunOut,
    SampleOut,
    SilenceIn,
    VerdictOut,
)
from monitor.models import Alert, Pair, Run, RunKind, RunStatus
from monitor.runs.steps import RunAlreadyQueued
from monitor.setup.api_tokens import digest
from monitor.tasks import enqueue_run

api = NinjaAPI(
    title="tierwatch API",
    version="1",
    auth=BearerToken(),
    docs_decorator=docs_access,  # public unless TIERWATCH_API_DOCS_PUBLIC is off
    urls_namespace="api",
    description="Pairs, runs, samples, verdicts and alerts. Send `Authorization: Bearer TOKEN` "
    "(make one with `manage.py api_token create USER`). Lists are paginated: `page`, "
    "`page_size` (≤ 500). Runs started per token are rate-limited (429 with Retry-After).",
)


MAX_PAGE = 1_000_000  # 500 M rows at the largest page: past any table here, far below 2**63
MAX_PAGE_SIZE = 500

# What any endpoint may answer besides its success, in the schema so a client (or a fuzzer)
# knows them: no or a wrong token, a missing permission, and a parameter that does not validate.
COMMON = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 422: ErrorOut}
FOUND = {**COMMON, 404: ErrorOut}


class Pages(PageNumberPagination):
    """``page``/``page_size`` bounded in the schema (422 past them): an unbounded page once
    turned into an OFFSET past 2**63 − 1 and a 500; a page past the end is an empty page."""

    class Input(Schema):
        page: int = Field(1, ge=1, le=MAX_PAGE)
        page_size: int | None = Field(None, ge=1, le=MAX_PAGE_SIZE)

    def __init__(self, **kwargs) -> None:
        super().__init__(page_size=50, max_page_size=MAX_PAGE_SIZE, **kwargs)


class RunCreationRate(SimpleRateThrottle):
    """Runs started per API token (``TIERWATCH_API_RUN_RATE``, e.g. ``"10/min"``): each run is
    minutes of a worker and of vendor calls, so one token cannot queue them by the hundred.
    Keyed by the token's digest (never the token), read from settings at each request."""

    scope = "api-runs"

    def __init__(self) -> None:
        super().__init__(settings.TIERWATCH_API_RUN_RATE)

    def allow_request(self, request: HttpRequest) -> bool:
        self.rate = settings.TIERWATCH_API_RUN_RATE
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request)

    def get_cache_key(self, request: HttpRequest) -> str:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        return self.cache_format % {"scope": self.scope, "ident": digest(token)}


@api.get("/pairs", response={200: list[PairOut], **COMMON}, tags=["pairs"])
@paginate(Pages)
def list_pairs(request: HttpRequest):
    require(request, "monitor.view_pair")
    return Pair.objects.select_related("fast", "base", "suite").order_by("name")


@api.get("/pairs/{name}", response={200: PairOut, **FOUND}, tags=["pairs"])
def get_pair(request: HttpRequest, name: PairName):
    require(request, "monitor.view_pair")
    return selectors.get_pair_for_user(request.auth, name)


@api.get("/runs", response={200: list[RunOut], **COMMON}, tags=["runs"])
@paginate(Pages)
def list_runs(
    request: HttpRequest,
    pair: PairName | None = None,
    kind: RunKind | None = None,
    status: RunStatus | None = None,
    since: DateTime | None = None,
    until: DateTime | None = None,
):
    """Newest first; ``since``/``until`` bound the creation time (ISO 8601)."""
    require(request, "monitor.view_run")
    runs = Run.objects.select_related("pair").only(*selectors.RUN_LIST_FIELDS, "pair__name")
    filters = {
        "pair__name": pair,
        "kind": kind,
        "status": status,
        "created_at__gte": since,
        "created_at__lt": until,
    }
    return runs.filter(**{k: v for k, v in filters.items() if v is not None}).order_by(
        "-created_at", "-id"
    )


@api.get("/runs/{run_id}", response={200: RunDetailOut, **FOUND}, tags=["runs"])
def get_run(request: HttpRequest, run_id: int):
    require(request, "monitor.view_run")
    return get_object_or_404(Run.objects.select_related("pair"), pk=run_id)


@api.get("/runs/{run_id}/samples", response={200: list[SampleOut], **FOUND}, tags=["runs"])
@paginate(Pages)
def list_samples(request: HttpRequest, run_id: int, include_text: bool = False):
    """The run's samples in plan order; texts only with ``include_text=true``."""
    require(request, "monitor.view_sample")
    run = get_object_or_404(Run, pk=run_id)
    heavy = [f for f in selectors.SAMPLE_HEAVY_FIELDS if not (include_text and f == "text")]
    return run.samples.select_related("case").defer(*heavy).order_by("seq", "id")


@api.get("/verdicts", response={200: list[VerdictOut], **COMMON}, tags=["verdicts"])
@paginate(Pages)
def list_verdicts(request: HttpRequest):
    """Per pair the verdict of its newest finished audit (pairs without one are left out)."""
    require(request, "monitor.view_run")
    pairs = Pair.objects.order_by("name")
    latest = selectors.latest_done_runs(RunKind.AUDIT, pairs)
    names = dict(pairs.values_list("pk", "name"))
    out = []
    for pair_id, run in sorted(latest.items(), key=lambda item: names[item[0]]):
        v = run.summary_obj.verdict
        if v is not None:
            out.append(
                {
                    "pair": names[pair_id],
                    "run_id": run.id,
                    "at": run.finished_at or run.created_at,
                    "label": v.label,
                    "sentence": v.sentence,
                    "p_value": v.p_value,
                    "statistic": v.statistic,
                    "noise_floor": v.mmd("base_vs_base").get("statistic"),
                    "min_detectable_effect": v.min_detectable_effect,
                    "alpha": v.alpha,
                    "n_per_tier": v.n_per_tier,
                }
            )
    return out


@api.get("/alerts", response={200: list[AlertOut], **COMMON}, tags=["alerts"])
@paginate(Pages)
def list_alerts(
    request: HttpRequest,
    state: AlertState | None = None,
    pair: PairName | None = None,
):
    require(request, "monitor.view_alert")
    return selectors.alerts(state=state, pair=pair)


def _changeable(request: HttpRequest, alert_id: int) -> None:
    """403 without the change permission, 404 for an unknown alert: before the lifecycle."""
    require(request, "monitor.change_alert")
    get_object_or_404(Alert, pk=alert_id)


def _alert(alert_id: int) -> Alert:
    return Alert.objects.select_related("rule", "pair", "acknowledged_by").get(pk=alert_id)


@api.post(
    "/alerts/{alert_id}/acknowledge",
    response={200: AlertOut, 409: ErrorOut, **FOUND},
    tags=["alerts"],
)
def acknowledge(request: HttpRequest, alert_id: int, body: NoteIn):
    _changeable(request, alert_id)
    try:
        lifecycle.acknowledge(alert_id=alert_id, user=request.auth, note=body.note)
    except (ValueError, ValidationError) as exc:
        return Status(409, {"detail": str(exc)})
    return Status(200, _alert(alert_id))


@api.post(
    "/alerts/{alert_id}/silence",
    response={200: AlertOut, 409: ErrorOut, **FOUND},
    tags=["alerts"],
)
def silence(request: HttpRequest, alert_id: int, body: SilenceIn):
    _changeable(request, alert_id)
    try:
        lifecycle.silence(alert_id=alert_id, user=request.auth, until=body.until, note=body.note)
    except (ValueError, ValidationError) as exc:
        return Status(409, {"detail": str(exc)})
    return Status(200, _alert(alert_id))


@api.post(
    "/pairs/{name}/runs",
    response={201: RunOut, 409: ErrorOut, 429: ErrorOut, **FOUND},
    tags=["runs"],
    throttle=RunCreationRate(),
)
def run_now(request: HttpRequest, name: PairName, body: RunIn):
    """Queue a run of the pair now (a probe, or an audit); a worker executes it. 409 while a
    run of the pair and kind is still queued; 429 (with Retry-After) past the token's rate."""
    require(request, "monitor.add_run")
    pair = selectors.get_pair_for_user(request.auth, name)
    try:
        return Status(201, enqueue_run(pair=pair, kind=body.kind))
    except RunAlreadyQueued as exc:
        return Status(409, {"detail": str(exc)})
