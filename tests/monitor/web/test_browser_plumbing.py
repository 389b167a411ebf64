"""Real chromium: an acknowledge that the server refuses (the alert was acknowledged in
another tab) shows the server's message in place, because htmx swaps 4xx fragments
(``responseHandling`` in base.html); by default htmx drops them and the page still said
firing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from monitor.alerting import lifecycle
from tests.monitor.web.browser import CHROMIUM, launch, screenshots_dir
from tests.monitor.web.browser import make_pair as _make_pair
from tests.monitor.web.test_browser_lifecycle import _alerts, _operator

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]


@pytest.mark.django_db(transaction=True)
def test_a_refused_acknowledge_shows_its_message(live_server, monkeypatch):
    sync_api = pytest.importorskip("playwright.sync_api")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    _operator()
    alert = _alerts(_make_pair())
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{live_server.url}/accounts/login/?next=/pairs/demo/timeline/")
            page.fill("#id_username", "opal")
            page.fill("#id_password", "pw-opal-123")
            page.click("button[type=submit]")
            card = page.locator(f"#alert-{alert.pk}")
            card.locator("button", has_text="Acknowledge").wait_for()
            # another tab acknowledges first
            lifecycle.acknowledge(alert_id=alert.pk, user=User.objects.get(username="opal"))
            card.locator("button", has_text="Acknowledge").click()
            error = page.locator("#timeline-body p.error[role=alert]")
            error.wait_for(timeout=10_000)
            assert f"alert {alert.pk} is acknowledged, not firing" in error.inner_text()
            assert "/timeline/" in page.url  # swapped in place
            assert page.locator(f"#alert-{alert.pk} .state.acknowledged").is_visible()
            page.screenshot(path=str(screenshots_dir() / "timeline-refused.png"), full_page=True)
        finally:
            browser.close()
