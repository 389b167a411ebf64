"""The temperature-0 diagnostics say when a tier ran at its model's default temperature (its
endpoint sends none, as a reasoning model requires): through a probe, an audit and the verdict
page."""

from __future__ import annotations

import pytest

from monitor.models import Endpoint, Pair
from monitor.runs.pipeline import execute_run
from monitor.setup.schedules import ensure_probe_schedule
from monitor.setup.suites import sync_builtin_suite
from monitor.tasks import probe_pair_task

pytestmark = [pytest.mark.django_db, pytest.mark.long]


def _verdict_page(url: str, admin_client, *, fast_sends_temperature: bool) -> str:
    fast = Endpoint.objects.create(
        name="demo-fast", base_url=url, model="demo-fast", simulated=True, max_concurrency=8,
        send_temperature=fast_sends_temperature,
    )  # fmt: skip
    base = Endpoint.objects.create(
        name="demo-base", base_url=url, model="demo-base", simulated=True, max_concurrency=8
    )
    sync_builtin_suite(name="audit")
    pair = Pair.objects.create(
        name="p", fast=fast, base=base, suite=sync_builtin_suite(name="coding"), repeat=2
    )
    probe = execute_run(run_id=probe_pair_task.run(pair.name, "probe"), cases_limit=3)
    assert probe.status == "done", probe.error
    ensure_probe_schedule(pair_name=pair.name, every_s=3600, kind="audit")
    audit = execute_run(run_id=probe_pair_task.run(pair.name, "audit"), cases_limit=25)
    assert audit.summary["verdict"]["t0"]["default_temperature"] == (
        [] if fast_sends_temperature else ["fast"]
    )
    return admin_client.get("/pairs/p/verdict/").content.decode()


def test_a_tier_without_temperature_is_named_on_the_verdict_page(demo_vendor_url, admin_client):
    html = _verdict_page(demo_vendor_url, admin_client, fast_sends_temperature=False)
    assert 'id="t0-default-temperature"' in html
    assert "the fast tier ran at the model's default temperature" in html


def test_no_note_when_both_tiers_send_temperature_0(demo_vendor_url, admin_client):
    html = _verdict_page(demo_vendor_url, admin_client, fast_sends_temperature=True)
    assert "Temperature-0 answers" in html and 't0-default-temperature"' not in html
