"""The alert lifecycle: opened and resolved through the real pipeline against the simulated
vendor, acknowledge / silence / resolve, reminders and escalation with the clock passed as
``now=``, flapping notified once, maintenance holding notifications and marking the run."""
# ruff: noqa: F811  (pytest fixtures imported from test_transports are used as arguments)

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from monitor.alerting import lifecycle
from monitor.models import (
    Alert,
    AlertRule,
    AlertTransition,
    Channel,
    MaintenanceWindow,
    Notification,
    Run,
)
from monitor.runs.pipeline import evaluate_alerts, execute_run
from monitor.runs.steps import create_run
from tests import factories
from tests.factories import vendor_pair as make_pair
from tests.monitor.alert_runs import add_run
from tests.support import WEBHOOK_ENV

pytestmark = pytest.mark.django_db


def slack_channel(name: str = "ops") -> Channel:
    return Channel.objects.create(name=name, kind="slack", target=WEBHOOK_ENV)


@pytest.fixture
def pair(db):
    return factories.pair()


@pytest.fixture
def rule(pair):
    rule = AlertRule.objects.create(
        name="fast-ttft",
        pair=pair,
        metric="ttft_p95",
        tier="fast",
        op="gt",
        threshold=500.0,
        last_k=1,
        min_n=5,
    )
    rule.channels.add(slack_channel())
    return rule


@pytest.fixture
def user(db):
    return User.objects.create_user("olga", password="pw")


def fire(pair) -> Alert:
    """A run over the threshold: the pipeline's alert step opens one alert."""
    (alert,) = evaluate_alerts(run_id=add_run(pair, ttft=900).id)
    assert alert.is_open and alert.state == "firing"
    return alert


def clear(pair) -> Alert:
    (alert,) = evaluate_alerts(run_id=add_run(pair, ttft=100).id)
    assert not alert.is_open and alert.state == "resolved"
    return alert


def test_the_real_pipeline_opens_then_resolves_with_a_recovery_notice(demo_vendor_url, slack):
    pair = make_pair(demo_vendor_url, fast_model="demo-broken-html", suite="smoke", repeat=1)
    rule = AlertRule.objects.create(
        name="fast-errors",
        pair=pair,
        metric="error_rate",
        tier="fast",
        op="gt",
        threshold=0.5,
        last_k=1,
        min_n=2,
    )
    rule.channels.add(slack_channel())
    sent = []

    def announce(alert_id: int) -> None:  # what notify_task does, in-process
        sent.extend(lifecycle.announce(alert_id=alert_id))

    run = execute_run(run_id=create_run(pair=pair, seed=1).id, cases_limit=3, notify=announce)
    # every fast request failed: a run failed by its vendor, still evaluated on error rate
    assert run.status == "failed" and run.error.startswith("fast tier: HTTP 502"), run.error
    alert = Alert.objects.get(rule=rule)
    assert alert.state == "firing" and alert.notify_count == 1
    pair.fast.model = "demo-fast"  # the vendor recovers
    pair.fast.save()
    run = execute_run(run_id=create_run(pair=pair, seed=2).id, cases_limit=3, notify=announce)
    alert.refresh_from_db()
    assert alert.state == "resolved" and alert.resolved_at is not None
    assert "Resolved: fast error rate is back to 0" in alert.message
    assert [(n.kind, n.ok) for n in sent] == [("trigger", True), ("resolve", True)]
    assert [p["text"].split(" ")[1] for p in slack.posted] == ["ALERT", "Resolved"]
    assert list(alert.transitions.values_list("kind", "user")) == [
        ("opened", None),
        ("resolved", None),
    ]


def test_acknowledge_records_who_and_tells_the_channels(pair, rule, user, slack):
    alert = fire(pair)
    lifecycle.announce(alert_id=alert.pk)
    acked = lifecycle.acknowledge(alert_id=alert.pk, user=user, note="looking at it")
    assert acked.state == "acknowledged" and acked.acknowledged_by == user
    assert acked.ack_note == "looking at it" and acked.acknowledged_at is not None
    assert "Acknowledged by olga" in slack.posted[-1]["text"]
    with pytest.raises(lifecycle.LifecycleError, match="acknowledged, not firing"):
        lifecycle.acknowledge(alert_id=alert.pk, user=user)


