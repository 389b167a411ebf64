"""The watchdog: no run stays stuck, and a pair that stops being measured is noticed.

``run_watchdog`` is what the beat entry ``watchdog`` runs every minute, in a worker:

- **reaper**: a run ``running`` whose heartbeat is older than ``TIERWATCH_STALE_AFTER_S`` (its
  worker died: SIGKILL, OOM, a lost machine), or running longer than ``TIERWATCH_RUN_MAX_S``, or
  ``queued`` longer than ``TIERWATCH_QUEUED_STALE_S`` (its task message was lost), or
  ``evaluating`` with a silent sandbox worker or none for ``TIERWATCH_QUEUED_STALE_S``
  (``heartbeat.evaluation_lost``), is marked failed with a reason starting "worker lost". What it
  stored stays and is summarised; one alert per run, claimed by the same conditional update that
  fails the run, so two watchdogs never alert twice.
- **resend**: a run still ``queued`` ``TIERWATCH_RESEND_AFTER_S`` after its task was sent has
  its task sent again (``resend_lost`` says why messages vanish); the claim makes it run once.
- **dead man's switch**: for each enabled probe schedule, when no scheduled run of the pair
  finished within the schedule's interval plus ``TIERWATCH_OVERDUE_GRACE_S``, an alert opens
  (once, until a scheduled run finishes again, which resolves it). Beat down, worker down and
  broker down all end here, because each of them stops runs from finishing.
- **sandbox work dirs**: the ones a worker killed during an evaluation left on this machine,
  with the generated code in them, are removed (``evals.sandbox_sweep``).
- it stores the time it ran (``Beacon`` "watchdog"), which ``/health`` reports: the watchdog
  is watched from outside. The watchdog needs beat and a worker to run at all, so ``/health``
  (served by the web process) also evaluates the overdue schedules itself: with beat or every
  worker down, the outside uptime check still sees it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from evals.sandbox_sweep import sweep as sandbox_sweep
from monitor.alerting import lifecycle
from monitor.alerting.alerts import pair_link
from monitor.alerting.metrics_catalogue import SYSTEM_METRICS
from monitor.derived.run_end import record_run_end
from monitor.models import Alert, AlertRule, Beacon, Pair, Run, RunStatus, RunTrigger
from monitor.runs.heartbeat import abandoned, evaluation_lost
from monitor.runs.steps import summarise_run

log = logging.getLogger(__name__)

PROBE_TASK = "monitor.tasks.probe_pair_task"
WATCHDOG_BEACON = "watchdog"
OUTAGE_GAP_S = 180.0  # three missed passes of the every-minute beat entry


def system_rules(metric: str, pair: Pair) -> list[AlertRule]:
    """The enabled rules that route a watchdog alert of this metric for this pair. The first
    time, a rule with no channels is created (it reaches every channel); edit it in the admin
    or name the metric in a config's alert rule to route it elsewhere."""
    assert metric in SYSTEM_METRICS
    if not AlertRule.objects.filter(metric=metric).exists():
        AlertRule.objects.get_or_create(
            name=f"system-{metric.replace('_', '-')}",
            defaults={"metric": metric, "tier": "pair", "threshold": 0, "last_k": 1, "min_n": 0},
        )
    rules = AlertRule.objects.filter(metric=metric, enabled=True)
    return list(rules.filter(Q(pair=pair) | Q(pair__isnull=True)).order_by("pk"))


def _where(pair: Pair) -> str:
    return f"pair {pair.name}" + (" (simulated)" if pair.simulated else "")


def _age(since: datetime | None, now: datetime) -> float:
    return (now - since).total_seconds() if since else 0.0


