"""The overview at 1,280 px in a real browser: the demo's pairs, probed and audited against the
simulated vendor over real HTTP, plus a pair whose vendor refuses every request. The table fits
its box (no sideways scrolling) and every pair's row answers the three questions in words;
the failing pair is red with the vendor's message. Screenshots: ``var/screenshots/``."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from monitor.models import Endpoint, Pair
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.setup import roles
from monitor.setup.demo import ensure_demo
from tests.factories import free_port
from tests.monitor.web.browser import CHROMIUM, launch, screenshots_dir

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)",
    ),
]

WIDTH = 1280


def demo_world(vendor_url: str) -> list[Pair]:
    pairs = ensure_demo(vendor_url=vendor_url, probe_every_s=900, audit_every_s=6 * 3600)
    for pair in pairs:
        for seed in (1, 2):
            execute_run(run_id=create_run(pair=pair, seed=seed).id, cases_limit=3)
    audit = execute_run(
        run_id=create_run(pair=pairs[0], kind="audit", seed=3, repeat=2).id, cases_limit=4
    )
    assert audit.status == "done", audit.error
    closed = f"http://127.0.0.1:{free_port()}/v1"
    down = Pair.objects.create(
        name="down-vendor",
        fast=Endpoint.objects.create(
            name="down-fast", base_url=closed, model="m", timeout_s=5, local=True
        ),
        base=Endpoint.objects.create(
            name="down-base", base_url=closed, model="m", timeout_s=5, local=True
        ),
        suite=pairs[0].suite,
        claim_value=3,
    )
    execute_run(run_id=create_run(pair=down).id, cases_limit=2)
    return [*pairs, down]


@pytest.mark.django_db(transaction=True)
def test_the_overview_answers_three_questions_per_pair_at_1280_px(
    live_server, demo_vendor_url, monkeypatch
):
    sync_api = pytest.importorskip("playwright.sync_api")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    pairs = demo_world(demo_vendor_url)
    roles.grant(
        get_user_model().objects.create_user("alice", password="pw-alice-123"), roles.VIEWER
    )
    shots = screenshots_dir()
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            page.goto(f"{live_server.url}/accounts/login/")
            page.fill("#id_username", "alice")
            page.fill("#id_password", "pw-alice-123")
            page.click("button[type=submit]")
            page.wait_for_selector("#pairs-table table.overview")
            page.screenshot(path=str(shots / "overview-1280.png"), full_page=True)

            box = page.eval_on_selector(
                "#pairs-table .scroll",
                "el => ({scroll: el.scrollWidth, client: el.clientWidth,"
                " table: el.querySelector('table').getBoundingClientRect().width,"
                " page: document.documentElement.scrollWidth})",
            )
            assert box["scroll"] <= box["client"], box  # no sideways scrolling in the box
            assert box["page"] <= WIDTH, box  # nor of the page
            for pair in pairs:
                row = page.locator(f"#pair-{pair.name}")
                assert row.is_visible(), pair.name
                same, faster, changed = (
                    row.locator(f"td.answer.{k}").inner_text().strip()
                    for k in ("same", "faster", "changed")
                )
                assert same and faster and changed, (pair.name, same, faster, changed)
                assert row.locator(".pstatus").is_visible()
                x = row.locator("td.answer.changed").bounding_box()
                assert x and x["x"] + x["width"] <= WIDTH, (pair.name, x)
            audited = page.locator(f"#pair-{pairs[0].name} td.answer.same").inner_text()
            assert "audit" in audited and "ago" in audited or "just now" in audited, audited
            assert (
                "collecting the baseline: 2 of 48"
                in page.locator(f"#pair-{pairs[0].name} td.answer.changed").inner_text()
            )
            faster = page.locator(f"#pair-{pairs[0].name} td.answer.faster").inner_text()
            assert "× E2E" in faster and "claim 4× E2E:" in faster, faster
            scenarios = page.locator("#pair-demo-fast-vs-base-scenarios td.answer.faster")
            assert "scenarios" in scenarios.inner_text(), scenarios.inner_text()
            no_audit = page.locator("#pair-demo-fast-vs-base-scenarios td.answer.same")
            assert "no audit schedule" in no_audit.inner_text()

            down = page.locator("#pair-down-vendor")
            assert down.locator(".pstatus.failing").is_visible()
            said = down.locator(".status-why.failing").inner_text()
            assert "vendor unreachable" in said, said
            colour = down.locator(".status-why.failing").evaluate(
                "el => getComputedStyle(el).color"
            )
            assert colour == "rgb(180, 35, 24)" or colour.startswith("rgb(1"), colour
            down.locator("a.strong").click()
            page.wait_for_selector(".run-error")
            assert "vendor unreachable" in page.locator(".run-error").first.inner_text()
            page.screenshot(path=str(shots / "pair-failing.png"), full_page=True)
            page.locator(".run-error a").first.click()
            page.wait_for_selector("p.run-error")
            assert "vendor unreachable" in page.locator("p.run-error").inner_text()
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= WIDTH, wide  # the errors' messages wrap
            page.screenshot(path=str(shots / "run-failing.png"), full_page=False)
        finally:
            browser.close()
