"""The "Is it worse?" page in a real browser (headless Debian chromium through Playwright):
after probes of a distilled fast tier on the simulated vendor, plotly draws both charts with
their titles and axis titles inside their boxes (nothing spills onto the table below), and a
screenshot goes to ``var/screenshots/worse.png``."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model

from evals.benchmarks import bfcl, importer
from evals.vendors.simulated import serve_in_thread
from monitor.models import Endpoint, Pair
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.setup import roles
from monitor.setup.suite_import import save_versioned
from tests.monitor.web.browser import CHROMIUM, launch, screenshots_dir

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]


def _probed_pair(url: str) -> Pair:
    suite, _ = save_versioned(
        name="cap",
        cases=importer.builtin_cases("structured")
        + importer.builtin_cases("long_tail/rare_apis")
        + bfcl.load_cases(["simple_python"], limit=16),
    )
    fast = Endpoint.objects.create(
        name="dist",
        base_url=url,
        model="demo-distilled",
        simulated=True,
        price_input_per_mtok=1,
        price_output_per_mtok=4,
    )
    base = Endpoint.objects.create(
        name="base",
        base_url=url,
        model="demo-base",
        simulated=True,
        price_input_per_mtok=3,
        price_output_per_mtok=12,
    )
    pair = Pair.objects.create(name="demo", fast=fast, base=base, suite=suite)
    for _ in range(2):
        assert execute_run(run_id=create_run(pair=pair).id).status == "done"
    return pair


@pytest.mark.django_db(transaction=True)
def test_the_worse_page_draws_its_charts(live_server, monkeypatch, benchmark_wheels):
    sync_api = pytest.importorskip("playwright.sync_api")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    roles.grant(
        get_user_model().objects.create_user("alice", password="pw-alice-123"), roles.VIEWER
    )
    with serve_in_thread(time_scale=0.0) as url:
        _probed_pair(url)
    shots = screenshots_dir()
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(f"{live_server.url}/pairs/demo/worse/")
            page.fill("#id_username", "alice")
            page.fill("#id_password", "pw-alice-123")
            page.click("button[type=submit]")
            page.wait_for_url(f"{live_server.url}/pairs/demo/worse/")
            page.wait_for_function(
                "document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2", timeout=20_000
            )
            for title in ("Pass rate per category and tier", "Paired difference per category"):
                assert page.locator(".gtitle", has_text=title).first.is_visible()
            assert page.locator(
                ".xtitle", has_text="answers that pass their check (%)"
            ).is_visible()
            assert page.locator(".xtitle", has_text="percentage points").is_visible()
            # two runs: losses show in the window; the controlled decision is still undecided
            assert page.locator("ul.advice li.undecided").count() >= 1
            # each figure stays inside its box, and the boxes end above the table's header
            for box in page.locator(".chart-box").all():
                frame, svg = box.bounding_box(), box.locator(".main-svg").first.bounding_box()
                assert svg["y"] + svg["height"] <= frame["y"] + frame["height"] + 0.5
            charts = page.locator(".charts").bounding_box()
            assert charts["y"] + charts["height"] <= page.locator("#categories").bounding_box()["y"]
            assert page.locator(
                "nav.tabs a[aria-current=page]", has_text="Is it worse?"
            ).is_visible()
            # at a 1,280-px window nothing scrolls sideways (the category table's long headers
            # once pushed it to 1,619 px) and each axis title stays inside its chart
            wide = page.evaluate("""() => [...document.querySelectorAll('body *')]
                .filter(e => e.getBoundingClientRect().right > 1280 && !e.closest('.scroll'))
                .map(e => e.tagName + '#' + e.id)""")
            assert page.evaluate("document.documentElement.scrollWidth") <= 1280, wide
            for box in page.locator(".chart-box").all():
                frame, title = box.bounding_box(), box.locator(".xtitle").first.bounding_box()
                assert title["x"] + title["width"] <= frame["x"] + frame["width"] + 0.5
            page.screenshot(path=str(shots / "worse.png"), full_page=True)
        finally:
            browser.close()
    assert os.path.getsize(shots / "worse.png") > 10_000
