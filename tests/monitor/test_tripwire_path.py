"""Logprob tripwires through the product's own path: the schedule row → the task a worker runs
→ ``TripwireState`` → a switched fast tier fires → an alert opens and an audit is queued →
the verdict page tells it. Against the simulated vendor on 127.0.0.1, switched at run time."""

from __future__ import annotations

import httpx
import pytest
from django.urls import reverse

from evals.stats import run_conformal
from monitor.models import Alert, Endpoint, Pair, Run, TripwireState
from monitor.setup.schedules import ensure_tripwire_schedule
from monitor.setup.suites import sync_builtin_suite
from monitor.tasks import execute_run_task, probe_pair_task

pytestmark = pytest.mark.django_db


def make_pair(url: str, base_protocol: str = "openai") -> Pair:
    ends = {
        n: Endpoint.objects.create(
            name=f"{n}-{base_protocol}", base_url=url, model=n, simulated=True,
            protocol=base_protocol if n == "demo-base" else "openai",
        )
        for n in ("demo-base", "demo-fast")
    }  # fmt: skip
    sync_builtin_suite(name="audit")
    return Pair.objects.create(
        name=f"tw-{base_protocol}",
        fast=ends["demo-fast"],
        base=ends["demo-base"],
        suite=sync_builtin_suite(name="coding"),
    )


DAILY_S = 86400  # a cadence a user can save: a week of reference runs, threshold 900


def scheduled_tripwire(pair: Pair, every_s: int = DAILY_S) -> Run:
    """What beat does (the schedule row, then the task), executed here as a worker would."""
    ensure_tripwire_schedule(pair_name=pair.name, every_s=every_s)
    run = Run.objects.get(id=probe_pair_task.run(pair.name, "tripwire"))
    assert run.trigger == "scheduled" and run.kind == "tripwire"
    execute_run_task.run(run.id, kind="tripwire")
    run.refresh_from_db()
    assert run.status == "done", run.error
    return run


def switch(url: str, variant: str) -> None:
    r = httpx.post(f"{url}/_tierwatch/variant", json={"model": "demo-fast", "variant": variant})
    assert r.status_code == 200, r.text


def test_a_quantized_fast_tier_fires_its_tripwire_opens_an_alert_and_queues_an_audit(
    vendor, admin_client
):
    # at daily tripwire runs: the reference is a week of runs (run_conformal.reference_runs)
    pair = make_pair(vendor)
    need = run_conformal.reference_runs(DAILY_S)
    for _ in range(need + 4):  # reference runs frozen, then honest runs: nothing fires
        scheduled_tripwire(pair)
    state = TripwireState.objects.get(pair=pair)
    assert state.tiers["fast"]["reference_runs"] == need == 7
    assert not state.fired_tier and not Run.objects.filter(pair=pair, kind="audit").exists()
    assert state.cross["distance"] is not None and state.cross["floor"] is not None
    switch(vendor, "quantized")
    try:
        hours = 0
        while hours < 5 and not state.fired_tier:
            hours += 1
            fired_by = scheduled_tripwire(pair)
            state.refresh_from_db()
    finally:
        switch(vendor, "")
    assert state.fired_tier == "fast" and state.fired_run_id == fired_by.id, state.tiers
    # the second daily run: each switched run ranks first of 8 and moves past the tolerance,
    # e = ½ (5.6 + 66.9) ≈ 36 a run, and 36² ≥ the daily threshold 900; one run cannot
    assert hours == 2
    assert not state.tiers["base"]["eprocess"]["alarmed"]  # base did not change
    audit = Run.objects.get(pair=pair, kind="audit")
    assert (audit.trigger, audit.status, state.audit_id) == ("tripwire", "queued", audit.id)
    alert = Alert.objects.get(pair=pair, rule__metric="tripwire_fired")
    assert "fast tier" in alert.message and f"audit run {audit.id}" in alert.message
    page = admin_client.get(reverse("verdict:page", args=[pair.name])).content.decode()
    assert "Tripwires" in page and "fired on the fast tier" in page
    assert f"audit run {audit.id}" in page
    admin_client.post(reverse("verdict:acknowledge", args=[pair.name]))
    state.refresh_from_db()  # accepted: each tier collects a new reference
    assert (state.tiers, state.fired_tier, state.audit_id) == ({}, "", None)


def test_an_endpoint_without_logprobs_is_skipped_with_the_reason(vendor):
    pair = make_pair(vendor, base_protocol="anthropic")
    scheduled_tripwire(pair)
    state = TripwireState.objects.get(pair=pair)
    assert "returns no logprobs" in state.tiers["base"]["skipped"]
    assert state.tiers["fast"]["reference_runs"] == 1
