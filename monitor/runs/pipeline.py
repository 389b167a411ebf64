"""What happens to a run, in order: measure → evaluate (generated code in the sandbox) →
summarise (and its rollups) → maintenance mark → done → verdict and drift → alerts (opened, or
resolved when their condition cleared) → notify. The Celery task calls this; so do the
``probe`` command and the tests.

Evaluate comes after the timed requests, never among them. Given ``evaluate`` (the task passes
``evaluate_run_task.delay``), a run with generated code to test is handed off after measuring
(status ``evaluating``) and ``evaluate_run`` carries on from there in a worker of the
``sandbox`` queue (``monitor.runs.routing``); without it, the same steps follow here. Last, done or
failed, ``monitor.derived.run_end.record_run_end`` records what the run leaves behind and
refreshes the pair's cached pages, so the first view after a run is fast too.

Measuring and summarising either succeed or mark the run failed with the reason. The judging
steps after "done" read the finished run and never fail it: a verdict that cannot be computed
is stored as its error, a monitoring step that fails is logged. Alerts are evaluated on a
done run, and on a run its vendor failed (its requests mostly failed): the rules on error
rate and availability only (``alerts.HEALTH_METRICS``), else the pair's vendor alert. An
alert whose condition cleared is resolved by ``lifecycle.resolve`` (user None), and
``notify`` (the task passes ``notify_task.delay``) announces each alert opened or resolved
now (``lifecycle.announce``: held during maintenance, silences, flapping).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from monitor.alerting import alerts, lifecycle, maintenance, vendor
from monitor.derived import evidence, loss_detectors, rollups
from monitor.derived.run_end import record_run_end
from monitor.judging import verdict
from monitor.models import Alert, Pair, Run, RunKind, RunStatus
from monitor.runs import budget, heartbeat, steps, tripwire, watchdog

log = logging.getLogger(__name__)


def execute_run(
    *,
    run_id: int,
    cases_limit: int | None = None,
    notify: Callable[[int], Any] | None = None,
    evaluate: Callable[[int], Any] | None = None,
    escalate: Callable[[Pair], Run] | None = None,
) -> Run | None:
    """Execute a queued run (or take over an abandoned one); a run another worker owns (a
    redelivered task) is left alone and returned as it is, ``None`` when it no longer exists.
    A tripwire run has its own short path (``monitor.runs.tripwire``); ``escalate`` (the task
    passes an audit enqueuer) is what a tripwire that fires calls."""
    attempt = steps.claim_run(run_id)
    if attempt is None:
        log.info("run %s is not queued (or gone, or alive elsewhere); skipping", run_id)
        return Run.objects.filter(id=run_id).first()
    if Run.objects.filter(id=run_id, kind=RunKind.TRIPWIRE).exists():
        return tripwire.execute(run_id=run_id, attempt=attempt, notify=notify, escalate=escalate)
    measure = partial(steps.measure, run_id=run_id, cases_limit=cases_limit)
    if not _steps(run_id, attempt, measure, notify=notify):
        return Run.objects.get(id=run_id)
    if evaluate is not None and steps.has_pending(run_id):
        if not heartbeat.hand_off(run_id, attempt):
            return Run.objects.get(id=run_id)
        try:
            evaluate(run_id)  # → evaluate_run, in a sandbox worker
        except Exception:  # no broker: evaluate here rather than wait for the watchdog
            log.exception("run %s: not handed to the sandbox queue; evaluating here", run_id)
            return evaluate_run(run_id=run_id, notify=notify)
        return Run.objects.get(id=run_id)
    return finish(run_id=run_id, attempt=attempt, notify=notify)


def evaluate_run(*, run_id: int, notify: Callable[[int], Any] | None = None) -> Run | None:
    """The sandbox queue's part of a handed-off run: claim it (once, or again when its sandbox
    worker died), then evaluate and the rest of the sequence."""
    attempt = heartbeat.claim_evaluation(run_id)
    if attempt is None:
        log.info("run %s is not waiting for the sandbox (or is evaluated elsewhere)", run_id)
        return Run.objects.filter(id=run_id).first()
    return finish(run_id=run_id, attempt=attempt, notify=notify)


def finish(*, run_id: int, attempt: int, notify: Callable[[int], Any] | None = None) -> Run:
    """Evaluate → summarise → rollups → budget settled → maintenance mark → done, then judge
    and alert."""
    if not _steps(
        run_id,
        attempt,
        partial(steps.evaluate, run_id=run_id, attempt=attempt),
        partial(steps.summarise_run, run_id=run_id),
        lambda: rollups.record_run(run=Run.objects.get(id=run_id)),  # kept past payloads
        lambda: budget.settle(Run.objects.select_related("pair").get(id=run_id)),
        partial(maintenance.mark_run, run_id=run_id),
        partial(steps.check_answered, run_id=run_id),  # mostly failed requests: a failed run
        notify=notify,
    ):
        return Run.objects.get(id=run_id)
    steps.mark_done(run_id=run_id, attempt=attempt)
    if Run.objects.filter(id=run_id).values_list("status", flat=True).first() != RunStatus.DONE:
        return Run.objects.get(id=run_id)  # lost between its last beat and the end
    judge(run_id=run_id)
    for alert in evaluate_alerts(run_id=run_id):
        if notify is not None:
            notify(alert.id)
    # after the last summary write; its rollups were a measured step, read by the judging
    record_run_end(run_id, rollups_written=True)
    return Run.objects.get(id=run_id)


def _steps(
    run_id: int,
    attempt: int,
    *actions: Callable[[], Any],
    notify: Callable[[int], Any] | None = None,
) -> bool:
    """Run the steps in order; False when one failed (the run is marked failed with its
    reason, its samples stay) or the run was lost to the watchdog or another worker. A run
    failed by its vendor (or a missing key) opens the pair's vendor alert (``vendor.failing``)."""
    try:
        for step in actions:
            step()
    except heartbeat.RunLost as exc:  # reaped or taken over: the run is no longer ours
        log.warning("%s; stopping", exc)
        return False
    except Exception as exc:
        by_vendor = isinstance(exc, steps.VENDOR_FAILURES)
        if by_vendor or isinstance(exc, heartbeat.DatabaseUnavailable):  # said in words
            log.warning("run %s failed: %s", run_id, exc)
        else:
            log.exception("run %s failed", run_id)
        steps.mark_failed(run_id=run_id, exc=exc, attempt=attempt)
        if isinstance(exc, heartbeat.DatabaseUnavailable):  # named as such, with its alert
            for alert in watchdog.database_unavailable(run_id=run_id):
                if notify is not None:
                    notify(alert.id)
        if by_vendor:  # the rules on the vendor's health, else the pair's vendor alert
            changed = evaluate_alerts(run_id=run_id)
            if not vendor.health_alert_open(run_id=run_id):
                changed += vendor.failing(run_id=run_id)
            for alert in changed:
                if notify is not None:
                    notify(alert.id)
        record_run_end(run_id)  # its requests still count in availability; its pages warm
        return False
    return True


