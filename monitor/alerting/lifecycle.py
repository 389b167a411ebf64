"""An alert's life after it opens: acknowledge, silence, resolve; what is sent, when, to whom.

States: firing → acknowledged → resolved (firing → resolved directly when the condition clears
or someone resolves it). A silence (``silenced_until``) is not a state: the alert keeps its
state and nothing is sent for it until the time passes. Every change is an
``AlertTransition`` row, which the incident timeline shows and the flapping rule counts.

What is sent, through ``announce``:

- **trigger / resolve**: when the pipeline opens an alert or its condition clears on a later
  run (the recovery notice), through the rule's channels.
- **acknowledge**: the same channels learn who acknowledged (PagerDuty's incident follows).
- **reminder**: every ``rule.renotify_hours`` while firing and not acknowledged (``sweep``, a
  beat task). An alert whose opening was held (maintenance, silence) gets its first notice
  from the sweep once the hold ends.
- **escalation**: once, to ``rule.escalation_channels``, when still firing and not
  acknowledged ``rule.escalate_after_minutes`` after opening (``sweep``).

Held, not sent (a Notification row with ``held`` set per channel, so the record shows it):
while the pair is in a maintenance window, while the alert is silenced, and while the rule is
flapping. **Flapping**: a rule on a pair with at least ``FLAP_CHANGES`` openings and
resolutions within ``FLAP_WINDOW`` (5 in 6 h: open, resolve, open, resolve, open — the third
opening) is flapping; the alert that reaches the count is sent once as "flapping", and every
later opening or resolution of that rule on that pair is held until ``FLAP_WINDOW`` passes
with fewer changes (it has settled). Two openings in 6 h are still sent as they happen: a
recovery that fails once is news, the third time it is noise.

Times come from a ``now`` argument (default ``timezone.now()``), so tests advance the clock
by passing it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from monitor.alerting import alerts, maintenance
from monitor.alerting import metrics_catalogue as catalogue
from monitor.models import (
    Alert,
    AlertState,
    AlertTransition,
    Channel,
    Notification,
)

FLAP_CHANGES = 5
FLAP_WINDOW = timedelta(hours=6)
ONCE = ("trigger", "resolve", "acknowledge", "flapping", "escalation")  # sent once per channel


class LifecycleError(ValueError):
    """The change does not apply to the alert in its state (e.g. acknowledging a resolved
    alert); the message says why."""


def _get(alert_id: int) -> Alert:
    alert = (
        Alert.objects.select_related("rule", "pair__fast", "pair__base", "acknowledged_by")
        .filter(pk=alert_id)
        .first()
    )
    if alert is None:
        raise LifecycleError(f"no alert with id {alert_id}")
    return alert


def _user(user):
    return user if user is not None and getattr(user, "is_authenticated", False) else None


def _record(alert: Alert, kind: str, at: datetime, user=None, note: str = "") -> None:
    AlertTransition.objects.create(alert=alert, kind=kind, at=at, user=_user(user), note=note)


def acknowledge(*, alert_id: int, user, note: str = "", now: datetime | None = None) -> Alert:
    """Firing → acknowledged: reminders and escalation stop; the channels are told who."""
    now = now or timezone.now()
    with transaction.atomic():
        claimed = Alert.objects.filter(pk=alert_id, state=AlertState.FIRING).update(
            state=AlertState.ACKNOWLEDGED,
            acknowledged_by=_user(user),
            acknowledged_at=now,
            ack_note=note,
        )
        alert = _get(alert_id)
        if not claimed:
            raise LifecycleError(f"alert {alert_id} is {alert.state}, not firing")
        _record(alert, "acknowledged", now, user, note)
    announce(alert=alert, kind="acknowledge", now=now)
    return alert


def silence(
    *, alert_id: int, user, until: datetime, note: str = "", now: datetime | None = None
) -> Alert:
    """Send nothing for this alert until ``until`` (a later silence replaces an earlier one)."""
    now = now or timezone.now()
    if until <= now:
        raise LifecycleError(f"silence until {until:%Y-%m-%d %H:%M} UTC: that is not in the future")
    alert = _get(alert_id)
    if not alert.is_open:
        raise LifecycleError(f"alert {alert_id} is resolved; there is nothing to silence")
    Alert.objects.filter(pk=alert_id).update(silenced_until=until)
    _record(
        alert,
        "silenced",
        now,
        user,
        f"until {until:%Y-%m-%d %H:%M} UTC" + (f": {note}" if note else ""),
    )
    return _get(alert_id)


def resolve(
    *, alert_id: int, user=None, note: str = "", now: datetime | None = None, send: bool = True
) -> Alert:
    """Resolve the alert, by hand (``user``) or because its condition cleared (user None).

    Resolving twice resolves once (a conditional update). With ``send`` the recovery notice
    goes out now; the pipeline passes ``send=False`` and hands the alert to its notify task.
    """
    now = now or timezone.now()
    with transaction.atomic():
        current = _get(alert_id)
        if not current.is_open:
            raise LifecycleError(f"alert {alert_id} is already resolved")
        who = _user(user)
        line = note or (f"Resolved by {who.get_username()}." if who else "")
        message = current.message + (f"\n{line}" if line else "")
        claimed = Alert.objects.filter(pk=alert_id, resolved_at__isnull=True).update(
            state=AlertState.RESOLVED,
            resolved_at=now,
            message=message,
        )
        if not claimed:
            raise LifecycleError(f"alert {alert_id} is already resolved")
        alert = _get(alert_id)
        _record(alert, "resolved", now, user, note)
    if send:
        announce(alert=alert, now=now)
    return alert


def opened(*, alert_id: int, now: datetime | None = None) -> Alert:
    """Record an opening the pipeline made, and mark the alert flapping when this opening
    brings the rule's changes on the pair within ``FLAP_WINDOW`` to ``FLAP_CHANGES``."""
    now = now or timezone.now()
    alert = _get(alert_id)
    _record(alert, "opened", now)
    if changes(alert, now) >= FLAP_CHANGES:
        Alert.objects.filter(pk=alert_id).update(flapping=True)
        alert.flapping = True
    return alert


