"""Real chromium on the alert lifecycle pages: an operator acknowledges and silences an alert
on the incident timeline (htmx swaps the panel in place), adds a maintenance window with the
pair page's form; screenshots of the overview and the timeline go to ``var/screenshots/``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from monitor.alerting import lifecycle
from monitor.models import Alert, AlertRule, MaintenanceWindow
from monitor.setup import roles
from tests.monitor.web.browser import CHROMIUM, launch, screenshots_dir
from tests.monitor.web.browser import make_pair as _make_pair

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]


def _operator() -> None:
    user = User.objects.create_user("opal", password="pw-opal-123")
    roles.grant(user, roles.VIEWER)  # every page needs its view permission; perms add to it
    for codename in ("change_alert", "view_alert", "add_maintenancewindow"):
        user.user_permissions.add(Permission.objects.get(codename=codename))


def _alerts(pair) -> Alert:
    rule = AlertRule.objects.create(
        name="fast-ttft-p95", pair=pair, metric="ttft_p95", tier="fast", op="gt", threshold=120.0
    )
    for hours in (4, 2):  # two earlier openings: the third one is flapping
        old = Alert.objects.create(
            rule=rule,
            pair=pair,
            value=150.0,
            message=(
                "fast TTFT P95 is 150 ms (mean of 3 runs, n = 60), above the threshold of 120 ms."
            ),
        )
        lifecycle.opened(alert_id=old.pk, now=timezone.now() - timedelta(hours=hours))
        lifecycle.resolve(
            alert_id=old.pk,
            note="Resolved: fast TTFT P95 is back to 110 ms.",
            now=timezone.now() - timedelta(hours=hours - 1),
            send=False,
        )
    alert = Alert.objects.create(
        rule=rule,
        pair=pair,
        value=160.0,
        message=(
            "fast TTFT P95 is 160 ms (mean of 3 runs, n = 60), above the threshold of 120 ms."
        ),
    )
    lifecycle.opened(alert_id=alert.pk)
    return alert


@pytest.mark.django_db(transaction=True)
def test_an_operator_acknowledges_silences_and_plans_maintenance(live_server, monkeypatch):
    sync_api = pytest.importorskip("playwright.sync_api")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    _operator()
    pair = _make_pair()
    alert = _alerts(pair)
    shots = screenshots_dir()
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{live_server.url}/accounts/login/?next=/")
            page.fill("#id_username", "opal")
            page.fill("#id_password", "pw-opal-123")
            page.click("button[type=submit]")
            page.wait_for_selector(".pstatus.alerting")
            assert page.locator("svg.sparkline path.spark.fast").count() >= 1
            page.screenshot(path=str(shots / "overview-status.png"), full_page=True)

            page.goto(f"{live_server.url}/pairs/demo/timeline/")
            card = page.locator(f"#alert-{alert.pk}")
            card.locator("input[name=note]").fill("checking with the vendor")
            card.locator("button", has_text="Acknowledge").click()
            page.wait_for_selector(f"#alert-{alert.pk} .state.acknowledged")
            assert "/timeline/" in page.url  # swapped in place, no navigation
            assert page.locator("ol.timeline", has_text="acknowledged").is_visible()
            card = page.locator(f"#alert-{alert.pk}")
            card.locator("select[name=hours]").select_option("24")
            card.locator("button", has_text="Silence").click()
            page.wait_for_selector(f"#alert-{alert.pk} >> text=silenced until")
            assert page.locator(f"#alert-{alert.pk} .badge", has_text="flapping").is_visible()
            page.screenshot(path=str(shots / "timeline.png"), full_page=True)
            stored = Alert.objects.get(pk=alert.pk)
            assert stored.state == "acknowledged" and stored.ack_note == "checking with the vendor"
            assert stored.silenced_until > timezone.now() + timedelta(hours=23)

            page.goto(f"{live_server.url}/pairs/demo/")
            page.click("summary >> text=Add a maintenance window")
            page.fill("#id_starts_at", "2026-12-06T02:00")
            page.fill("#id_ends_at", "2026-12-06T04:00")
            page.fill("#id_reason", "vendor datacentre move")
            page.click("button >> text=Save window")
            page.wait_for_selector(".flash >> text=Maintenance window saved")
            window = MaintenanceWindow.objects.get()
            assert window.pair == pair and window.reason == "vendor datacentre move"
            assert (window.ends_at - window.starts_at) == timedelta(hours=2)
        finally:
            browser.close()
