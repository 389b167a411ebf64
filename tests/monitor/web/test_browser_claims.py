"""The speed and pair pages' claim, gating, premium and TTFT-both blocks in headless chromium
at 1,280 px: visible, inside the window. Screenshots: ``var/screenshots/speed-claims.png`` and
``pair-served.png``."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from monitor.derived.run_end import record_run_end
from monitor.models import Case, Pair, Suite
from monitor.runs.steps import summarise_run
from tests import factories
from tests.monitor.web.browser import launch, screenshots_dir
from tests.monitor.web.test_speed_views import SCENARIOS, make_run

WIDTH = 1280


def _pair() -> Pair:
    suite = Suite.objects.create(name="speed-matrix")
    for scenario in SCENARIOS:
        for i in range(2):
            Case.objects.create(
                suite=suite, key=f"{scenario}-{i}", scenario=scenario,
                messages=[{"role": "user", "content": "hi"}],
            )  # fmt: skip
    pair = factories.pair(
        suite_row=suite, claim_metric="ttft", claim_form="floor", claim_value=300,
        claim_percentile=95,
    )  # fmt: skip
    for ep, price in ((pair.fast, 3.0), (pair.base, 1.0)):
        ep.price_input_per_mtok = ep.price_output_per_mtok = price
        ep.expected_tier = "priority" if ep == pair.fast else ""
        ep.save()
    served = lambda seq, tier: "default" if seq % 8 == 1 else "priority"  # noqa: E731
    run = make_run(pair, repeat=10, served=served, reasoning_ms=800)
    run.samples.update(prompt_tokens=10)
    summarise_run(run_id=run.id)
    record_run_end(run.id)
    return pair


@pytest.mark.django_db(transaction=True)
def test_the_claim_gating_premium_and_ttft_blocks_fit_the_window(live_server, monkeypatch):
    sync_api = pytest.importorskip("playwright.sync_api")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    get_user_model().objects.create_superuser("root", password="pw-root-123")
    pair = _pair()
    shots = screenshots_dir()
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
            page.goto(f"{live_server.url}/pairs/{pair.name}/speed/")
            page.fill("#id_username", "root")
            page.fill("#id_password", "pw-root-123")
            page.click("button[type=submit]")
            page.wait_for_selector("#claim-line")
            claim = page.locator("#claim-line").inner_text()
            assert "95 % of requests TTFT ≤ 300 ms" in claim and "contradicted" in claim, claim
            assert "10 downgraded samples left out" in page.locator("#gating-facts").inner_text()
            for table in ("#premium-table", "#downgrade-hours", "#ttft-both-table"):
                assert page.locator(table).is_visible(), table
            assert "3.00×" in page.locator("#premium-table").inner_text()
            assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
            page.screenshot(path=str(shots / "speed-claims.png"), full_page=True)

            page.goto(f"{live_server.url}/pairs/{pair.name}/")
            served = page.locator("#pair-served").inner_text()
            assert "30 confirmed, 10 downgraded, 0 not reported" in served, served
            assert "95 % of requests TTFT ≤ 300 ms" in page.locator("#pair-claim").inner_text()
            assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
            page.screenshot(path=str(shots / "pair-served.png"), full_page=True)
        finally:
            browser.close()
