"""An agent task's episode page in a real browser (headless Debian chromium through
Playwright): after a probe of a BFCL multi-turn task on the simulated vendor, both tiers' turns
sit side by side, each request's numbers link to their definitions, the first divergence is
marked in both columns, nothing scrolls sideways at a 1,280-px window, and a screenshot goes
to ``var/screenshots/episode.png``."""

from __future__ import annotations

import os

import pytest
from django.contrib.auth import get_user_model

from evals.benchmarks import bfcl_multi_turn
from evals.vendors.simulated import serve_in_thread
from monitor.models import Endpoint, Pair, Run
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


def _played(url: str) -> tuple[Run, str]:
    # the simulated distilled tier loses this task on a later turn (seeded per task and turn)
    cases = bfcl_multi_turn.load_cases(["multi_turn_miss_func"], limit=1)
    suite, _ = save_versioned(name="agent-one", cases=cases)
    fast, base = (
        Endpoint.objects.create(name=name, base_url=url, model=model, simulated=True)
        for name, model in (("dist", "demo-distilled"), ("base", "demo-base"))
    )
    pair = Pair.objects.create(name="agents", fast=fast, base=base, suite=suite, repeat=1)
    run = execute_run(run_id=create_run(pair=pair).id)
    assert run.status == "done", run.error
    return run, cases[0].key


@pytest.mark.django_db(transaction=True)
def test_the_episode_page_shows_both_tiers_side_by_side(live_server, monkeypatch, benchmark_wheels):
    sync_api = pytest.importorskip("playwright.sync_api")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    roles.grant(
        get_user_model().objects.create_user("alice", password="pw-alice-123"), roles.VIEWER
    )
    with serve_in_thread(time_scale=0.0) as url:
        run, key = _played(url)
    shots = screenshots_dir()
    address = f"{live_server.url}/runs/{run.id}/episodes/{key}/"
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(address)
            page.fill("#id_username", "alice")
            page.fill("#id_password", "pw-alice-123")
            page.click("button[type=submit]")
            page.wait_for_url(address)
            assert page.locator("h3", has_text="Turn 1").is_visible()
            # the two tiers' columns of a turn are side by side, fast on the left
            fast, base = page.locator("#turn-1 .side").all()[:2]
            left, right = fast.bounding_box(), base.bounding_box()
            assert abs(left["y"] - right["y"]) < 1 and left["x"] + left["width"] <= right["x"]
            assert fast.locator(".tier", has_text="fast").is_visible()
            assert page.locator("#episode-scores a.term", has_text="task success").is_visible()
            assert page.locator("#turn-1 .step a.term", has_text="TTFT").first.is_visible()
            # where the tiers diverge is said at the top and marked in both columns
            assert page.locator("#divergence .diverge-mark").is_visible()
            assert page.locator(".step.diverged").count() == 2
            wide = page.evaluate("""() => [...document.querySelectorAll('body *')]
                .filter(e => e.getBoundingClientRect().right > 1280 && !e.closest('.scroll'))
                .map(e => e.tagName + '#' + e.id)""")
            assert page.evaluate("document.documentElement.scrollWidth") <= 1280, wide
            page.screenshot(path=str(shots / "episode.png"), full_page=True)
        finally:
            browser.close()
    assert os.path.getsize(shots / "episode.png") > 10_000
