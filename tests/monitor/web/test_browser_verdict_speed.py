"""The verdict and speed pages in headless chromium, over runs made against the simulated vendor:
the label, the error budget and the acknowledge button are visible, the charts draw, and
neither page is wider than the window (the percentile table used to overflow it).
Screenshots go to ``var/screenshots/verdict.png`` and ``speed.png``.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from monitor.models import Endpoint, Pair
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.setup.suites import sync_builtin_suite
from tests.monitor.web.browser import CHROMIUM, launch, screenshots_dir

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]
WIDTH = 1280


def _pair(url: str) -> Pair:
    ends = {
        n: Endpoint.objects.create(name=n, base_url=url, model=n, simulated=True, max_concurrency=8)
        for n in ("demo-base", "demo-distilled")
    }
    sync_builtin_suite(name="audit")
    pair = Pair.objects.create(
        name="distilled",
        fast=ends["demo-distilled"],
        base=ends["demo-base"],
        suite=sync_builtin_suite(name="scenarios"),
        repeat=3,
        claim_value=4,
    )
    for seed in (1, 2):
        assert execute_run(run_id=create_run(pair=pair, seed=seed).id).status == "done"
    audit = create_run(pair=pair, kind="audit", repeat=5, seed=3)
    assert execute_run(run_id=audit.id, cases_limit=25).status == "done"
    return pair


@pytest.mark.django_db(transaction=True)
def test_the_verdict_and_speed_pages_draw_and_fit_the_window(
    live_server, demo_vendor_url, monkeypatch
):
    sync_api = pytest.importorskip("playwright.sync_api")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    get_user_model().objects.create_superuser("root", password="pw-root-123")
    pair = _pair(demo_vendor_url)
    shots = screenshots_dir()
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
            page.goto(f"{live_server.url}/pairs/{pair.name}/verdict/")
            page.fill("#id_username", "root")
            page.fill("#id_password", "pw-root-123")
            page.click("button[type=submit]")
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=20_000)
            assert page.locator(".verdict-sentence").inner_text().startswith("outputs differ (")
            assert "expected false alarms: ≤ 0.05 per month" in page.locator("#budget").inner_text()
            assert page.locator("#acknowledge").is_visible()
            assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
            page.screenshot(path=str(shots / "verdict.png"), full_page=True)

            page.goto(f"{live_server.url}/pairs/{pair.name}/speed/")
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=20_000)
            assert page.locator("#percentile-table").is_visible()
            assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
            page.screenshot(path=str(shots / "speed.png"), full_page=True)
        finally:
            browser.close()
