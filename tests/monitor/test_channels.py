"""Apprise, signed webhook and PagerDuty transports, and "send test", against real receivers
on 127.0.0.1: the HMAC is checked by the receiver, the PagerDuty receiver checks the Events v2
shape, and Apprise posts to a ``json://`` URL served here."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth import get_user_model

from monitor.alerting.alerts import notify
from monitor.alerting.channels import send_test
from monitor.alerting.transports import (
    Event,
    TransportError,
    Webhook,
    transport_for,
    verify_signature,
)
from monitor.models import Alert, AlertRule, Channel, Notification
from tests import factories

SECRET_ENV = "TIERWATCH_TEST_WEBHOOK_SECRET"
ROUTING_ENV = "TIERWATCH_TEST_PD_ROUTING_KEY"
APPRISE_ENV = "TIERWATCH_TEST_APPRISE_URLS"
PD_SEVERITIES = {"critical", "error", "warning", "info"}


class Receiver:
    """Keeps (headers, raw body) of every POST; ``check`` decides the answer (status, body)."""

    def __init__(self, check) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.requests.append((headers, body))
                status, reply = check(headers, body)
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def hmac_check(secret: str):
    """A receiver written from the documented scheme, independently of the transport."""

    def check(headers, body):
        timestamp = headers.get("x-tierwatch-timestamp", "")
        sent = headers.get("x-tierwatch-signature", "")
        mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
        fresh = timestamp.isdigit() and abs(time.time() - int(timestamp)) < 300
        if fresh and hmac.compare_digest(sent, "sha256=" + mac.hexdigest()):
            return 200, {"ok": True}
        return 401, {"error": "bad signature"}

    return check


def pagerduty_check(routing_key: str):
    """The Events v2 contract (developer.pagerduty.com/docs/events-api-v2): 202 with a
    dedup_key on a valid event, 400 with the reasons otherwise."""

    def check(headers, body):
        event = json.loads(body)
        errors = []
        if event.get("routing_key") != routing_key:
            errors.append("invalid routing_key")
        if event.get("event_action") not in ("trigger", "acknowledge", "resolve"):
            errors.append("invalid event_action")
        if not event.get("dedup_key") or len(event["dedup_key"]) > 255:
            errors.append("invalid dedup_key")
        if event.get("event_action") == "trigger":
            payload = event.get("payload") or {}
            if not payload.get("summary") or len(payload["summary"]) > 1024:
                errors.append("payload.summary is required")
            if not payload.get("source"):
                errors.append("payload.source is required")
            if payload.get("severity") not in PD_SEVERITIES:
                errors.append("payload.severity is invalid")
        if errors:
            return 400, {
                "status": "invalid event",
                "message": "Event object is invalid",
                "errors": errors,
            }
        return 202, {
            "status": "success",
            "message": "Event processed",
            "dedup_key": event["dedup_key"],
        }

    return check


@pytest.fixture
def webhook(monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "s3cret-signing-key")
    receiver = Receiver(hmac_check("s3cret-signing-key"))
    yield receiver
    receiver.close()


@pytest.fixture
def pagerduty(monkeypatch, settings):
    monkeypatch.setenv(ROUTING_ENV, "R0UTINGKEY0123456789")
    receiver = Receiver(pagerduty_check("R0UTINGKEY0123456789"))
    settings.TIERWATCH_PAGERDUTY_URL = receiver.url + "v2/enqueue"
    yield receiver
    receiver.close()


def webhook_channel(receiver: Receiver) -> Channel:
    return Channel(name="hook", kind="webhook", target=receiver.url, secret_env=SECRET_ENV)


def test_it_signs_the_webhook_so_the_receiver_accepts_it(webhook):
    event = Event(key="tierwatch-alert-7", action="resolve", link="http://x/pairs/p/")
    Webhook(webhook_channel(webhook), event).notify("Subject", "body text")
    ((headers, body),) = webhook.requests
    payload = json.loads(body)
    assert payload["event"] == "resolve" and payload["key"] == "tierwatch-alert-7"
    assert payload["subject"] == "Subject" and payload["text"] == "body text"
    assert verify_signature(
        "s3cret-signing-key",
        headers["x-tierwatch-timestamp"],
        body,
        headers["x-tierwatch-signature"],
    )


def test_it_handles_a_wrong_secret_as_a_rejected_signature(webhook, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "another-key")
    with pytest.raises(TransportError) as info:
        Webhook(webhook_channel(webhook)).notify("s", "t")
    assert info.value.permanent and "HTTP 401" in info.value.message
    assert "another-key" not in info.value.message


def test_it_rejects_a_replayed_or_altered_request():
    body, ts = b'{"event":"trigger"}', str(int(time.time()))
    mac = "sha256=" + hmac.new(b"k", ts.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert verify_signature("k", ts, body, mac)
    assert not verify_signature("k", ts, body, mac, now=int(ts) + 301)  # replayed later
    assert not verify_signature("k", str(int(ts) + 1), body, mac)  # timestamp moved
    assert not verify_signature("k", ts, body + b" ", mac)  # body altered


def test_it_handles_a_missing_secret_env_var(webhook, monkeypatch):
    monkeypatch.delenv(SECRET_ENV)
    with pytest.raises(TransportError) as info:
        Webhook(webhook_channel(webhook)).notify("s", "t")
    assert info.value.permanent and SECRET_ENV in info.value.message
    assert webhook.requests == []


@pytest.mark.django_db
def test_it_triggers_then_resolves_one_pagerduty_incident(pagerduty):
    channel = Channel.objects.create(name="pd", kind="pagerduty", target=ROUTING_ENV)
    pair = factories.pair()
    rule = AlertRule.objects.create(name="slow", metric="ttft_p95", threshold=100)
    rule.channels.add(channel)
    alert = Alert.objects.create(rule=rule, pair=pair, message="TTFT P95 is 250 ms", value=250)
    (sent,) = notify(alert_id=alert.pk)
    alert.resolved_at = alert.opened_at
    alert.save()
    (resolved,) = notify(alert_id=alert.pk)
    assert sent.ok and resolved.ok, (sent.error, resolved.error)
    events = [json.loads(body) for _, body in pagerduty.requests]
    assert [e["event_action"] for e in events] == ["trigger", "resolve"]
    assert {e["dedup_key"] for e in events} == {f"tierwatch-alert-{alert.pk}"}
    payload = events[0]["payload"]
    assert "TTFT P95" in payload["summary"] and payload["severity"] == "error"
    assert payload["source"] == f"tierwatch pair {pair.name}"
    assert "payload" not in events[1]


def test_it_handles_a_pagerduty_rejection_as_permanent(pagerduty, monkeypatch):
    monkeypatch.setenv(ROUTING_ENV, "WRONGKEY")
    channel = Channel(name="pd", kind="pagerduty", target=ROUTING_ENV)
    with pytest.raises(TransportError) as info:
        transport_for(channel, Event(key="k")).notify("s", "t")
    assert info.value.permanent and "HTTP 400" in info.value.message
    assert "WRONGKEY" not in info.value.message


@pytest.fixture
def apprise_json(monkeypatch):
    receiver = Receiver(lambda headers, body: (200, {}))
    port = receiver.server.server_port
    monkeypatch.setenv(APPRISE_ENV, f"json://127.0.0.1:{port}/alerts")
    yield receiver
    receiver.close()


def test_it_delivers_through_apprise_to_a_json_webhook(apprise_json):
    channel = Channel(name="apprise", kind="apprise", target=APPRISE_ENV)
    transport_for(channel).notify("Subject line", "the body")
    ((headers, body),) = apprise_json.requests
    posted = json.loads(body)
    assert posted["title"] == "Subject line" and posted["message"] == "the body"


def test_it_handles_an_apprise_url_it_cannot_read(monkeypatch):
    monkeypatch.setenv(APPRISE_ENV, "nosuchscheme://token@host")
    with pytest.raises(TransportError) as info:
        transport_for(Channel(name="a", kind="apprise", target=APPRISE_ENV)).notify("s", "t")
    assert info.value.permanent and "token" not in info.value.message


def test_it_handles_an_apprise_receiver_that_is_down(monkeypatch):
    receiver = Receiver(lambda headers, body: (500, {}))
    monkeypatch.setenv(APPRISE_ENV, f"json://127.0.0.1:{receiver.server.server_port}/")
    try:
        with pytest.raises(TransportError) as info:
            transport_for(Channel(name="a", kind="apprise", target=APPRISE_ENV)).notify("s", "t")
    finally:
        receiver.close()
    assert not info.value.permanent


@pytest.mark.django_db
def test_it_records_a_test_notification_per_attempt(webhook, monkeypatch):
    channel = Channel.objects.create(
        name="hook", kind="webhook", target=webhook.url, secret_env=SECRET_ENV
    )
    good = send_test(channel_id=channel.pk, user="ops")
    monkeypatch.setenv(SECRET_ENV, "rotated-but-not-at-the-receiver")
    bad = send_test(channel_id=channel.pk)
    assert good.ok and good.alert is None and "test notification" in good.subject
    payload = json.loads(webhook.requests[0][1])
    assert payload["test"] is True and payload["details"]["requested_by"] == "ops"
    assert not bad.ok and "HTTP 401" in bad.error
    channel.refresh_from_db()
    assert channel.last_error == bad.error and channel.consecutive_failures == 1
    assert Notification.objects.filter(channel=channel).count() == 2


@pytest.mark.django_db
def test_it_sends_a_pagerduty_test_that_resolves_itself(pagerduty):
    channel = Channel.objects.create(name="pd", kind="pagerduty", target=ROUTING_ENV)
    assert send_test(channel_id=channel.pk).ok
    events = [json.loads(body) for _, body in pagerduty.requests]
    assert [e["event_action"] for e in events] == ["trigger", "resolve"]
    assert events[0]["payload"]["severity"] == "info"
    assert events[0]["dedup_key"] == events[1]["dedup_key"]


@pytest.mark.django_db
def test_it_sends_a_test_from_the_admin_action(client, webhook):
    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(admin)
    channel = Channel.objects.create(
        name="hook", kind="webhook", target=webhook.url, secret_env=SECRET_ENV
    )
    response = client.post(
        "/admin/monitor/channel/",
        {"action": "send_test_notification", "_selected_action": [channel.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert [str(m) for m in response.context["messages"]] == ["hook: test sent"]
    assert len(webhook.requests) == 1
    assert Notification.objects.get(channel=channel).ok


def test_apprise_never_logs_the_urls_it_holds(monkeypatch, caplog):
    import logging
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)  # the project's logging, as the worker runs it
    monkeypatch.setenv(APPRISE_ENV, "nosuchscheme://s3cret-token@host")
    with caplog.at_level(logging.DEBUG), pytest.raises(TransportError):
        transport_for(Channel(name="a", kind="apprise", target=APPRISE_ENV)).notify("s", "t")
    assert "s3cret-token" not in caplog.text
