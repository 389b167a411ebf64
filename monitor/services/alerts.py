"""Alert rules evaluated after each run, and delivery of their alerts to channels.

A rule is a threshold on one metric of the run summary (docs/measures.md) aggregated over the pair's
last K done runs. Aggregate: the plain mean of the per-run values over those of the K runs whose
metric has at least ``rule.min_n`` observations. Runs with fewer are skipped rather than
weighted down, because a P95 over three samples says nothing; when none of the K runs qualifies
the rule is not evaluated at all (an open alert stays open, none is opened).

Opening and resolving are claimed under a row lock on the rule, so evaluating the same run
twice (a retried task, two workers) opens no duplicate; ``notify`` skips channels that already
received the same message for the alert, so a retried task does not send twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from monitor.models import Alert, AlertRule, Channel, Notification, Pair, Run
from monitor.services.verdict import read_verdict_metric
from monitor.transports import Event, TransportError, render_email, transport_for

logger = logging.getLogger(__name__)

DISABLE_AFTER = 5  # consecutive permanent failures before a channel is disabled

TIER_METRICS = {  # name: (summary key, percentile or None, label, unit)
    "ttft_p50": ("ttft_ms", "p50", "TTFT P50", "ms"),
    "ttft_p95": ("ttft_ms", "p95", "TTFT P95", "ms"),
    "e2e_p50": ("e2e_ms", "p50", "E2E P50", "ms"),
    "e2e_p95": ("e2e_ms", "p95", "E2E P95", "ms"),
    "tpot_p50": ("tpot_ms", "p50", "TPOT P50", "ms"),
    "error_rate": ("error_rate", None, "error rate", "%"),
    "availability": ("availability", None, "availability", "%"),
    "pass_rate": ("pass_rate", None, "unit-test pass rate", "%"),
    "downgrade_rate": ("served_tier", None, "served-tier downgrade rate", "%"),
}
PAIR_METRICS = {
    "similarity": ("similarity", None, "similarity fast vs base (mean Indel ratio)", ""),
    "speedup_ttft": ("ttft", None, "TTFT speed-up (base / fast)", "x"),
    "speedup_e2e": ("e2e", None, "E2E speed-up (base / fast)", "x"),
    "verdict_different": ("verdict", None, "audit verdict: different model (1 = yes)", ""),
    "drift": ("drift", None, "drift of a tracked statistic (1 = yes)", ""),
}


@dataclass(frozen=True)
class Reading:
    value: float | None
    n: int


def read_metric(summary: dict[str, Any], metric: str, tier: str) -> Reading | None:
    """One run's value of a rule metric and the n behind it; None when the summary lacks it.

    error_rate is every failed request (any class, 429s included) over all requests, unlike
    availability, which leaves 429s out of both counts (docs/measures.md).
    """
    if metric in PAIR_METRICS:
        if metric in ("verdict_different", "drift"):
            return read_verdict_metric(summary, metric)
        if metric == "similarity":
            block = (summary.get("similarity") or {}).get("fast_vs_base") or {}
            return Reading(block.get("mean_ratio"), block.get("n") or 0) if block else None
        tiers = summary.get("tiers") or {}
        kind = PAIR_METRICS[metric][0]
        n = min(((tiers.get(t) or {}).get(f"{kind}_ms") or {}).get("n") or 0
                for t in ("fast", "base"))
        return Reading((summary.get("speedup") or {}).get(kind), n)
    block = (summary.get("tiers") or {}).get(tier)
    if not block:
        return None
    key, pct, _, _ = TIER_METRICS[metric]
    if pct:
        timing = block.get(key) or {}
        return Reading(timing.get(pct), timing.get("n") or 0)
    n = block.get("n") or 0
    if key == "error_rate":
        return Reading((n - block.get("n_ok", 0)) / n if n else None, n)
    if key == "pass_rate":
        return Reading(block.get("pass_rate"), block.get("n_tested") or 0)
    if key == "served_tier":  # share of reported tiers ≠ the endpoint's expected_tier
        served = block.get("served_tier") or {}
        return Reading(served.get("downgrade_rate"), served.get("n_reported") or 0)
    return Reading(block.get("availability"), n - (block.get("rate_limited") or 0))


def check_rule(rule: AlertRule) -> None:
    """Raise ValueError naming what is wrong with a rule's metric/tier combination."""
    if rule.metric in PAIR_METRICS:
        if rule.tier != "pair":
            raise ValueError(f"metric {rule.metric} compares the tiers: set tier to 'pair'")
    elif rule.metric in TIER_METRICS:
        if rule.tier not in ("fast", "base"):
            raise ValueError(f"metric {rule.metric} is per tier: set tier to 'fast' or 'base'")
    else:
        known = ", ".join([*TIER_METRICS, *PAIR_METRICS])
        raise ValueError(f"unknown metric {rule.metric!r}; expected one of {known}")


def label(rule: AlertRule) -> str:
    if rule.metric in PAIR_METRICS:
        return PAIR_METRICS[rule.metric][2]
    return f"{rule.tier} {TIER_METRICS[rule.metric][2]}"


