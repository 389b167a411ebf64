"""One class per alert channel kind on a small base (healthchecks' ``hc/api/transports.py``).

``notify()`` returns on success and raises ``TransportError`` otherwise; ``permanent`` tells the
caller whether trying again could help (a 404 webhook will not come back, a 503 may). Timeouts
and the single retry of transient HTTP errors live once, in ``HttpTransport``.

Secrets: a Slack, Apprise or PagerDuty channel stores the NAME of the environment variable
holding its webhook URL, Apprise URLs or routing key; a signed webhook names the variable holding
its signing secret. No error message here ever contains a URL, a secret, or an exception text
that might.

Beside the message, a transport gets the ``Event`` it belongs to (which alert, and whether it
fires, is acknowledged or resolved), so that PagerDuty's dedup key and a webhook receiver can
follow one alert through its states.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import os
import re
import smtplib
import ssl
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import httpx
from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string

if TYPE_CHECKING:
    from monitor.models import Channel

logger = logging.getLogger(__name__)

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
SHORT_TOKEN = re.compile(r"^[a-z_]{1,60}$")  # Slack's error bodies: "no_service", "invalid_token"


def render_email(name: str, context: dict[str, Any]) -> tuple[str, str, str]:
    """(subject, text, html) from the triplet ``emails/<name>-subject.txt``, ``-body.txt``,
    ``-body.html`` (healthchecks' ``hc/lib/emails.py``). The subject is one line."""
    subject = " ".join(render_to_string(f"emails/{name}-subject.txt", context).split())
    text = render_to_string(f"emails/{name}-body.txt", context).strip() + "\n"
    html = render_to_string(f"emails/{name}-body.html", context)
    return subject, text, html


class TransportError(Exception):
    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent


@dataclass(frozen=True)
class Event:
    """What a message is about: ``key`` names the alert across its states (PagerDuty's
    ``dedup_key``), ``action`` is the state it enters. ``test`` marks a "send test" message."""

    key: str
    action: Literal["trigger", "acknowledge", "resolve"] = "trigger"
    severity: Literal["critical", "error", "warning", "info"] = "error"
    source: str = "tierwatch"
    link: str = ""
    test: bool = False
    details: dict[str, Any] = field(default_factory=dict)


class Transport:
    def __init__(self, channel: Channel, event: Event | None = None) -> None:
        self.channel = channel
        self.event = event or Event(key=f"tierwatch-channel-{channel.pk}")

    def env_value(self, name: str, holds: str) -> str:
        """The value of the environment variable ``name`` (a channel field), which ``holds``
        a secret; permanent TransportError naming the variable, never its value."""
        name = name.strip()
        if not ENV_NAME.match(name):
            # Never echo the field: a pasted URL or key is exactly what would be here.
            raise TransportError(
                f"the {self.channel.kind} channel must name an environment variable holding "
                f"{holds} (A-Z, 0-9, _), not the value itself",
                permanent=True,
            )
        value = os.environ.get(name, "").strip()
        if not value:
            raise TransportError(
                f"environment variable {name} is not set (it should hold {holds})",
                permanent=True,
            )
        return value

    def notify(self, subject: str, text: str, html: str | None = None) -> None:
        """Deliver one message; raise TransportError on failure."""
        raise NotImplementedError


@functools.cache
def tls() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's CAs), made once per process: a new one loads the
    CA file again, for every message."""
    return httpx.create_ssl_context()


class HttpTransport(Transport):
    """POST JSON with a timeout; one retry when the failure is transient (5xx, 429, timeout,
    connection error). 4xx answers are permanent: the same request will fail the same way."""

    timeout_s = 10.0
    tries = 2
    retry_delay_s = 0.2

    def raise_for_response(self, response: httpx.Response) -> None:
        status = response.status_code
        if 200 <= status < 300:
            return
        message = f"the webhook answered HTTP {status}"
        body = response.text.strip()
        if SHORT_TOKEN.match(body):  # only a bare error code: a body could echo anything
            message += f" ({body})"
        # 429 is a 4xx that asks to come back later, so it is transient like a 5xx.
        transient = status >= 500 or status == 429
        raise TransportError(message, permanent=not transient)

    def signed_headers(self, body: bytes) -> dict[str, str]:
        """Extra headers for this body (a signature); none by default."""
        return {}

    def _post_once(self, url: str, payload: dict[str, Any]) -> None:
        body = json.dumps(payload, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", **self.signed_headers(body)}
        try:
            response = httpx.post(
                url, content=body, headers=headers, timeout=self.timeout_s, verify=tls()
            )
        except httpx.TimeoutException:
            message = f"the webhook did not answer within {self.timeout_s:g} s"
            raise TransportError(message) from None
        except httpx.UnsupportedProtocol:
            raise TransportError("the webhook URL is not http(s)", permanent=True) from None
        except httpx.HTTPError as e:
            # The class name only: httpx messages may quote the URL, which is a secret.
            raise TransportError(f"could not reach the webhook ({type(e).__name__})") from None
        self.raise_for_response(response)

    def post(self, url: str, payload: dict[str, Any]) -> None:
        for attempt in range(1, self.tries + 1):
            try:
                return self._post_once(url, payload)
            except TransportError as e:
                if e.permanent or attempt == self.tries:
                    raise
                logger.info("%s: transient failure, retrying: %s", self.channel, e.message)
                time.sleep(self.retry_delay_s)


class Email(Transport):
    """Django's mail (SMTP settings from Django settings); ``channel.target`` lists addresses."""

    def notify(self, subject: str, text: str, html: str | None = None) -> None:
        to = [a.strip() for a in self.channel.target.split(",") if a.strip()]
        if not to:
            raise TransportError("the channel lists no email address", permanent=True)
        message = EmailMultiAlternatives(subject, text, settings.DEFAULT_FROM_EMAIL, to)
        if html:
            message.attach_alternative(html, "text/html")
        try:
            message.send(fail_silently=False)
        except smtplib.SMTPRecipientsRefused as e:
            refused = ", ".join(sorted(e.recipients))
            raise TransportError(f"the mail server refused {refused}", permanent=True) from None
        except smtplib.SMTPAuthenticationError:
            raise TransportError("the mail server rejected the login", permanent=True) from None
        except (smtplib.SMTPException, OSError) as e:
            raise TransportError(f"could not send mail ({type(e).__name__}: {e})") from None


class Slack(HttpTransport):
    """Slack incoming webhook; ``channel.target`` is the NAME of the env var with the URL."""

    HEADER_MAX = 150  # Slack's limits for a header block and a section's text
    SECTION_MAX = 3000

    def webhook_url(self) -> str:
        return self.env_value(self.channel.target, "the Slack webhook URL")

    def payload(self, subject: str, text: str) -> dict[str, Any]:
        return {
            "text": f"{subject}\n{text}",  # the fallback shown in notifications
            "blocks": [
                {
                    "type": "header",
                    "text": {"type": "plain_text", "text": subject[: self.HEADER_MAX]},
                },
                {"type": "section", "text": {"type": "mrkdwn", "text": text[: self.SECTION_MAX]}},
            ],
        }

    def notify(self, subject: str, text: str, html: str | None = None) -> None:
        self.post(self.webhook_url(), self.payload(subject, text))


class Apprise(Transport):
    """Every service Apprise speaks (Teams, Discord, Telegram, Opsgenie, ``json://`` webhooks,
    ...); ``channel.target`` is the NAME of the env var holding one or more Apprise URLs
    (space- or comma-separated), since they carry tokens. Apprise reports only success or
    failure per message, so a failure is taken as transient; its own log lines quote the URLs,
    so its logger is silenced in settings."""

    def notify(self, subject: str, text: str, html: str | None = None) -> None:
        import apprise  # imported here: only channels of this kind need it

        urls = self.env_value(self.channel.target, "the Apprise URLs")
        sender = apprise.Apprise()
        if not sender.add([u for u in re.split(r"[\s,]+", urls) if u]):
            raise TransportError(
                f"{self.channel.target.strip()} holds no URL Apprise understands", permanent=True
            )
        if not sender.notify(title=subject, body=text):
            raise TransportError("Apprise could not deliver to every URL")


class Webhook(HttpTransport):
    """POST a JSON event to ``channel.target`` (the URL), signed with HMAC-SHA256 under the
    secret in the env var ``channel.secret_env``.

    ``X-Tierwatch-Timestamp`` is the Unix time of sending; ``X-Tierwatch-Signature`` is
    ``sha256=<hex>`` of HMAC-SHA256(secret, ``<timestamp>.<raw body>``). The timestamp is
    signed with the body (Stripe's scheme) so a receiver that rejects old timestamps also
    rejects a replayed request: changing the timestamp breaks the signature. Receivers check
    with ``verify_signature``.
    """

    def signed_headers(self, body: bytes) -> dict[str, str]:
        secret = self.env_value(self.channel.secret_env, "the webhook signing secret")
        timestamp = str(int(time.time()))
        return {
            "X-Tierwatch-Timestamp": timestamp,
            "X-Tierwatch-Signature": "sha256=" + signature(secret, timestamp, body),
        }

    def notify(self, subject: str, text: str, html: str | None = None) -> None:
        url = self.channel.target.strip()
        if not url.startswith(("http://", "https://")):
            raise TransportError(
                "the webhook channel's target must be an http(s) URL", permanent=True
            )
        e = self.event
        self.post(
            url,
            {
                "event": e.action,
                "key": e.key,
                "severity": e.severity,
                "test": e.test,
                "subject": subject,
                "text": text,
                "link": e.link,
                "details": e.details,
                "sent_at": int(time.time()),
            },
        )


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """Hex HMAC-SHA256 of ``<timestamp>.<body>`` under ``secret`` (see ``Webhook``)."""
    message = timestamp.encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def verify_signature(
    secret: str,
    timestamp: str,
    body: bytes,
    header: str,
    *,
    tolerance_s: float = 300.0,
    now: float | None = None,
) -> bool:
    """A receiver's check: the signature matches and the timestamp is recent."""
    try:
        age = abs((time.time() if now is None else now) - int(timestamp))
    except ValueError:
        return False
    expected = "sha256=" + signature(secret, timestamp, body)
    return age <= tolerance_s and hmac.compare_digest(expected, header)


class PagerDuty(HttpTransport):
    """PagerDuty Events API v2; ``channel.target`` is the NAME of the env var holding the
    integration's routing key. The event's key is the ``dedup_key``, so the incident an alert
    triggered is the one its acknowledgement and recovery acknowledge and resolve
    (https://developer.pagerduty.com/docs/events-api-v2/trigger-events/). A test message
    triggers and at once resolves its own incident."""

    SUMMARY_MAX = 1024  # PagerDuty's limit for payload.summary

    def event_body(self, routing_key: str, action: str, subject: str) -> dict[str, Any]:
        e = self.event
        body: dict[str, Any] = {
            "routing_key": routing_key,
            "event_action": action,
            "dedup_key": e.key,
            "client": "tierwatch",
        }
        if action == "trigger":  # acknowledge/resolve carry no payload
            body["payload"] = {
                "summary": subject[: self.SUMMARY_MAX],
                "source": e.source,
                "severity": e.severity,
                "custom_details": e.details,
            }
            if e.link:
                body["links"] = [{"href": e.link, "text": "tierwatch"}]
                body["client_url"] = e.link
        return body

    def notify(self, subject: str, text: str, html: str | None = None) -> None:
        key = self.env_value(self.channel.target, "the PagerDuty routing key")
        url = settings.TIERWATCH_PAGERDUTY_URL
        self.post(url, self.event_body(key, self.event.action, subject))
        if self.event.test:
            self.post(url, self.event_body(key, "resolve", subject))


TRANSPORTS: dict[str, type[Transport]] = {
    "email": Email,
    "slack": Slack,
    "apprise": Apprise,
    "webhook": Webhook,
    "pagerduty": PagerDuty,
}


def transport_for(channel: Channel, event: Event | None = None) -> Transport:
    try:
        return TRANSPORTS[channel.kind](channel, event)
    except KeyError:
        raise TransportError(f"unknown channel kind {channel.kind!r}", permanent=True) from None
