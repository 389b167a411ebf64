"""One class per alert channel kind on a small base (healthchecks' ``hc/api/transports.py``).

``notify()`` returns on success and raises ``TransportError`` otherwise; ``permanent`` tells the
caller whether trying again could help (a 404 webhook will not come back, a 503 may). Timeouts
and the single retry of transient HTTP errors live once, in ``HttpTransport``.

Secrets: a Slack channel stores the NAME of the environment variable holding its webhook URL.
No error message here ever contains the URL, its value, or an exception text that might.
"""

from __future__ import annotations

import logging
import os
import re
import smtplib
import time
from typing import TYPE_CHECKING, Any

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


class Transport:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    def notify(self, subject: str, text: str, html: str | None = None) -> None:
        """Deliver one message; raise TransportError on failure."""
        raise NotImplementedError


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

    def _post_once(self, url: str, payload: dict[str, Any]) -> None:
        try:
            response = httpx.post(url, json=payload, timeout=self.timeout_s)
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
        name = self.channel.target.strip()
        if not ENV_NAME.match(name):
            # Never echo the target: a pasted webhook URL is exactly what would be here.
            raise TransportError(
                "the Slack channel's target must be the NAME of an environment variable "
                "holding the webhook URL (A-Z, 0-9, _), not the URL itself",
                permanent=True,
            )
        url = os.environ.get(name, "").strip()
        if not url:
            raise TransportError(
                f"environment variable {name} is not set (it should hold the Slack webhook URL)",
                permanent=True,
            )
        return url

    def payload(self, subject: str, text: str) -> dict[str, Any]:
        return {
            "text": f"{subject}\n{text}",  # the fallback shown in notifications
            "blocks": [
                {"type": "header",
                 "text": {"type": "plain_text", "text": subject[: self.HEADER_MAX]}},
                {"type": "section",
                 "text": {"type": "mrkdwn", "text": text[: self.SECTION_MAX]}},
            ],
        }

    def notify(self, subject: str, text: str, html: str | None = None) -> None:
        self.post(self.webhook_url(), self.payload(subject, text))


TRANSPORTS: dict[str, type[Transport]] = {"email": Email, "slack": Slack}


def transport_for(channel: Channel) -> Transport:
    try:
        return TRANSPORTS[channel.kind](channel)
    except KeyError:
        raise TransportError(f"unknown channel kind {channel.kind!r}", permanent=True) from None