def test_an_acknowledged_alert_is_neither_reminded_nor_escalated(pair, rule, user, slack):
    rule.renotify_hours, rule.escalate_after_minutes = 1, 10
    rule.save()
    rule.escalation_channels.add(slack_channel("boss"))
    alert = fire(pair)
    lifecycle.announce(alert_id=alert.pk)
    lifecycle.acknowledge(alert_id=alert.pk, user=user)
    later = timezone.now() + timedelta(hours=5)
    assert lifecycle.sweep(now=later) == {"reminder": 0, "escalation": 0}


def test_it_reminds_every_n_hours_while_firing(pair, rule, slack):
    rule.renotify_hours = 4
    rule.save()
    alert = fire(pair)
    start = timezone.now()
    lifecycle.announce(alert_id=alert.pk, now=start)
    assert lifecycle.sweep(now=start + timedelta(hours=3)) == {"reminder": 0, "escalation": 0}
    assert lifecycle.sweep(now=start + timedelta(hours=4, minutes=1))["reminder"] == 1
    assert lifecycle.sweep(now=start + timedelta(hours=5))["reminder"] == 0  # next due at 8 h 1
    assert lifecycle.sweep(now=start + timedelta(hours=8, minutes=2))["reminder"] == 1
    kinds = list(
        Notification.objects.filter(alert=alert).order_by("pk").values_list("kind", flat=True)
    )
    assert kinds == ["trigger", "reminder", "reminder"]
    assert slack.posted[-1]["text"].startswith("[tierwatch] Still firing")


def test_it_escalates_once_to_the_second_channel_set(pair, rule, slack):
    rule.escalate_after_minutes = 30
    rule.save()
    boss = slack_channel("boss")
    rule.escalation_channels.add(boss)
    alert = fire(pair)
    start = timezone.now()
    lifecycle.announce(alert_id=alert.pk, now=start)
    assert lifecycle.sweep(now=start + timedelta(minutes=20))["escalation"] == 0
    assert lifecycle.sweep(now=start + timedelta(minutes=31))["escalation"] == 1
    assert lifecycle.sweep(now=start + timedelta(minutes=90))["escalation"] == 0
    (escalation,) = Notification.objects.filter(kind="escalation")
    assert escalation.channel == boss and escalation.ok
    assert slack.posted[-1]["text"].startswith("[tierwatch] ESCALATED")
    assert Alert.objects.get(pk=alert.pk).escalated_at is not None


def test_a_silenced_alert_is_held_until_the_time_passes(pair, rule, user, slack):
    rule.renotify_hours = 1
    rule.save()
    alert = fire(pair)
    start = timezone.now()
    lifecycle.announce(alert_id=alert.pk, now=start)
    lifecycle.silence(alert_id=alert.pk, user=user, until=start + timedelta(hours=6))
    assert lifecycle.sweep(now=start + timedelta(hours=2))["reminder"] == 0
    assert len(slack.posted) == 1
    assert lifecycle.sweep(now=start + timedelta(hours=6, minutes=1))["reminder"] == 1
    assert len(slack.posted) == 2
    with pytest.raises(lifecycle.LifecycleError, match="not in the future"):
        lifecycle.silence(alert_id=alert.pk, user=user, until=start - timedelta(hours=1))


def test_a_silenced_opening_is_recorded_as_held(pair, rule, user, slack):
    alert = fire(pair)
    lifecycle.silence(alert_id=alert.pk, user=user, until=timezone.now() + timedelta(hours=1))
    (held,) = lifecycle.announce(alert_id=alert.pk)
    assert held.held == "silenced" and not held.ok and slack.posted == []