def lost_reason(run: Run, now: datetime) -> str:
    if run.status == RunStatus.QUEUED:
        return (
            f"worker lost: queued for {_age(run.created_at, now):.0f} s and never started "
            "(the task message was lost, or no worker consumes the queue)"
        )
    if run.status == RunStatus.EVALUATING and run.heartbeat_at is None:
        return (
            f"worker lost: measured, then waited {_age(run.measured_at, now):.0f} s for a "
            "sandbox worker (the task message was lost, or no worker consumes the sandbox queue)"
        )
    silent = _age(run.heartbeat_at or run.started_at, now)
    if silent > settings.TIERWATCH_STALE_AFTER_S:
        return (
            f"worker lost: no heartbeat for {silent:.0f} s "
            f"(limit {settings.TIERWATCH_STALE_AFTER_S:.0f} s)"
        )
    return (
        f"worker lost: still running {_age(run.started_at, now):.0f} s after it started, "
        f"beyond the run time limit of {settings.TIERWATCH_RUN_MAX_S:.0f} s"
    )


def reap_stale_runs(now: datetime | None = None) -> list[Alert]:
    """Fail the stuck runs, summarise what they stored, and open one alert per run."""
    now = now or timezone.now()
    overrun = now - timedelta(seconds=settings.TIERWATCH_RUN_MAX_S)
    queued = now - timedelta(seconds=settings.TIERWATCH_QUEUED_STALE_S)
    stuck = Run.objects.filter(
        abandoned(now)
        | evaluation_lost(now)
        | Q(status=RunStatus.RUNNING, started_at__lt=overrun)
        | Q(status=RunStatus.QUEUED, created_at__lt=queued)
    )
    opened = []
    for run in stuck.select_related("pair__fast", "pair__base").order_by("pk"):
        reason = lost_reason(run, now)
        # Claimed only if nothing changed since the read: a beat or a takeover in between wins.
        claimed = Run.objects.filter(
            id=run.id, status=run.status, attempt=run.attempt, heartbeat_at=run.heartbeat_at
        ).end(RunStatus.FAILED, finished_at=now, error=reason)
        if not claimed:
            continue
        log.warning("run %s of %s: %s", run.id, run.pair.name, reason)
        Run.objects.filter(id=run.id).update(completed=run.samples.count())
        try:
            summarise_run(run_id=run.id)
        except Exception:  # the run is failed either way; the summary is best effort
            log.exception("run %s: summary of the stored samples failed", run.id)
        run.refresh_from_db()
        record_run_end(run.id)  # the pipeline that would have recorded its end is gone
        message = (
            f"Run {run.id} ({run.kind}, {run.trigger}) of {_where(run.pair)} failed: {reason}. "
            f"{run.completed} of {run.planned} samples were stored; they are kept and "
            f"summarised. {pair_link(run.pair)}"
        )
        for rule in system_rules("worker_lost", run.pair):
            alert = Alert.objects.create(rule=rule, pair=run.pair, run=run, message=message)
            opened.append(lifecycle.opened(alert_id=alert.pk, now=now))
    return opened


def database_unavailable(*, run_id: int) -> list[Alert]:
    """One alert for a run its worker failed because the database did not answer for
    ``TIERWATCH_DB_OUTAGE_S`` (``heartbeat.DatabaseUnavailable``): said as such, so the
    operator looks at the database, not at a worker that was alive all along."""
    run = Run.objects.select_related("pair").get(id=run_id)
    message = (
        f"Run {run.id} ({run.kind}, {run.trigger}) of {_where(run.pair)} failed: {run.error}. "
        f"{run.samples.count()} of {run.planned} samples were stored. {pair_link(run.pair)}"
    )
    opened = []
    for rule in system_rules("database_unavailable", run.pair):
        alert = Alert.objects.create(rule=rule, pair=run.pair, run=run, message=message)
        opened.append(lifecycle.opened(alert_id=alert.pk))
    return opened


