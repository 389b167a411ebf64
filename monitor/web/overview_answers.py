"""The overview's three answers for a pair, in words, each with a tone (ok, bad, wait) for
its colour: *same model?*, *how much faster?*, *changed?*.

Worded on each view from the pair's cached facts (``monitor.web.overview_cells.Measured``)
and its schedules, because part of each answer depends on the clock ("audit 12 min ago",
"ready in ~3 h") or on a schedule, which changes without a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils.timesince import timesince

from evals.stats.error_budget import MIN_BASELINE_RUNS
from evals.stats.labels import LABEL_WORDS
from monitor.derived.evidence import every_words
from monitor.web.overview_cells import Measured


@dataclass(frozen=True)
class Answer:
    text: str
    tone: str  # ok | bad | wait
    sub: str = ""
    title: str = ""  # the longer sentence, on hover


def _ago(at: datetime | None, now: datetime) -> str:
    if at is None:
        return ""
    if now - at < timedelta(minutes=1):
        return "just now"
    return f"{timesince(at, now, depth=1)} ago"


def _every(interval: timedelta | None) -> str:
    return every_words(int(interval.total_seconds())) if interval else ""


def same_model(cells: Measured, audit_every: timedelta | None, now: datetime) -> Answer:
    """The e-detector's state and the newest audit's label with its age; says so when the
    pair has no audit schedule (a verdict then ages without anything renewing it)."""
    audit = cells.audit
    schedule = "" if audit_every else "no audit schedule"
    if audit is None:
        return Answer("no audit yet", "wait", schedule or f"audits {_every(audit_every)}")
    label = LABEL_WORDS.get(audit.label, audit.label.replace("_", " "))
    age = f"audit {_ago(audit.at, now)}"
    sub = " · ".join(x for x in (age, schedule) if x)
    if audit.alarm:
        return Answer("outputs differ (e-detector alarmed)", "bad", sub, audit.sentence)
    tone = {"no_detectable_difference": "ok", "outputs_differ": "bad"}.get(audit.label, "wait")
    tone = "bad" if audit.label == "capability_difference" else tone
    return Answer(label, tone, sub, audit.sentence)


def faster(cells: Measured) -> Answer:
    speed = cells.speed or {"line": "no paired probes yet", "claim": "", "tone": "wait"}
    note = speed.get("note") or ""  # the tier never confirmed, or downgrades left out
    sub = " · ".join(x for x in (speed["claim"], note) if x)
    return Answer(speed["line"], speed["tone"], sub)


def changed(cells: Measured, probe_every: timedelta | None, now: datetime) -> Answer:
    """Drift against the frozen baseline, or how far its collection is and when it is ready
    at the probe schedule's pace."""
    state = cells.drift_state
    if state == "drift":
        since = f" since the baseline of {cells.baseline_at:%-d %b}" if cells.baseline_at else ""
        return Answer(f"changed{since}", "bad", ", ".join(cells.drifting))
    if state == "ok":
        since = f" since the baseline of {cells.baseline_at:%-d %b}" if cells.baseline_at else ""
        return Answer(f"no change{since}", "ok", f"{cells.baseline_runs} probes in the baseline")
    if state == "incident":  # both tiers slowed, the ratio did not: not a tier change
        return Answer("no tier change: both tiers slowed (vendor incident)", "wait",
                      f"{cells.baseline_runs} probes in the baseline")  # fmt: skip
    have = cells.baseline_runs
    if not state:
        return Answer(
            "no finished probe yet", "wait", f"the baseline needs {MIN_BASELINE_RUNS} probes"
        )
    if probe_every:
        left = probe_every * (MIN_BASELINE_RUNS - have)
        ready = f"ready in ~{timesince(now, now + left, depth=1)}"
    else:
        ready = "no probe schedule: never ready"
    return Answer(f"collecting the baseline: {have} of {MIN_BASELINE_RUNS}", "wait", ready)
