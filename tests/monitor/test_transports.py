"""Transports against real local servers: aiosmtpd for email, http.server for Slack."""

from __future__ import annotations

import pytest

from monitor.alerting.transports import Email, Slack, TransportError, transport_for
from monitor.models import Channel
from tests.factories import free_port
from tests.support import WEBHOOK_ENV


def slack_channel() -> Channel:
    return Channel(name="ops-slack", kind="slack", target=WEBHOOK_ENV)


def test_it_sends_email_with_text_and_html(smtp):
    channel = Channel(name="ops", kind="email", target="a@example.com, b@example.com")
    Email(channel).notify("Subject line", "plain body", "<p>html body</p>")
    ((rcpts, message),) = smtp.messages
    assert sorted(rcpts) == ["a@example.com", "b@example.com"]
    assert message["Subject"] == "Subject line"
    assert message.get_body(("plain",)).get_content().strip() == "plain body"
    assert "<p>html body</p>" in message.get_body(("html",)).get_content()


def test_it_handles_refused_recipient_as_permanent(smtp):
    smtp.refuse.add("gone@example.com")
    channel = Channel(name="ops", kind="email", target="gone@example.com")
    with pytest.raises(TransportError) as info:
        Email(channel).notify("s", "t")
    assert info.value.permanent
    assert "gone@example.com" in info.value.message


def test_it_handles_unreachable_smtp_as_transient(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()  # nobody listens
    with pytest.raises(TransportError) as info:
        Email(Channel(name="ops", kind="email", target="a@example.com")).notify("s", "t")
    assert not info.value.permanent


def test_it_handles_empty_address_list():
    with pytest.raises(TransportError) as info:
        Email(Channel(name="ops", kind="email", target=" , ")).notify("s", "t")
    assert info.value.permanent


def test_it_posts_text_and_blocks_to_slack(slack):
    Slack(slack_channel()).notify("Subject", "the *text*")
    (payload,) = slack.posted
    assert payload["text"] == "Subject\nthe *text*"
    assert payload["blocks"][0]["text"]["text"] == "Subject"
    assert payload["blocks"][1]["text"] == {"type": "mrkdwn", "text": "the *text*"}


def test_it_retries_once_after_500(slack):
    slack.statuses = [500]
    Slack(slack_channel()).notify("s", "t")
    assert len(slack.posted) == 2


def test_it_gives_up_after_two_500s_as_transient(slack):
    slack.statuses = [500, 503, 200]
    with pytest.raises(TransportError) as info:
        Slack(slack_channel()).notify("s", "t")
    assert not info.value.permanent
    assert "HTTP 503" in info.value.message
    assert len(slack.posted) == 2


def test_it_handles_404_as_permanent_without_retry(slack):
    slack.statuses = [404]
    with pytest.raises(TransportError) as info:
        Slack(slack_channel()).notify("s", "t")
    assert info.value.permanent
    assert info.value.message == "the webhook answered HTTP 404 (no_service)"
    assert len(slack.posted) == 1


def test_it_handles_missing_env_var(monkeypatch):
    monkeypatch.delenv(WEBHOOK_ENV, raising=False)
    with pytest.raises(TransportError) as info:
        Slack(slack_channel()).notify("s", "t")
    assert info.value.permanent
    assert WEBHOOK_ENV in info.value.message
    assert "http" not in info.value.message


def test_it_never_echoes_a_url_pasted_as_target():
    url = "https://hooks.slack.com/services/T0/B0/secret-token"
    with pytest.raises(TransportError) as info:
        Slack(Channel(name="x", kind="slack", target=url)).notify("s", "t")
    assert info.value.permanent
    assert "secret-token" not in info.value.message and "hooks" not in info.value.message


def test_it_handles_connection_refused_without_the_url(monkeypatch):
    monkeypatch.setenv(WEBHOOK_ENV, f"http://127.0.0.1:{free_port()}/secret-token")
    with pytest.raises(TransportError) as info:
        Slack(slack_channel()).notify("s", "t")
    assert not info.value.permanent
    assert "secret-token" not in info.value.message and "127.0.0.1" not in info.value.message


def test_it_picks_the_transport_by_kind():
    assert isinstance(transport_for(Channel(kind="email", target="a@b.c")), Email)
    assert isinstance(transport_for(slack_channel()), Slack)
    with pytest.raises(TransportError):
        transport_for(Channel(kind="pager", target="x"))
