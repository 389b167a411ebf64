"""The "send test" action: one message through a channel, recorded like any alert's.

A test goes through the same ``deliver`` as an alert, so its Notification row (with no alert),
the channel's ``last_error`` and the failure counter show exactly what a real alert would meet.
"""

from __future__ import annotations

from django.utils import timezone

from monitor.alerting.alerts import deliver
from monitor.alerting.transports import Event, render_email
from monitor.models import Channel, Notification


def send_test(*, channel_id: int, user: str = "") -> Notification:
    """Send a test notification through the channel (disabled or not: testing is how a
    disabled channel is checked before enabling it again) and return the attempt's row."""
    channel = Channel.objects.get(pk=channel_id)
    now = timezone.now()
    context = {"channel": channel, "user": user, "sent_at": now}
    subject, text, html = render_email("channel-test", context)
    event = Event(
        key=f"tierwatch-test-{channel.pk}-{int(now.timestamp())}",
        severity="info",
        test=True,
        details={"channel": channel.name, "requested_by": user},
    )
    return deliver(None, channel, subject, text, html, event)
