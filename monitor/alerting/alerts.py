"""Alert rules evaluated after each run, and delivery of their alerts to channels.

A rule is a threshold on one metric of the run summary (``monitor.alerting.metrics_catalogue`` lists
them) aggregated over the pair's last K comparable runs (audits for the verdict). Aggregate:
the plain mean of the per-run values over those of the K runs whose metric has at least
``rule.min_n`` observations. Runs with fewer are skipped rather than
weighted down, because a P95 over three samples says nothing; when none of the K runs qualifies
the rule is not evaluated at all (an open alert stays open, none is opened).

Opening is claimed under a row lock on the rule, so evaluating the same run twice (a retried
task, two workers) opens no duplicate; a cleared condition is handed back and resolved by
``alert_lifecycle.resolve`` (a conditional update, so it resolves once). ``notify`` skips
channels that already received the same message for the alert, so a retried task does not send
twice; what is sent when (silences, maintenance, reminders, escalation, flapping) is
``alert_lifecycle``'s.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from statistics import fmean
from typing import Literal

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet

from evals.latency import min_n_for
from monitor.alerting import metrics_catalogue as catalogue
from monitor.alerting.transports import Event, TransportError, render_email, transport_for
from monitor.derived.run_summary import RunSummary
from monitor.models import Alert, AlertRule, Channel, Notification, Pair, Run, RunKind, RunStatus

logger = logging.getLogger(__name__)

DISABLE_AFTER = 5  # consecutive permanent failures before a channel is disabled


@dataclass(frozen=True)
class Reading:
    value: float | None
    n: int


def read_metric(summary: RunSummary, metric: str, tier: str) -> Reading | None:
    """One run's value of a rule metric and the n behind it; None when the summary lacks it.

    error_rate is every failed request (any class, 429s included) over all requests, unlike
    availability, which leaves 429s out of both counts (docs/measures.md).
    """
    if metric == "verdict_different":
        return verdict_reading(summary)
    if metric == "drift":
        return drift_reading(summary)
    if metric == "similarity":
        sim = summary.similar("fast_vs_base")
        return Reading(sim.mean_ratio, sim.n) if sim else None
    if metric in catalogue.PAIR_METRICS:  # the speed-ups
        kind = catalogue.PAIR_METRICS[metric].key
        n = min(summary.tier(t).metric(f"{kind}_ms").n for t in ("fast", "base"))
        return Reading(getattr(summary.speedup, kind), n)
    if tier not in summary.tiers:
        return None
    block = summary.tier(tier)
    key, pct, _, _ = catalogue.TIER_METRICS[metric]
    if pct:
        timing = block.metric(key)
        value = timing.get(pct)
        if value is None and timing.n >= summary.min_n:  # withheld below its own minimum n
            logger.info(
                "%s %s skipped: withheld at n = %d, it needs %d values",
                metric,
                pct,
                timing.n,
                min_n_for(float(pct[1:])),
            )
        return Reading(value, timing.n)
    if key == "error_rate":
        return Reading(block.error_rate, block.n)
    if key == "pass_rate":
        return Reading(block.pass_rate, block.n_tested)
    if key == "downgrade_rate":  # share of reported tiers ≠ the endpoint's expected_tier
        return Reading(block.downgrade_rate, block.n_tier_reported)
    return Reading(block.availability, block.n_served)


def verdict_reading(summary: RunSummary) -> Reading | None:
    """1.0 while the pair's e-detector is alarmed as of this audit, else 0.0, with the smaller
    tier's n; None before the audit was folded into the pair's evidence. A single audit's
    p-value never alerts on its own (``monitor.derived.evidence``)."""
    v = summary.verdict
    if v is None or "alarm" not in v.monitor:
        return None
    return Reading(1.0 if v.monitor["alarm"] else 0.0, v.n_per_tier)


def drift_reading(summary: RunSummary) -> Reading | None:
    """1.0 while the pair's CUSUM is alarmed as of this probe, else 0.0, with the runs behind
    it (the baseline's and those since); None while the baseline is being collected."""
    d = summary.drift
    if d is None or not d.past_calibration:
        return None
    return Reading(1.0 if d.state == "drift" else 0.0, d.baseline_runs + d.runs)


def budget_of(summary: RunSummary, metric: str) -> str:
    """The error budget the verdict or drift alarm was set for (empty for other metrics)."""
    if metric == "verdict_different" and summary.verdict:
        return summary.verdict.monitor.get("budget", "")
    if metric == "drift" and summary.drift:
        return summary.drift.budget
    return ""


def label(rule: AlertRule) -> str:
    return catalogue.label(rule.metric, rule.tier)


def fmt(rule: AlertRule, value: float | None) -> str:
    return catalogue.fmt(rule.metric, value)


def pair_link(pair: Pair) -> str:
    return f"{settings.SITE_URL.rstrip('/')}/pairs/{pair.name}/"


def _describe(
    rule: AlertRule, pair: Pair, value: float, n: int, runs: int, budget: str = "", cause: str = ""
) -> str:
    """``cause``: what failed, when the run was failed by its vendor (its error in words)."""
    word = "above" if rule.op == "gt" else "below"
    where = f"pair {pair.name}" + (" (simulated)" if pair.simulated else "")
    return (
        f"{label(rule)} is {fmt(rule, value)} (mean of {runs} run{'s' * (runs != 1)}, "
        f"n = {n}), {word} the threshold of {fmt(rule, rule.threshold)}, on {where}. "
        + (f"What failed: {cause}. " if cause else "")
        + (f"This alarm is set for an error budget: {budget}. " if budget else "")
        + pair_link(pair)
    )


def _aggregate(rule: AlertRule, runs: list[Run]) -> tuple[float, int, int] | None:
    """(mean value, total n, runs used) over the runs meeting min_n, or None if none do."""
    readings = [read_metric(run.summary_obj, rule.metric, rule.tier) for run in runs]
    used = [r for r in readings if r and r.value is not None and r.n >= rule.min_n]
    if not used:
        return None
    return fmean(r.value for r in used), sum(r.n for r in used), len(used)  # type: ignore[misc]


@dataclass(frozen=True)
class Outcome:
    """What one evaluation did to a rule on a pair: opened an alert, or found the condition
    of an open one cleared (``alert_lifecycle.resolve`` then resolves it, with ``note``)."""

    alert: Alert
    opened: bool
    note: str = ""


def _source(metric: str) -> str:
    """Which runs a rule aggregates: audit verdicts live on audit runs, which the probe trend
    leaves out; the health metrics also read the probes their vendor failed."""
    if metric == "verdict_different":
        return "audits"
    return "health" if metric in HEALTH_METRICS else "trend"


def _source_runs(source: str) -> QuerySet[Run]:
    if source == "audits":
        return Run.objects.filter(status=RunStatus.DONE, kind=RunKind.AUDIT)
    return health_runs() if source == "health" else Run.objects.trend()


def _recent_runs(rules: list[AlertRule], pair: Pair) -> dict[str, list[Run]]:
    """Per source, the pair's newest runs, newest first, read once for all the rules on it:
    as many as its rule that looks furthest back needs; each rule takes its ``last_k``. Only
    their summaries are read: the rules read nothing else of them."""
    deepest: dict[str, int] = {}
    for rule in rules:
        source = _source(rule.metric)
        deepest[source] = max(deepest.get(source, 0), rule.last_k)
    return {
        source: list(
            _source_runs(source)
            .filter(pair=pair)
            .order_by("-created_at", "-pk")
            .only("id", "summary")[:k]
        )
        for source, k in deepest.items()
    }


def _evaluate_rule(rule: AlertRule, run: Run, recent: list[Run]) -> Outcome | None:
    """``recent``: the pair's newest runs of the rule's source (:func:`_recent_runs`)."""
    pair = run.pair
    runs = recent[: rule.last_k]
    aggregate = _aggregate(rule, runs)
    if aggregate is None:
        return None
    value, n, used = aggregate
    breached = value > rule.threshold if rule.op == "gt" else value < rule.threshold
    with transaction.atomic():
        # The lock serialises evaluations of one rule, so the check-then-create below is safe.
        AlertRule.objects.select_for_update().filter(pk=rule.pk).exists()
        current = Alert.objects.filter(rule=rule, pair=pair, resolved_at__isnull=True).first()
        if breached and current is None:
            budget = budget_of(runs[0].summary_obj, rule.metric) if runs else ""
            cause = run.error if run.status == RunStatus.FAILED else ""
            message = _describe(rule, pair, value, n, used, budget, cause)
            alert = Alert.objects.create(
                rule=rule, pair=pair, run=run, message=message, value=value
            )
            return Outcome(alert, opened=True)
        if not breached and current is not None:
            note = (
                f"Resolved: {label(rule)} is back to {fmt(rule, value)} "
                f"(mean of {used} runs, n = {n})."
            )
            return Outcome(current, opened=False, note=note)
    return None


# Rules on the vendor's health also read the probes its failures failed (their requests
# mostly failed: ``monitor.derived.failures``), or an error rate above one half could never be
# seen; every other metric reads done runs only.
HEALTH_METRICS = ("error_rate", "availability")


def refused(runs: QuerySet[Run]) -> QuerySet[Run]:
    """Probes failed after they were summarised: failed by their vendor's answers."""
    return runs.filter(kind=RunKind.PROBE, status=RunStatus.FAILED, summary__has_key="tiers")


def health_runs() -> QuerySet[Run]:
    """Done probes and those their vendor failed: what the health metrics aggregate."""
    probes = Run.objects.filter(kind=RunKind.PROBE)
    return probes.filter(Q(status=RunStatus.DONE) | Q(pk__in=refused(probes).values("pk")))


def is_refused(run: Run) -> bool:
    """:func:`refused`, of a run already read."""
    summary = run.summary
    return (
        run.kind == RunKind.PROBE
        and run.status == RunStatus.FAILED
        and isinstance(summary, dict)
        and "tiers" in summary
    )


def evaluate_after_run(*, run_id: int, run: Run | None = None) -> list[Outcome]:
    """Evaluate every enabled rule for the run's pair: the alerts opened now and the open ones
    whose condition cleared (the pipeline resolves those). A probe its vendor failed is
    evaluated on the health metrics only. ``run``: that run as its caller just read it, with
    its pair and the pair's endpoints, so it is not read again."""
    run = run or Run.objects.select_related("pair__fast", "pair__base").get(pk=run_id)
    by_vendor = is_refused(run)
    if run.status != RunStatus.DONE and not by_vendor:
        return []
    rules = _rules_for(run.pair, health_only=by_vendor)
    recent = _recent_runs(rules, run.pair)
    changed = []
    for rule in rules:
        outcome = _evaluate_rule(rule, run, recent[_source(rule.metric)])
        if outcome is not None:
            changed.append(outcome)
    return changed


def _rules_for(pair: Pair, health_only: bool) -> list[AlertRule]:
    """The enabled rules on the pair (its own and the global ones), in order; a rule whose row
    cannot be evaluated is skipped with a warning."""
    rules = AlertRule.objects.filter(enabled=True).filter(Q(pair=pair) | Q(pair__isnull=True))
    rules = rules.exclude(metric__in=catalogue.SYSTEM_METRICS)
    if health_only:
        rules = rules.filter(metric__in=HEALTH_METRICS)
    usable = []
    for rule in rules.order_by("pk"):
        problem = catalogue.problem(rule.metric, rule.tier)
        if problem:  # a row written around AlertRule.clean (a shell, a migration)
            logger.warning("alert rule %s skipped: %s", rule.name, problem)
            continue
        usable.append(rule)
    return usable


HEADLINES = {
    "trigger": "ALERT",
    "resolve": "Resolved",
    "reminder": "Still firing",
    "escalation": "ESCALATED",
    "flapping": "FLAPPING",
    "acknowledge": "Acknowledged",
}


def render_alert(alert: Alert, kind: str = "") -> tuple[str, str, str]:
    """Subject, text and HTML of the alert; ``kind`` (a ``HEADLINES`` key) says what the
    message announces, by default its opening or its resolution."""
    rule, pair = alert.rule, alert.pair
    kind = kind or ("trigger" if alert.is_open else "resolve")
    context = {
        "alert": alert,
        "kind": kind,
        "headline": HEADLINES[kind],
        "resolved": not alert.is_open,
        "label": label(rule),
        "value": fmt(rule, alert.value),
        "op": dict(AlertRule.OPS)[rule.op],
        "threshold": fmt(rule, rule.threshold),
        "pair": pair,
        "simulated": pair.simulated,
        "link": pair_link(pair),
        "system": rule.metric in catalogue.SYSTEM_METRICS,
    }
    return render_email("alert", context)


def _last_ones_permanent(channel: Channel) -> bool:
    recent = list(channel.notifications.order_by("-created_at", "-pk")[:DISABLE_AFTER])
    return len(recent) == DISABLE_AFTER and all(not x.ok and x.permanent for x in recent)


def alert_event(alert: Alert) -> Event:
    """The alert as an ``Event``: one key for all its states, so PagerDuty's incident and a
    webhook receiver follow it from trigger to acknowledge to resolve."""
    action: Literal["trigger", "acknowledge", "resolve"]
    if not alert.is_open:
        action = "resolve"
    elif getattr(alert, "acknowledged_at", None):
        action = "acknowledge"
    else:
        action = "trigger"
    return Event(
        key=f"tierwatch-alert-{alert.pk}",
        action=action,
        link=pair_link(alert.pair),
        source=f"tierwatch pair {alert.pair.name}",
        details={
            "alert_id": alert.pk,
            "pair": alert.pair.name,
            "rule": alert.rule.name,
            "metric": alert.rule.metric,
            "value": alert.value,
            "simulated": alert.pair.simulated,
        },
    )


def deliver(
    alert: Alert | None,
    channel: Channel,
    subject: str,
    text: str,
    html: str,
    event: Event | None = None,
    kind: str = "",
) -> Notification:
    """One attempt, recorded as a Notification (``alert`` is None for a test message)."""
    error, permanent = "", False
    try:
        transport_for(channel, event).notify(subject, text, html)
    except TransportError as e:
        error, permanent = e.message, e.permanent
    except Exception as e:  # a bug in a transport must not stop the other channels
        logger.exception("channel %s: unexpected error", channel.name)
        error = f"unexpected {type(e).__name__}"  # the text might quote a secret URL
    notification = Notification.objects.create(
        alert=alert,
        channel=channel,
        subject=subject[:300],
        ok=not error,
        error=error,
        permanent=permanent,
        kind=kind,
    )
    channels = Channel.objects.filter(pk=channel.pk)
    if not error:
        channels.update(last_error="", consecutive_failures=0)
        return notification
    channels.update(last_error=error, consecutive_failures=F("consecutive_failures") + 1)
    if permanent and _last_ones_permanent(channel):
        channels.update(disabled=True)
        logger.warning("channel %s disabled after %d permanent failures", channel, DISABLE_AFTER)
    return notification


def channels_for(alert: Alert) -> QuerySet[Channel]:
    """The rule's enabled channels; a system alert on a rule without any goes to every
    channel (the monitor itself is down: tell everyone)."""
    channels = alert.rule.channels.all()
    if alert.rule.metric in catalogue.SYSTEM_METRICS and not channels.exists():
        channels = Channel.objects.all()
    return channels.filter(disabled=False).order_by("pk")


def notify(*, alert_id: int) -> list[Notification]:
    """Send the alert (opened or resolved) to every enabled channel of its rule, one
    Notification row per attempt. Never raises for a delivery failure."""
    alert = Alert.objects.select_related("rule", "pair__fast", "pair__base").filter(pk=alert_id)
    alert = alert.first()
    if alert is None:
        return []
    subject, text, html = render_alert(alert)
    event = alert_event(alert)
    sent = []
    for channel in channels_for(alert):
        done = Notification.objects.filter(alert=alert, channel=channel, subject=subject[:300])
        if done.filter(ok=True).exists():
            continue  # a retried task: this channel already has this message
        sent.append(
            deliver(
                alert,
                channel,
                subject,
                text,
                html,
                event,
                kind="trigger" if alert.is_open else "resolve",
            )
        )
    return sent
