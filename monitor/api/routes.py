"""The API's endpoints. Reads need the view permission of what they return; acknowledge and
silence need ``monitor.change_alert``; starting a run needs ``monitor.add_run`` (operators).

Acknowledge and silence go through the alert lifecycle (``monitor.alerting.lifecycle``);
a change that does not apply to the alert's state is a 409 with the lifecycle's reason. No
``from __future__ import annotations`` here: django-ninja reads the parameter types at import.
"""

from datetime import datetime

from django.core.exceptions import ValidationError
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import NinjaAPI, Query, Status
from ninja.errors import HttpError
from ninja.pagination import PageNumberPagination, paginate

from monitor import selectors
from monitor.alerting import lifecycle
from monitor.api.auth import BearerToken, require
from monitor.api.schemas import (
    AlertOut,
    ErrorOut,
    NoteIn,
    PairOut,
    RunDetailOut,
    RunIn,
    RunOut,
    SampleOut,
    SilenceIn,
    VerdictOut,
)
from monitor.models import Alert, Pair, Run, RunKind, RunStatus
from monitor.tasks import enqueue_run

api = NinjaAPI(
    title="tierwatch API",
    version="1",
    auth=BearerToken(),
    urls_namespace="api",
    description="Pairs, runs, samples, verdicts and alerts. Send `Authorization: Bearer TOKEN` "
    "(make one with `manage.py api_token create USER`). Lists are paginated: `page`, "
    "`page_size` (≤ 500).",
)


class Pages(PageNumberPagination):
    def __init__(self, **kwargs) -> None:
        super().__init__(page_size=50, max_page_size=500, **kwargs)


@api.get("/pairs", response=list[PairOut], tags=["pairs"])
@paginate(Pages)
def list_pairs(request: HttpRequest):
    require(request, "monitor.view_pair")
    return Pair.objects.select_related("fast", "base", "suite").order_by("name")


@api.get("/pairs/{name}", response=PairOut, tags=["pairs"])
def get_pair(request: HttpRequest, name: str):
    require(request, "monitor.view_pair")
    return selectors.get_pair_for_user(request.auth, name)


@api.get("/runs", response=list[RunOut], tags=["runs"])
@paginate(Pages)
def list_runs(
    request: HttpRequest,
    pair: str | None = None,
    kind: RunKind | None = None,
    status: RunStatus | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
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


@api.get("/runs/{run_id}", response=RunDetailOut, tags=["runs"])
def get_run(request: HttpRequest, run_id: int):
    require(request, "monitor.view_run")
    return get_object_or_404(Run.objects.select_related("pair"), pk=run_id)


@api.get("/runs/{run_id}/samples", response=list[SampleOut], tags=["runs"])
@paginate(Pages)
def list_samples(request: HttpRequest, run_id: int, include_text: bool = False):
    """The run's samples in plan order; texts only with ``include_text=true``."""
    require(request, "monitor.view_sample")
    run = get_object_or_404(Run, pk=run_id)
    heavy = [f for f in selectors.SAMPLE_HEAVY_FIELDS if not (include_text and f == "text")]
    return run.samples.select_related("case").defer(*heavy).order_by("seq", "id")


@api.get("/verdicts", response=list[VerdictOut], tags=["verdicts"])
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


@api.get("/alerts", response=list[AlertOut], tags=["alerts"])
@paginate(Pages)
def list_alerts(
    request: HttpRequest,
    state: str | None = Query(None, description=f"one of {', '.join(selectors.ALERT_STATES)}"),
    pair: str | None = None,
):
    require(request, "monitor.view_alert")
    if state is not None and state not in selectors.ALERT_STATES:
        raise HttpError(422, f"state must be one of {', '.join(selectors.ALERT_STATES)}")
    return selectors.alerts(state=state, pair=pair)


def _changeable(request: HttpRequest, alert_id: int) -> None:
    """403 without the change permission, 404 for an unknown alert: before the lifecycle."""
    require(request, "monitor.change_alert")
    get_object_or_404(Alert, pk=alert_id)


def _alert(alert_id: int) -> Alert:
    return Alert.objects.select_related("rule", "pair", "acknowledged_by").get(pk=alert_id)


@api.post(
    "/alerts/{alert_id}/acknowledge", response={200: AlertOut, 409: ErrorOut}, tags=["alerts"]
)
def acknowledge(request: HttpRequest, alert_id: int, body: NoteIn):
    _changeable(request, alert_id)
    try:
        lifecycle.acknowledge(alert_id=alert_id, user=request.auth, note=body.note)
    except (ValueError, ValidationError) as exc:
        return Status(409, {"detail": str(exc)})
    return Status(200, _alert(alert_id))


@api.post("/alerts/{alert_id}/silence", response={200: AlertOut, 409: ErrorOut}, tags=["alerts"])
def silence(request: HttpRequest, alert_id: int, body: SilenceIn):
    _changeable(request, alert_id)
    try:
        lifecycle.silence(alert_id=alert_id, user=request.auth, until=body.until, note=body.note)
    except (ValueError, ValidationError) as exc:
        return Status(409, {"detail": str(exc)})
    return Status(200, _alert(alert_id))


@api.post("/pairs/{name}/runs", response={201: RunOut}, tags=["runs"])
def run_now(request: HttpRequest, name: str, body: RunIn):
    """Queue a run of the pair now (a probe, or an audit); a worker executes it."""
    require(request, "monitor.add_run")
    pair = selectors.get_pair_for_user(request.auth, name)
    return Status(201, enqueue_run(pair=pair, kind=body.kind))
