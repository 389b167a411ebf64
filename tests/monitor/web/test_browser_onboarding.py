"""Real chromium at 1,280 px: an admin adds a pair of self-hosted endpoints (the test's own
servers on 127.0.0.1: only an admin may mark them local) in the browser against the simulated
vendor, tests its connection, saves it, and the pair runs on its schedule (the task beat
calls, then the pipeline that task's run goes through); a failed Test connection shows the
vendor's own message."""

from __future__ import annotations

import json

import pytest
from django_celery_beat.models import PeriodicTask

from monitor.models import Pair, Run
from monitor.runs.pipeline import execute_run
from monitor.tasks import probe_pair_task
from tests import factories
from tests.monitor import test_vendor_failures
from tests.monitor.test_vendor_failures import NO_KEY
from tests.monitor.web.browser import CHROMIUM, launch, screenshots_dir

refusing_url = test_vendor_failures.refusing_url  # the 401 server, as a fixture here

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"
    ),
]


def log_in(page, base: str, then: str) -> None:
    page.goto(f"{base}/accounts/login/?next={then}")
    page.fill("#id_username", "ada")
    page.fill("#id_password", "pw-ada-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}{then}")


def fill(page, fast_url: str, base_url: str) -> None:
    page.fill("#id_name", "acme")
    page.select_option("#id_preset", "openai")
    smoke = page.locator("#id_suite option", has_text="smoke").first.inner_text()
    page.select_option("#id_suite", label=smoke)
    page.fill("#id_fast_base_url", fast_url)
    page.fill("#id_fast_model", "demo-fast")
    page.fill("#id_base_base_url", base_url)
    page.fill("#id_base_model", "demo-base")
    page.check("#id_local")  # the servers are the test's own, on 127.0.0.1


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
def test_a_pair_added_in_the_browser_runs_on_its_schedule(
    live_server, monkeypatch, demo_vendor_url
):
    sync_api = pytest.importorskip("playwright.sync_api")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    factories.user("ada", "admin", password="pw-ada-123")
    shots = screenshots_dir()
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            log_in(page, live_server.url, "/")
            page.click("a.add-pair-link")
            page.wait_for_url(f"{live_server.url}/pairs/add/")
            assert page.input_value("#id_repeat") == "2"
            assert page.input_value("#id_probe_every_minutes") == "15"
            fill(page, demo_vendor_url, demo_vendor_url)
            page.click("button[value=test]")
            page.locator("#connection-results .check.answered").nth(1).wait_for(timeout=20_000)
            text = page.locator("#connection-results").inner_text()
            assert "fast · acme-fast: answered — HTTP 200 · model demo-fast" in text
            assert "base · acme-base: answered" in text and "TTFT" in text
            page.screenshot(path=str(shots / "add-pair-tested.png"), full_page=True)
            page.click("button[value=save]")
            page.wait_for_url(f"{live_server.url}/pairs/acme/")
            assert "probe every 15 minutes" in page.locator("#pair-schedule").inner_text()
            assert page.locator("#no-schedule").count() == 0
            page.screenshot(path=str(shots / "add-pair-saved.png"), full_page=True)
        finally:
            browser.close()

    pair = Pair.objects.get(name="acme")
    task = PeriodicTask.objects.get(name="probe:acme")
    assert task.task == "monitor.tasks.probe_pair_task" and task.enabled
    run_id = probe_pair_task.run(*json.loads(task.args))  # what beat sends at each tick
    run = execute_run(run_id=run_id, cases_limit=2)  # what the worker does with the task
    assert run.status == "done" and run.trigger == "scheduled" and run.pair == pair
    assert run.repeat == 2 and run.summary["tiers"]["fast"]["n_ok"] == 4
    assert Run.objects.filter(pair=pair).count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(120)
def test_a_failed_test_connection_shows_the_vendors_message(
    live_server,
    monkeypatch,
    demo_vendor_url,
    refusing_url,
):
    sync_api = pytest.importorskip("playwright.sync_api")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    factories.user("ada", "admin", password="pw-ada-123")
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            log_in(page, live_server.url, "/pairs/add/")
            fill(page, demo_vendor_url, refusing_url)
            page.click("button[value=test]")
            failed = page.locator("#connection-results .check.failed")
            failed.wait_for(timeout=20_000)
            assert f"base · acme-base: failed: HTTP 401: {NO_KEY}" in failed.inner_text()
            assert page.locator("#connection-results .check.answered").count() == 1
            assert page.input_value("#id_base_base_url") == refusing_url  # the form kept
            page.screenshot(path=str(screenshots_dir() / "add-pair-refused.png"), full_page=True)
        finally:
            browser.close()
    assert not Pair.objects.exists()