def fmt(rule: AlertRule, value: float | None) -> str:
    if value is None:
        return "n/a"
    unit = (PAIR_METRICS.get(rule.metric) or TIER_METRICS[rule.metric])[3]
    if unit == "ms":
        return f"{value:.0f} ms"
    if unit == "%":
        return f"{100 * value:.1f}%"
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:.3f}"


def pair_link(pair: Pair) -> str:
    return f"{settings.SITE_URL.rstrip('/')}/pairs/{pair.name}/"


def is_simulated(pair: Pair) -> bool:
    return pair.fast.simulated or pair.base.simulated


def _describe(rule: AlertRule, pair: Pair, value: float, n: int, runs: int) -> str:
    word = "above" if rule.op == "gt" else "below"
    where = f"pair {pair.name}" + (" (simulated)" if is_simulated(pair) else "")
    return (
        f"{label(rule)} is {fmt(rule, value)} (mean of {runs} run{'s' * (runs != 1)}, "
        f"n = {n}), {word} the threshold of {fmt(rule, rule.threshold)}, on {where}. "
        f"{pair_link(pair)}"
    )


def _aggregate(rule: AlertRule, runs: list[Run]) -> tuple[float, int, int] | None:
    """(mean value, total n, runs used) over the runs meeting min_n, or None if none do."""
    readings = [read_metric(run.summary or {}, rule.metric, rule.tier) for run in runs]
    used = [r for r in readings if r and r.value is not None and r.n >= rule.min_n]
    if not used:
        return None
    return fmean(r.value for r in used), sum(r.n for r in used), len(used)  # type: ignore[misc]


def _evaluate_rule(rule: AlertRule, run: Run) -> Alert | None:
    pair = run.pair
    # Audit verdicts live on audit runs, which the probe trend leaves out.
    source = (Run.objects.filter(status="done", kind="audit")
              if rule.metric == "verdict_different" else Run.objects.trend())
    runs = list(source.filter(pair=pair).order_by("-created_at", "-pk")[: rule.last_k])
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
            message = _describe(rule, pair, value, n, used)
            return Alert.objects.create(rule=rule, pair=pair, run=run, message=message, value=value)
        if not breached and current is not None:
            note = (f"\nResolved: {label(rule)} is back to {fmt(rule, value)} "
                    f"(mean of {used} runs, n = {n}).")
            claimed = Alert.objects.filter(pk=current.pk, resolved_at__isnull=True).update(
                resolved_at=timezone.now(), message=current.message + note
            )
            if claimed:
                current.refresh_from_db()
                return current
    return None


def evaluate_after_run(*, run_id: int) -> list[Alert]:
    """Evaluate every enabled rule for the run's pair; return alerts opened or resolved now."""
    run = Run.objects.select_related("pair__fast", "pair__base").get(pk=run_id)
    if run.status != "done":
        return []
    rules = AlertRule.objects.filter(enabled=True).filter(Q(pair=run.pair) | Q(pair__isnull=True))
    changed = []
    for rule in rules.order_by("pk"):
        try:
            check_rule(rule)
        except ValueError as e:
            logger.warning("alert rule %s skipped: %s", rule.name, e)
            continue
        alert = _evaluate_rule(rule, run)
        if alert is not None:
            changed.append(alert)
    return changed


def render_alert(alert: Alert) -> tuple[str, str, str]:
    rule, pair = alert.rule, alert.pair
    context = {
        "alert": alert,
        "resolved": not alert.is_open,
        "label": label(rule),
        "value": fmt(rule, alert.value),
        "op": dict(AlertRule.OPS)[rule.op],
        "threshold": fmt(rule, rule.threshold),
        "pair": pair,
        "simulated": is_simulated(pair),
        "link": pair_link(pair),
    }
    return render_email("alert", context)


def _last_ones_permanent(channel: Channel) -> bool:
    recent = list(channel.notifications.order_by("-created_at", "-pk")[:DISABLE_AFTER])
    return len(recent) == DISABLE_AFTER and all(not x.ok and x.permanent for x in recent)


def alert_event(alert: Alert) -> Event:
    """The alert as an ``Event``: one key for all its states, so PagerDuty's incident and a
    webhook receiver follow it from trigger to acknowledge to resolve."""
    if not alert.is_open:
        action = "resolve"
    elif getattr(alert, "acknowledged_at", None):
        action = "acknowledge"
    else:
        action = "trigger"
    return Event(
        key=f"tierwatch-alert-{alert.pk}", action=action, link=pair_link(alert.pair),
        source=f"tierwatch pair {alert.pair.name}",
        details={"alert_id": alert.pk, "pair": alert.pair.name, "rule": alert.rule.name,
                 "metric": alert.rule.metric, "value": alert.value,
                 "simulated": is_simulated(alert.pair)},
    )


def _deliver(alert: Alert | None, channel: Channel, subject: str, text: str, html: str,
             event: Event | None = None) -> Notification:
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
        alert=alert, channel=channel, subject=subject[:300], ok=not error, error=error,
        permanent=permanent,
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
    for channel in alert.rule.channels.filter(disabled=False).order_by("pk"):
        done = Notification.objects.filter(alert=alert, channel=channel, subject=subject[:300])
        if done.filter(ok=True).exists():
            continue  # a retried task: this channel already has this message
        sent.append(_deliver(alert, channel, subject, text, html, event))
    return sent
