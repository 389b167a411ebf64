"""The verdict page's border-input tripwire and the pair page's cost per month, in headless
chromium at 1,280 px: the story in order (fired, audit, probe), and both tables fit the page."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from monitor.derived import tripwire
from monitor.models import Run, TripwireState
from monitor.runs.steps import create_run
from tests.monitor.test_cost_month import priced_pair
from tests.monitor.web.browser import CHROMIUM, launch, screenshots_dir

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]
WIDTH = 1280
REFERENCE = {f"{c}": {"A": 15, " I": 15} for c in "abcdefghij"}


def escalate(pair):
    """What ``tasks.escalate_to_audit`` does, without a broker: a probe and an audit."""
    create_run(pair=pair, kind="probe", trigger="tripwire")
    return create_run(pair=pair, kind="audit", trigger="tripwire")


def fired_pair():
    pair = priced_pair()
    TripwireState.objects.create(pair=pair, border_allowed=True)
    found = {"inputs": list(REFERENCE), "reference": REFERENCE, "candidates": 300, "found": 14,
             "requests": 1320}  # fmt: skip
    run = create_run(pair=pair, kind="tripwire")
    tripwire.after_run(run=run, windows={}, skipped={}, border={"base": {"discovered": found}})
    honest, moved = {p: {"A": 5, " I": 5} for p in REFERENCE}, {p: {"A": 10} for p in REFERENCE}
    # its reference runs (a day at the hourly default), then the base tier's answers all
    # moved to one token, until it fires
    for i in range(tripwire.REFERENCE_RUNS + 12):
        if TripwireState.objects.get(pair=pair).fired_tier:
            break
        run = create_run(pair=pair, kind="tripwire")
        current = honest if i < tripwire.REFERENCE_RUNS else moved
        tripwire.after_run(
            run=run, windows={}, skipped={}, border={"base": {"current": current}},
            escalate=escalate,
        )  # fmt: skip
    return pair


def test_the_border_tripwire_story_and_the_monthly_cost_fit_at_1280_px(live_server, monkeypatch):
    sync_api = pytest.importorskip("playwright.sync_api")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    pair = fired_pair()
    state = TripwireState.objects.get(pair=pair)
    assert state.fired_tier == "base"
    audit = Run.objects.get(pair=pair, kind="audit", trigger="tripwire")
    get_user_model().objects.create_superuser("root", password="pw-root-123")
    shots = screenshots_dir()
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 900})
            page.goto(f"{live_server.url}/accounts/login/")
            page.fill("#id_username", "root")
            page.fill("#id_password", "pw-root-123")
            page.click("button[type=submit]")
            page.goto(f"{live_server.url}/pairs/{pair.name}/verdict/")
            fired = page.locator("#tripwire-fired").inner_text()
            assert "fired on the base tier" in fired and f"audit run {audit.id}" in fired, fired
            assert "capability probe run" in fired
            rows = page.locator("#tripwires").inner_text()
            assert "(border inputs)" in rows and "fired" in rows, rows
            assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
            page.screenshot(path=str(shots / "verdict-border-tripwire-1280.png"), full_page=True)
            page.goto(f"{live_server.url}/pairs/{pair.name}/#cost-month")
            table = page.locator("#cost-month-table").inner_text()
            assert "hourly audits, no tripwires" in table and "requests" in table, table
            box = page.locator("#cost-month-table").bounding_box()
            assert box and box["x"] + box["width"] <= WIDTH, box
            page.locator("#cost-month").screenshot(path=str(shots / "pair-cost-month-1280.png"))
            page.screenshot(path=str(shots / "pair-cost-1280.png"), full_page=True)
        finally:
            browser.close()
