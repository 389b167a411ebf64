"""The incident timeline of a pair: one list, newest first, of alert state changes, verdict
changes, baseline and drift changes, model-id and fingerprint changes and maintenance windows;
and the acknowledge / silence / resolve actions on its open alerts (htmx, for users with
``monitor.change_alert``).

"Baseline changes": a pair's drift baseline is frozen from its first probe runs and replaced
only on acknowledgement (``monitor.derived.evidence``), so the events are a baseline set,
drift detected and a new baseline being collected, read from the probes' stored drift state.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from evals.stats.labels import LABEL_WORDS
from monitor import selectors
from monitor.alerting import lifecycle, maintenance
from monitor.derived import rebaseline
from monitor.models import Alert, Pair, Run, RunKind
from monitor.web.access import CHANGE_ALERT, VIEW_ALERT, requires
from monitor.web.htmx import wants_fragment

HORIZON = timedelta(days=30)  # how far back the timeline reads
SILENCE_HOURS = (1, 4, 24, 72)
RUNS_READ = 300  # drift and verdict history read from this many newest runs


def _event(at: datetime, kind: str, title: str, detail: str = "", **extra: Any) -> dict[str, Any]:
    return {"at": at, "kind": kind, "title": title, "detail": detail, **extra}


def alert_events(pair: Pair, since: datetime) -> list[dict[str, Any]]:
    rows = selectors.alert_transitions(pair, since)
    words = {
        "opened": "opened",
        "acknowledged": "acknowledged",
        "silenced": "silenced",
        "resolved": "resolved",
        "reminded": "reminder sent",
        "escalated": "escalated",
    }
    out = []
    for t in rows:
        who = (
            f"by {t.user.get_username()}"
            if t.user
            else ("automatically" if t.kind == "resolved" else "")
        )
        title = f"Alert #{t.alert_id} ({t.alert.rule.name}) {words.get(t.kind, t.kind)}"
        detail = t.alert.message.splitlines()[0] if t.kind == "opened" else t.note
        out.append(
            _event(
                t.at,
                f"alert-{t.kind}",
                title,
                detail,
                who=who,
                flapping=t.alert.flapping and t.kind == "opened",
                run_id=t.alert.run_id if t.kind == "opened" else None,
            )
        )
    return out


def verdict_events(runs: list[Run]) -> list[dict[str, Any]]:
    """Each audit verdict whose label differs from the previous audit's (the first one too)."""
    out, previous = [], None
    for run in runs:
        v = run.summary_obj.verdict
        if v is None or run.kind != RunKind.AUDIT:
            continue
        if v.label != previous:
            title = f"Verdict: {LABEL_WORDS.get(v.label, v.label)}" + (
                f" (was {LABEL_WORDS.get(previous, previous)})" if previous else " (first verdict)"
            )
            out.append(
                _event(
                    run.finished_at or run.created_at, "verdict", title, v.sentence, run_id=run.pk
                )
            )
        previous = v.label
    return out


def drift_events(runs: list[Run]) -> list[dict[str, Any]]:
    """Each change of the pair's stored drift state between consecutive probes: a baseline
    frozen (calibration done), drift detected, or a new baseline being collected after an
    acknowledgement (``monitor.derived.evidence``)."""
    out, before, baseline = [], None, None
    for run in runs:
        d = run.summary_obj.drift
        if d is None:
            continue
        when = run.finished_at or run.created_at
        if d.baseline_id is not None and d.baseline_id != baseline:
            out.append(
                _event(
                    when,
                    "baseline",
                    f"Baseline #{d.baseline_id} set",
                    f"frozen from {d.baseline_runs} probe runs, h = {d.h:.3g}",
                    run_id=run.pk,
                )
            )
        elif before is not None and d.state != before:
            if d.state == "drift":
                title = "Drift detected in " + ", ".join(d.drifting)
            elif d.state == "calibrating":
                title = "Collecting a new baseline (change acknowledged)"
            elif d.state == "incident":
                title = "Both tiers slowed: vendor incident (not a tier change)"
            else:
                title = f"drift state: {before} → {d.state}"
            out.append(_event(when, "baseline", title, d.reason or d.budget, run_id=run.pk))
        before, baseline = d.state, d.baseline_id if d.baseline_id is not None else baseline
    return out