def judge(*, run_id: int) -> None:
    """The verdict of an audit, then the run folded into its pair's stored evidence
    (``monitor.derived.evidence``: e-detector for audits, CUSUM for probes; a probe's
    capability outcomes into ``monitor.derived.loss_detectors``'s loss detectors)."""
    run = Run.objects.select_related("pair").get(id=run_id)
    if run.kind == RunKind.AUDIT:
        try:
            verdict.compute_verdict(run_id=run_id)
        except Exception as exc:  # the samples and summary stand; the page shows the error
            log.exception("verdict of run %s failed", run_id)
            Run.objects.filter(id=run_id).update(
                verdict=f"verdict not computed ({type(exc).__name__}: {exc})"
            )
    try:  # the pair's e-detector (audits) and CUSUM (probes), folded in once
        # a probe as read above; an audit again, its summary now has the verdict
        evidence.after_run(run_id=run_id, run=None if run.kind == RunKind.AUDIT else run)
    except Exception:  # the run stands; its pair's state is left as it was
        log.exception("monitoring state after run %s failed", run_id)
    try:  # a probe's capability outcomes, into the per-category loss detectors
        loss_detectors.after_run(run_id=run_id)
    except Exception:
        log.exception("capability loss detectors after run %s failed", run_id)


def evaluate_alerts(*, run_id: int) -> list[Alert]:
    """The rules after a done run (or, on the vendor's health only, a run its vendor failed):
    alerts opened now (recorded, perhaps flapping) and open ones whose condition cleared,
    resolved now with user None; both returned for notifying. The run is read once, with its
    pair and the pair's endpoints, for the rules and the vendor and sandbox alerts."""
    run = Run.objects.select_related("pair__fast", "pair__base").get(id=run_id)
    changed = []
    for outcome in alerts.evaluate_after_run(run_id=run_id, run=run):
        if outcome.opened:
            changed.append(lifecycle.opened(alert_id=outcome.alert.id))
            continue
        try:
            changed.append(
                lifecycle.resolve(alert_id=outcome.alert.id, note=outcome.note, send=False)
            )
        except lifecycle.LifecycleError:  # resolved meanwhile (by hand, a retry)
            log.info("alert %s was already resolved", outcome.alert.id)
    if run.status != RunStatus.DONE:  # failed by its vendor: the health rules only
        return changed
    changed += vendor.recovered(run_id=run_id, run=run)
    return changed + watchdog.sandbox_unavailable(run=run)