def changes(alert: Alert, now: datetime) -> int:
    """Openings and resolutions of the alert's rule on its pair within ``FLAP_WINDOW``."""
    return AlertTransition.objects.filter(
        alert__rule=alert.rule_id,
        alert__pair=alert.pair_id,
        kind__in=("opened", "resolved"),
        at__gt=now - FLAP_WINDOW,
        at__lte=now,
    ).count()


def _flap_notice_sent(alert: Alert, now: datetime) -> bool:
    return Notification.objects.filter(
        alert__rule=alert.rule_id,
        alert__pair=alert.pair_id,
        kind="flapping",
        created_at__gt=now - FLAP_WINDOW,
    ).exists()


def hold_reason(alert: Alert, now: datetime, kind: str = "") -> str:
    """Why a message about the alert is held now ("" to send): maintenance, silenced,
    flapping. A system alert (the monitor itself: a lost worker, an overdue schedule) is not
    held by a vendor's maintenance window."""
    system = alert.rule.metric in catalogue.SYSTEM_METRICS
    if not system and maintenance.active_window(alert.pair, now):
        return "maintenance"
    if alert.silenced_until and alert.silenced_until > now:
        return "silenced"
    if (
        kind != "flapping"
        and (alert.flapping or changes(alert, now) >= FLAP_CHANGES)
        and _flap_notice_sent(alert, now)
    ):
        return "flapping"
    return ""


def announce(
    *,
    alert: Alert | None = None,
    alert_id: int | None = None,
    kind: str = "",
    channels: Iterable[Channel] | None = None,
    now: datetime | None = None,
) -> list[Notification]:
    """Send (or hold) one message about the alert to its rule's enabled channels (or the given
    ones), one Notification row per channel. ``kind`` defaults to trigger/resolve by state,
    and a trigger of a flapping alert becomes the one "flapping" notice."""
    now = now or timezone.now()
    alert = alert or _get(alert_id)  # type: ignore[arg-type]
    kind = kind or ("trigger" if alert.is_open else "resolve")
    if kind == "trigger" and alert.flapping and not _flap_notice_sent(alert, now):
        kind = "flapping"
    targets = list(channels if channels is not None else alerts.channels_for(alert))
    reason = hold_reason(alert, now, kind)
    subject, text, html = alerts.render_alert(alert, kind)
    event = alerts.alert_event(alert)
    out = []
    for channel in targets:
        if (
            kind in ONCE
            and Notification.objects.filter(
                alert=alert, channel=channel, kind=kind, ok=True
            ).exists()
        ):
            continue  # a retried task: this channel already has this message
        if reason:
            out.append(
                Notification.objects.create(
                    alert=alert, channel=channel, subject=subject[:300], kind=kind, held=reason
                )
            )
        else:
            out.append(alerts.deliver(alert, channel, subject, text, html, event, kind=kind))
    if any(n.ok for n in out):
        Alert.objects.filter(pk=alert.pk).update(
            last_notified_at=now, notify_count=alert.notify_count + 1
        )
    return out


def sweep(*, now: datetime | None = None) -> dict[str, int]:
    """The beat task's work: reminders and escalations due at ``now`` for firing,
    unacknowledged alerts; returns how many of each were sent (held ones are not counted)."""
    now = now or timezone.now()
    done = {"reminder": 0, "escalation": 0}
    firing = (
        Alert.objects.filter(state=AlertState.FIRING, resolved_at__isnull=True)
        .select_related("rule", "pair__fast", "pair__base")
        .order_by("pk")
    )
    for alert in firing:
        if hold_reason(alert, now, "reminder"):
            continue
        rule = alert.rule
        targets = list(rule.escalation_channels.filter(disabled=False).order_by("pk"))
        if (
            targets
            and rule.escalate_after_minutes is not None
            and alert.escalated_at is None
            and now >= alert.opened_at + timedelta(minutes=rule.escalate_after_minutes)
        ):
            sent = announce(alert=alert, kind="escalation", channels=targets, now=now)
            Alert.objects.filter(pk=alert.pk).update(escalated_at=now)
            _record(alert, "escalated", now, note=", ".join(c.name for c in targets))
            done["escalation"] += any(n.ok for n in sent)
            alert.refresh_from_db()
        last = alert.last_notified_at
        due = last is None or (
            rule.renotify_hours is not None and now >= last + timedelta(hours=rule.renotify_hours)
        )
        if due:
            kind = "trigger" if alert.notify_count == 0 else "reminder"
            sent = announce(alert=alert, kind=kind, now=now)
            if any(n.ok for n in sent) and kind == "reminder":
                _record(alert, "reminded", now)
                done["reminder"] += 1
    return done
