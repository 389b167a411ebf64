"""One real browser: headless Debian chromium through Playwright against a live server.

It logs in through the form, opens a pair page and waits until plotly.js (served from
``static/``) has drawn the charts, then saves a screenshot to ``var/screenshots/pair.png``.
"""

from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model

from monitor.setup import roles
from tests.monitor.web.browser import CHROMIUM, launch, make_pair, screenshots_dir

CHART_TITLES = (
    "TTFT per run",
    "E2E per run",
    "Text similarity per run",
    "Unit-test pass rate per run",
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
    ),
]


@pytest.mark.django_db(transaction=True)
def test_it_logs_in_and_draws_the_pair_charts(live_server, monkeypatch):
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API keeps an event loop on this thread; the ORM calls made here
    # before and after it are ordinary synchronous ones.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    roles.grant(
        get_user_model().objects.create_user("alice", password="pw-alice-123"), roles.VIEWER
    )
    last_run_id = make_pair().runs.order_by("-created_at").values_list("id", flat=True)[0]
    shots = screenshots_dir()

    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            remote: list[str] = []
            page.on(
                "request",
                lambda r: remote.append(r.url) if not r.url.startswith(live_server.url) else None,
            )
            page.goto(f"{live_server.url}/pairs/demo/")
            assert "/accounts/login/" in page.url
            page.fill("#id_username", "alice")
            page.fill("#id_password", "pw-alice-123")
            page.click("button[type=submit]")
            page.wait_for_url(f"{live_server.url}/pairs/demo/")

            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=20_000)
            page.wait_for_function(
                "document.querySelectorAll('.js-plotly-plot .main-svg').length >= 4",
                timeout=20_000,
            )
            titles = page.locator(".js-plotly-plot .gtitle").all_text_contents()
            for title in CHART_TITLES:
                assert any(title in t for t in titles), (title, titles)
                assert page.locator(".gtitle", has_text=title).first.is_visible()
            assert page.locator(".js-plotly-plot .ytitle", has_text="TTFT (ms)").is_visible()
            assert page.locator(".badge.simulated").first.is_visible()
            assert remote == [], f"requests left the server: {remote}"
            page.screenshot(path=str(shots / "pair.png"), full_page=True)

            page.click("nav >> text=Pairs")
            page.wait_for_selector("#pairs-table td >> text=n=20")
            assert page.locator("#pairs-table td >> text=(n=160)").count() == 2  # 24 h P95
            page.screenshot(path=str(shots / "overview.png"), full_page=True)
            page.goto(f"{live_server.url}/runs/{last_run_id}/")
            assert page.locator("table.summary").first.is_visible()
            page.click("table.samples >> text=show")  # htmx inserts the text as a row below
            page.wait_for_selector("tr.sample-text >> text=def fizzbuzz(n): return n")
            page.screenshot(path=str(shots / "run.png"), full_page=True)
        finally:
            browser.close()
    assert os.path.getsize(shots / "pair.png") > 10_000