def sandbox_unavailable(*, run: Run) -> list[Alert]:
    """One alert per pair while the sandbox is unavailable: a run whose generated code was not
    run (no working bubblewrap and no explicit unsafe opt-in, ``evals.sandbox``) opens it unless
    one is still open, so a worker without isolation says so once instead of every run, and
    never reports a pass rate it did not measure. Resolved by hand once isolation works."""
    blocked = run.samples.filter(tests_detail__error_class="sandbox_unavailable").count()
    if (
        not blocked
        or Alert.objects.filter(
            pair=run.pair, rule__metric="sandbox_unavailable", resolved_at__isnull=True
        ).exists()
    ):
        return []
    message = (
        f"Run {run.id} of {_where(run.pair)}: {blocked} generated answer(s) were not run because "
        "the worker has no working sandbox (bubblewrap missing or unable to create namespaces; "
        "see README, 'The code sandbox'). Unit-test pass rates are missing until it works. "
        f"{pair_link(run.pair)}"
    )
    opened = []
    for rule in system_rules("sandbox_unavailable", run.pair):
        alert = Alert.objects.create(rule=rule, pair=run.pair, run=run, message=message)
        opened.append(lifecycle.opened(alert_id=alert.pk))
    return opened


def _probe_schedules() -> list[tuple[PeriodicTask, Pair, str, float]]:
    """(schedule, pair, kind, interval in seconds) of every enabled interval probe schedule."""
    found = []
    tasks = PeriodicTask.objects.filter(enabled=True, task=PROBE_TASK, interval__isnull=False)
    for task in tasks.select_related("interval"):
        args = json.loads(task.args or "[]")
        pair = Pair.objects.filter(name=args[0], active=True).first() if args else None
        if pair is not None:
            every = task.interval.schedule.run_every.total_seconds()
            found.append((task, pair, args[1] if len(args) > 1 else "probe", every))
    return found


def _armed_at(task: PeriodicTask, now: datetime, record: bool) -> datetime:
    """When the watchdog first saw the schedule enabled: a new schedule is not overdue for
    the time before it existed. ``record=False`` only reads (``/health``)."""
    name = f"schedule-{task.pk}"
    if record:
        seen = Beacon.objects.get_or_create(name=name, defaults={"seen_at": now})[0].seen_at
    else:
        seen = Beacon.objects.filter(name=name).values_list("seen_at", flat=True).first() or now
    return max(seen, task.start_time) if task.start_time else seen


def overdue_schedules(
    now: datetime | None = None, record: bool = True
) -> tuple[dict[Pair, list[str]], list[Pair]]:
    """(pairs with an overdue schedule and why, pairs whose schedules are all on time)."""
    now = now or timezone.now()
    late: dict[Pair, list[str]] = {}
    on_time: dict[int, Pair] = {}
    schedules = _probe_schedules()
    if record:
        armed = [f"schedule-{task.pk}" for task, *_ in schedules]
        Beacon.objects.filter(name__startswith="schedule-").exclude(name__in=armed).delete()
    for task, pair, kind, every in schedules:
        done = Run.objects.filter(
            pair=pair, kind=kind, trigger=RunTrigger.SCHEDULED, status=RunStatus.DONE
        )
        last = done.order_by("-finished_at").values_list("finished_at", flat=True).first()
        since = max(t for t in (last, _armed_at(task, now, record)) if t)
        if _age(since, now) > every + settings.TIERWATCH_OVERDUE_GRACE_S:
            what = f"last finished {last:%Y-%m-%d %H:%M:%S} UTC" if last else "none finished yet"
            late.setdefault(pair, []).append(
                f"{kind} every {every:.0f} s ({what}; grace "
                f"{settings.TIERWATCH_OVERDUE_GRACE_S:.0f} s)"
            )
        else:
            on_time[pair.pk] = pair
    return late, [p for pk, p in on_time.items() if p not in late]