def test_a_manual_resolve_sends_the_recovery_and_resolves_once(pair, rule, user, slack):
    alert = fire(pair)
    resolved = lifecycle.resolve(alert_id=alert.pk, user=user, note="vendor fixed it")
    assert resolved.state == "resolved" and "vendor fixed it" in resolved.message
    assert slack.posted[-1]["text"].startswith("[tierwatch] Resolved")
    with pytest.raises(lifecycle.LifecycleError, match="already resolved"):
        lifecycle.resolve(alert_id=alert.pk, user=user)


def test_flapping_is_notified_once_until_it_settles(pair, rule, slack):
    for _ in range(6):  # open, resolve, open, resolve, open (flapping), ... within seconds
        lifecycle.announce(alert_id=fire(pair).pk)
        lifecycle.announce(alert_id=clear(pair).pk)
    rows = list(Notification.objects.order_by("pk").values_list("kind", "held"))
    assert rows[:5] == [
        ("trigger", ""),
        ("resolve", ""),
        ("trigger", ""),
        ("resolve", ""),
        ("flapping", ""),
    ]
    assert all(held == "flapping" for _, held in rows[5:]) and len(rows) == 12
    assert [p["text"].split(" ")[1] for p in slack.posted] == [
        "ALERT",
        "Resolved",
        "ALERT",
        "Resolved",
        "FLAPPING",
    ]
    # Six quiet hours later it has settled: the next opening is an ordinary alert again.
    Alert.objects.update(opened_at=timezone.now() - timedelta(hours=7))
    AlertTransition.objects.update(at=timezone.now() - timedelta(hours=7))
    Notification.objects.update(created_at=timezone.now() - timedelta(hours=7))
    alert = fire(pair)
    assert not alert.flapping
    (sent,) = lifecycle.announce(alert_id=alert.pk)
    assert sent.kind == "trigger" and sent.ok


def test_maintenance_holds_notifications_and_marks_the_run(demo_vendor_url, slack):
    pair = make_pair(demo_vendor_url, fast_model="demo-broken-html", suite="smoke", repeat=1)
    rule = AlertRule.objects.create(
        name="fast-errors",
        pair=pair,
        metric="error_rate",
        tier="fast",
        op="gt",
        threshold=0.5,
        last_k=1,
        min_n=2,
    )
    rule.channels.add(slack_channel())
    now = timezone.now()
    MaintenanceWindow.objects.create(
        vendor_host="127.0.0.1",
        starts_at=now - timedelta(minutes=5),
        ends_at=now + timedelta(hours=1),
        reason="vendor upgrade",
    )
    held = []
    run = execute_run(
        run_id=create_run(pair=pair, seed=1).id,
        cases_limit=2,
        notify=lambda alert_id: held.extend(lifecycle.announce(alert_id=alert_id)),
    )
    assert Run.objects.get(pk=run.pk).in_maintenance
    assert [(n.kind, n.held, n.ok) for n in held] == [("trigger", "maintenance", False)]
    assert slack.posted == []
    # After the window the sweep sends the held opening, once.
    alert = Alert.objects.get(rule=rule)
    after = now + timedelta(hours=1, minutes=1)
    lifecycle.sweep(now=after)
    lifecycle.sweep(now=after + timedelta(minutes=5))
    assert [p["text"].split(" ")[1] for p in slack.posted] == ["ALERT"]
    assert Alert.objects.get(pk=alert.pk).notify_count == 1


def test_a_run_outside_any_window_is_not_marked(demo_vendor_url):
    pair = make_pair(demo_vendor_url, suite="smoke", repeat=1)
    now = timezone.now()
    MaintenanceWindow.objects.create(
        pair=pair,
        starts_at=now - timedelta(hours=3),
        ends_at=now - timedelta(hours=2),
        reason="yesterday's",
    )
    run = execute_run(run_id=create_run(pair=pair, seed=1).id, cases_limit=1)
    assert not Run.objects.get(pk=run.pk).in_maintenance