def rebaseline_events(pair: Pair, since: datetime) -> list[dict[str, Any]]:
    """Each acknowledge & re-baseline from the audit log: who, and which evidence was reset."""
    out = []
    for change in rebaseline.rebaselines(pair, since):
        was = {k: v[0] for k, v in change.diff.items()}
        parts = [f"e-process ({was['e-process']})"] if "e-process" in was else []
        for field in ("CUSUM", "capability detectors", "tripwires"):
            if was.get(field):
                parts.append(f"{field} ({', '.join(map(str, was[field]))})")
        if "baseline" in was:
            parts.append("baseline " + "; ".join(was["baseline"]))
        out.append(
            _event(
                change.at,
                "baseline",
                "Change acknowledged & re-baselined",
                "reset: " + (", ".join(parts) or "nothing held evidence"),
                who=change.username or "unknown user",
            )
        )
    return out


def endpoint_events(pair: Pair, since: datetime) -> list[dict[str, Any]]:
    out = []
    for e in selectors.endpoint_events(endpoints=[pair.fast, pair.base]):
        if e["first_seen"] < since:
            continue
        verb = "changed to" if e["change"] else "first seen:"
        out.append(
            _event(
                e["first_seen"],
                "model",
                f"{e['endpoint']}: {e['what']} {verb} {e['value']}",
                f"n = {e['n']} samples",
                run_id=e["run_id"],
            )
        )
    return out


def maintenance_events(pair: Pair, since: datetime, until: datetime) -> list[dict[str, Any]]:
    out = []
    for w in maintenance.windows_for(pair):
        scope = "this pair" if w.pair_id else (w.vendor_host or "all pairs")
        for start, end in maintenance.occurrences(w, since, until):
            out.append(
                _event(
                    start,
                    "maintenance",
                    f"Maintenance ({scope}): {w.reason}",
                    f"{start:%Y-%m-%d %H:%M} – {end:%Y-%m-%d %H:%M} UTC"
                    + (f", recurring {w.cron}" if w.cron else ""),
                    end=end,
                )
            )
    return out


def pair_timeline(pair: Pair, now: datetime | None = None) -> list[dict[str, Any]]:
    now = now or timezone.now()
    since = now - HORIZON
    runs = selectors.done_runs_since(pair, since, RUNS_READ)
    events = (
        alert_events(pair, since)
        + verdict_events(runs)
        + drift_events(runs)
        + rebaseline_events(pair, since)
        + endpoint_events(pair, since)
        + maintenance_events(pair, since, now + HORIZON)
    )
    events.sort(key=lambda e: e["at"], reverse=True)
    return events


def _context(request: HttpRequest, pair: Pair, **extra: Any) -> dict[str, Any]:
    return {
        "pair": pair,
        "open_alerts": list(selectors.open_alerts(pair, limit=None)),
        "can_act": request.user.has_perm("monitor.change_alert"),
        "silence_hours": SILENCE_HOURS,
        "now": timezone.now(),
        "events": pair_timeline(pair),
        "in_maintenance": maintenance.active_window(pair),
        **extra,
    }


@requires(VIEW_ALERT)
@require_GET
def timeline(request: HttpRequest, name: str) -> HttpResponse:
    pair = selectors.get_pair_for_user(request.user, name)
    return render(request, "monitor/timeline.html", _context(request, pair))


@requires(CHANGE_ALERT)
@require_POST
def alert_action(request: HttpRequest, alert_id: int, action: str) -> HttpResponse:
    """Acknowledge, silence or resolve one alert; htmx gets the refreshed open-alerts panel."""
    alert = get_object_or_404(Alert.objects.select_related("pair"), pk=alert_id)
    note = request.POST.get("note", "").strip()[:1000]
    error = ""
    try:
        if action == "acknowledge":
            lifecycle.acknowledge(alert_id=alert.pk, user=request.user, note=note)
        elif action == "silence":
            raw = request.POST.get("hours", "")
            hours = int(raw) if raw.isdigit() else None
            if hours not in SILENCE_HOURS:
                raise lifecycle.LifecycleError(
                    f"silence for one of {SILENCE_HOURS} hours (got {raw!r})"
                )
            until = timezone.now() + timedelta(hours=hours)
            lifecycle.silence(alert_id=alert.pk, user=request.user, until=until, note=note)
        elif action == "resolve":
            lifecycle.resolve(alert_id=alert.pk, user=request.user, note=note)
        else:
            raise lifecycle.LifecycleError(f"unknown action {action!r}")
    except (lifecycle.LifecycleError, ValueError) as exc:
        error = str(exc)
    if not wants_fragment(request):  # the message survives the redirect, as a flash
        if error:
            messages.error(request, f"Alert {alert.pk} not changed: {error}")
        return redirect("monitor:timeline", name=alert.pair.name)
    pair = selectors.get_pair_for_user(request.user, alert.pair.name)
    return render(
        request,
        "monitor/timeline.html#body",
        _context(request, pair, action_error=error),
        status=400 if error else 200,
    )
