"""What a pair added by hand gets so that it runs and says when it does not: its probe and
audit schedules (beat rows, ``monitor.setup.schedules``), an "outputs differ" alert rule, and
the built-in suites to choose from.

Why: a pair saved in the admin had no schedule, so it never ran and nothing said so; and with
no rule on the e-detector's alarm, outputs that differ opened no alert. The admin form and any
other onboarding path call these, so a pair is set up the same way wherever it is added.
"""

from __future__ import annotations

import logging

from django.db.models import Q
from django_celery_beat.models import PeriodicTask

from evals.benchmarks.fetch import WHEELS, cached_wheel
from evals.suites import BUILTIN_SUITES
from monitor.models import AlertRule, Channel, Pair, RunKind, Suite
from monitor.setup import audit
from monitor.setup.schedules import ensure_probe_schedule
from monitor.setup.suite_import import BENCHMARK_SUITES, sync_named_suite

log = logging.getLogger(__name__)

PROBE_EVERY_MIN = 15  # the README's cadence
# Routine audits daily: the hourly tripwires (``monitor.runs.tripwire``) cover the hours between
# and queue an audit at once when they fire, so a 6-hourly audit bought little but cost: on the
# simulated vendor a quantized fast tier fires its tripwire within 3 hourly runs, while no
# number of audits sees it (docs/benchmarks.md "Tripwires, escalation and cost per month").
AUDIT_EVERY_H = 24
KINDS = (RunKind.PROBE, RunKind.AUDIT)


def schedules(pair_name: str) -> dict[str, int | None]:
    """Kind ("probe", "audit") → seconds between the pair's enabled scheduled runs, or None."""
    out: dict[str, int | None] = dict.fromkeys(KINDS)
    tasks = PeriodicTask.objects.filter(
        name__in=[f"{k}:{pair_name}" for k in KINDS], enabled=True, interval__isnull=False
    ).select_related("interval")
    unit = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}
    for task in tasks:
        kind = task.name.split(":", 1)[0]
        out[kind] = task.interval.every * unit.get(task.interval.period, 1)
    return out


def tripwire_every(pair_name: str) -> int | None:
    """Seconds between the pair's enabled tripwire runs (``tripwire:<pair>``), or None."""
    task = (
        PeriodicTask.objects.filter(
            name=f"{RunKind.TRIPWIRE}:{pair_name}", enabled=True, interval__isnull=False
        )
        .select_related("interval")
        .first()
    )
    if task is None:
        return None
    unit = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}
    return task.interval.every * unit.get(task.interval.period, 1)


def set_schedules(pair: Pair, every_s: dict[str, int | None]) -> list[tuple[PeriodicTask, dict]]:
    """Create or update the pair's schedule of each kind given a cadence; disable the one given
    None (kept, so its history and its edits in the admin stay). Returns each row touched with
    its snapshot before, for the audit log."""
    touched = []
    for kind, seconds in every_s.items():
        name = f"{kind}:{pair.name}"
        row = PeriodicTask.objects.filter(name=name).first()
        before = audit.snapshot(row)
        if seconds:
            row = ensure_probe_schedule(pair_name=pair.name, every_s=seconds, kind=kind)
        elif row is not None and row.enabled:
            row.enabled = False
            row.save(update_fields=["enabled"])
        else:
            continue
        touched.append((row, before))
    return touched


def ensure_outputs_differ_rule(pair: Pair) -> AlertRule:
    """The pair's alert on its e-detector's alarm ("outputs differ across audits"), to the
    channels its other alerts already reach (the pair's rules and those for every pair), or,
    on an install without such rules, to every channel."""
    rule, created = AlertRule.objects.get_or_create(
        name=f"{pair.name}-outputs-differ"[:80],
        defaults={
            "pair": pair,
            "metric": "verdict_different",
            "tier": "pair",
            "op": "gt",
            "threshold": 0.5,
            "last_k": 1,
            "min_n": 1,
        },
    )
    if created:
        ids = AlertRule.objects.filter(Q(pair=pair) | Q(pair__isnull=True)).values("channels")
        channels = Channel.objects.filter(pk__in=ids) or Channel.objects.all()
        rule.channels.set(channels)
    return rule


def sync_suites() -> None:
    """The built-in suites in the database, so a form can offer them; the capability suites
    too once their data wheels are downloaded (``evals.benchmarks.fetch``: no network here).
    Only missing ones are written, so opening a form stays cheap."""
    have = set(Suite.objects.values_list("name", flat=True))
    names = [n for n in BUILTIN_SUITES if n not in have]
    if all(cached_wheel(w) for w in WHEELS):
        names += [n for n in BENCHMARK_SUITES if n not in have]
    for name in names:
        try:
            sync_named_suite(name=name)
        except Exception:  # one unreadable suite must not close the form
            log.exception("built-in suite %s not synced", name)
