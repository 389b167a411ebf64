"""Headless chromium (Debian's, through Playwright) on the pages this part changed: a viewer
sees the export buttons and no run button, downloads a CSV, and the API docs page draws its
Swagger UI from this server alone. Screenshots go to ``var/screenshots/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.setup import roles
from tests import factories
from tests.monitor.web.browser import CHROMIUM, launch, screenshots_dir

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (/usr/bin/chromium)"),
    pytest.mark.django_db(transaction=True),
]


def test_a_viewer_exports_and_reads_the_api_docs(live_server, monkeypatch):
    sync_api = pytest.importorskip("playwright.sync_api")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    factories.user("vic", roles.VIEWER, password="pw-vic-1234")
    pair = factories.pair(claim_value=4)
    run = factories.run(pair, summary=factories.summary(), planned=2, completed=2)
    case = pair.suite.cases.get()
    factories.sample(run, case, "fast", ttft_ms=90.0, e2e_ms=600.0, seq=0)
    factories.sample(run, case, "base", ttft_ms=400.0, e2e_ms=2500.0, seq=1)
    shots = screenshots_dir()

    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900}, accept_downloads=True)
            remote: list[str] = []
            page.on(
                "request",
                lambda r: remote.append(r.url) if not r.url.startswith(live_server.url) else None,
            )
            page.goto(f"{live_server.url}/accounts/login/?next=/pairs/demo/")
            page.fill("#id_username", "vic")
            page.fill("#id_password", "pw-vic-1234")
            page.click("button[type=submit]")
            page.wait_for_url(f"{live_server.url}/pairs/demo/")
            assert page.get_by_text("Starting a run needs the operator role.").is_visible()
            assert page.locator("button", has_text="Run probe now").count() == 0
            assert page.locator("a.export", has_text="CSV").first.is_visible()
            page.screenshot(path=str(shots / "pair-viewer.png"), full_page=True)

            page.goto(f"{live_server.url}/runs/{run.pk}/")
            with page.expect_download() as info:
                page.locator("a.export", has_text="CSV").click()
            download = info.value
            assert download.suggested_filename == f"tierwatch-run-{run.pk}-samples.csv"
            lines = Path(download.path()).read_text().splitlines()
            assert lines[0].startswith("id,seq,tier,case,scenario") and len(lines) == 3
            page.screenshot(path=str(shots / "run-exports.png"), full_page=True)

            page.goto(f"{live_server.url}/api/docs")
            page.wait_for_selector(".swagger-ui .title", timeout=20_000)
            assert "tierwatch API" in page.locator(".swagger-ui .title").inner_text()
            page.wait_for_function(
                "document.querySelectorAll('.opblock').length >= 10", timeout=20_000
            )  # one block per endpoint
            page.screenshot(path=str(shots / "api-docs.png"), full_page=True)
            assert remote == [], f"requests left the server: {remote}"
        finally:
            browser.close()