def check_schedules(now: datetime | None = None) -> list[Alert]:
    """Open an alert for each pair newly overdue; resolve it when its runs finish again."""
    late, on_time = overdue_schedules(now)
    changed = []
    for pair, why in late.items():
        for rule in system_rules("schedule_overdue", pair):
            with transaction.atomic():
                AlertRule.objects.select_for_update().filter(pk=rule.pk).exists()
                if Alert.objects.filter(rule=rule, pair=pair, resolved_at__isnull=True).exists():
                    continue
                message = (
                    f"No scheduled run of {_where(pair)} finished in time: {'; '.join(why)}. "
                    "Beat, the worker or the broker is down, or every run fails. "
                    f"{pair_link(pair)}"
                )
                alert = Alert.objects.create(rule=rule, pair=pair, message=message)
                changed.append(lifecycle.opened(alert_id=alert.pk))
    for pair in on_time:
        for alert in Alert.objects.filter(
            rule__metric="schedule_overdue", pair=pair, resolved_at__isnull=True
        ):
            try:  # user None: resolved because the condition cleared; resolves once
                changed.append(
                    lifecycle.resolve(
                        alert_id=alert.pk,
                        note="Resolved: its scheduled runs finish on time again.",
                        send=False,
                    )
                )
            except lifecycle.LifecycleError:
                continue
    return changed


def resend_lost(resend: Callable[[Run], object], now: datetime | None = None) -> list[int]:
    """Send again the task of each run still queued ``TIERWATCH_RESEND_AFTER_S`` after its
    task was last sent; the ids sent.

    Why: the message of a queued run can vanish while its row stays ``queued``. kombu's
    filesystem broker (the demo's) moves a message's file out of the queue when a worker
    reserves it, so a worker killed before it acknowledged (the demo's stop sends SIGKILL after
    10 s, an OOM kill, a second Ctrl-C) takes every message it had reserved with it; Redis gives
    them back only after its visibility timeout (1 h). A task that gave up before its claim
    (a database locked past its retries) leaves the same state. With one queued run per pair
    and kind (``steps.queue_run``), that run then blocked every later tick of its schedule
    until the reaper failed it after ``TIERWATCH_QUEUED_STALE_S``; before that rule, later runs
    of the pair ran while it stayed queued. A second delivery is harmless: the claim is one
    conditional update, so a duplicate finds the run taken and does nothing."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.TIERWATCH_RESEND_AFTER_S)
    lost = Run.objects.filter(status=RunStatus.QUEUED).filter(
        Q(sent_at__lt=cutoff) | Q(sent_at__isnull=True, created_at__lt=cutoff)
    )
    sent = []
    for run in lost.order_by("pk"):
        log.warning("run %s of pair %s: still queued; its task is sent again", run.pk, run.pair_id)
        resend(run)
        sent.append(run.pk)
    return sent


def run_watchdog(
    now: datetime | None = None, resend: Callable[[Run], object] | None = None
) -> list[Alert]:
    """One pass: reap, send again what looks lost (``resend``: the task passes ``send_run``),
    check the schedules, sweep the sandbox work dirs a killed worker left on this machine
    (``evals.sandbox_sweep``), then record that the watchdog ran.

    After a pass of its own missed by more than ``OUTAGE_GAP_S`` (the database, beat or
    every worker was down) it reaps nothing this pass: a worker that was alive through a
    database outage gets a minute to beat again before its run is called lost."""
    last = last_watchdog_run()
    gap = ((now or timezone.now()) - last).total_seconds() if last else 0.0
    if gap > OUTAGE_GAP_S:
        log.warning("watchdog: last pass %.0f s ago; reaping resumes next pass", gap)
        changed = check_schedules(now)
    else:
        changed = reap_stale_runs(now) + check_schedules(now)
    if resend is not None:
        resend_lost(resend, now)
    sandbox_sweep()
    Beacon.objects.update_or_create(name=WATCHDOG_BEACON, defaults={"seen_at": timezone.now()})
    return changed


def last_watchdog_run() -> datetime | None:
    return Beacon.objects.filter(name=WATCHDOG_BEACON).values_list("seen_at", flat=True).first()
