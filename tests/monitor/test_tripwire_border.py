"""Border-input tripwires (B3IT) through the product's own path, on endpoints that return no
logprobs (Anthropic's protocol): the schedule row → the task a worker runs → discovery only
once its cost was accepted → samples against the reference → a quantized fast tier fires →
an alert opens, an audit and a capability probe are queued → the verdict page tells it.
Against the simulated vendor on 127.0.0.1, switched at run time."""

from __future__ import annotations

import httpx
import pytest
from django.urls import reverse

from evals.stats import run_conformal
from monitor.models import Alert, Endpoint, Pair, Run, TripwireState
from monitor.runs import border, tripwire
from monitor.setup.schedules import ensure_tripwire_schedule
from monitor.setup.suites import sync_builtin_suite
from monitor.tasks import execute_run_task, probe_pair_task

pytestmark = pytest.mark.django_db


def make_pair(url: str) -> Pair:
    ends = {
        n: Endpoint.objects.create(
            name=f"{n}-border", base_url=url, model=n, simulated=True, protocol="anthropic",
            price_input_per_mtok=3.0, price_output_per_mtok=15.0,
        )
        for n in ("demo-base", "demo-fast")
    }  # fmt: skip
    sync_builtin_suite(name="audit")
    return Pair.objects.create(
        name="tw-border",
        fast=ends["demo-fast"],
        base=ends["demo-base"],
        suite=sync_builtin_suite(name="coding"),  # unit-tested cases: a capability probe too
    )


DAILY_S = 86400  # B3IT's cadence, a user's choice: a week of reference runs, threshold 900


def scheduled_tripwire(pair: Pair, every_s: int = DAILY_S) -> Run:
    """What beat does (the schedule row, then the task), executed here as a worker would."""
    ensure_tripwire_schedule(pair_name=pair.name, every_s=every_s)
    run = Run.objects.get(id=probe_pair_task.run(pair.name, "tripwire"))
    execute_run_task.run(run.id, kind="tripwire")
    run.refresh_from_db()
    assert run.status == "done", run.error
    return run


def switch(url: str, variant: str) -> None:
    r = httpx.post(f"{url}/_tierwatch/variant", json={"model": "demo-fast", "variant": variant})
    assert r.status_code == 200, r.text


def test_discovery_waits_for_its_cost_to_be_accepted(vendor):
    pair = make_pair(vendor)
    scheduled_tripwire(pair)
    state = TripwireState.objects.get(pair=pair)
    reason = state.tiers["fast"]["skipped"]
    assert "returns no logprobs" in reason and "1800 one-token requests" in reason, reason
    assert "$0.0" in reason  # priced: 1800 × (10 in × $3 + 1 out × $15) / 10⁶ ≈ $0.08
    assert "border" not in state.tiers["fast"]


@pytest.mark.long
def test_a_quantized_fast_tier_fires_its_border_tripwire_and_escalates(vendor, admin_client):
    pair = make_pair(vendor)
    TripwireState.objects.create(pair=pair, border_allowed=True)
    scheduled_tripwire(pair)  # discovery, both tiers
    state = TripwireState.objects.get(pair=pair)
    for tier in ("fast", "base"):
        found = state.tiers[tier]["border"]
        assert state.tiers[tier]["mode"] == "border"
        assert len(found["inputs"]) >= 10, found
        assert all(len(found["reference"][p]) >= 2 for p in found["inputs"])
    for _ in range(run_conformal.reference_runs(DAILY_S) + 3):  # reference runs, then honest
        scheduled_tripwire(pair)
    state.refresh_from_db()
    assert not state.fired_tier, state.tiers["fast"]["last"]
    assert state.cross.get("kind") == "border" and state.cross["floor"] is not None
    switch(vendor, "quantized")
    try:
        hours = 0
        # the run's e-value is at most ½ (5.6 + 66.9) ≈ 36: two runs at the least
        while hours < 12 and not state.fired_tier:
            hours += 1
            fired_by = scheduled_tripwire(pair)
            state.refresh_from_db()
    finally:
        switch(vendor, "")
    assert state.fired_tier == "fast" and state.fired_run_id == fired_by.id, (hours, state.tiers)
    assert hours >= 2
    assert not state.tiers["base"]["eprocess"]["alarmed"]
    audit = Run.objects.get(pair=pair, kind="audit")
    probe = Run.objects.get(pair=pair, kind="probe", trigger="tripwire")
    assert (audit.trigger, state.audit_id, probe.status) == ("tripwire", audit.id, "queued")
    alert = Alert.objects.get(pair=pair, rule__metric="tripwire_fired")
    assert (
        "border-input answers moved" in alert.message and f"audit run {audit.id}" in alert.message
    )
    assert f"capability probe run {probe.id}" in alert.message
    page = admin_client.get(reverse("verdict:page", args=[pair.name])).content.decode()
    assert "fired on the fast tier" in page and "border inputs" in page
    assert page.index("tripwire-fired") < page.index(f"audit run {audit.id}")
    admin_client.post(reverse("verdict:acknowledge", args=[pair.name]))
    state.refresh_from_db()  # accepted: discovery again on the model now served
    assert state.tiers == {} and state.border_allowed


def test_too_few_border_inputs_is_said_once_and_not_paid_for_again(vendor):
    pair = make_pair(vendor)
    TripwireState.objects.create(pair=pair, border_allowed=True)
    tiny = border.Sizes(candidates=6, target=6, reference=4)  # 6 candidates: < 5 borders
    run = Run.objects.create(pair=pair, suite=pair.suite, kind="tripwire", status="running")
    tripwire.execute(run_id=run.id, attempt=0, border_sizes=tiny)
    state = TripwireState.objects.get(pair=pair)
    found = state.tiers["fast"]["border"]
    assert found["inputs"] == [] and "at least 5 needed" in found["failed"], found
    assert found["requests"] <= 6 * 3 + 6 * 4
    again = Run.objects.create(pair=pair, suite=pair.suite, kind="tripwire", status="running")
    tripwire.execute(run_id=again.id, attempt=0, border_sizes=tiny)
    state.refresh_from_db()  # no second discovery: the reason stands until acknowledged
    assert "at least 5 needed" in state.tiers["fast"]["skipped"]
    assert state.tiers["fast"]["border"]["run"] == run.id


def test_the_demo_s_pair_without_logprobs_discovers_its_border_inputs_at_once(vendor):
    """The demo shows the black-box path: its no-logprobs pair (the demo's models over the
    Anthropic protocol) has a tripwire schedule and its discovery accepted, so its first
    scheduled run finds border inputs on both tiers."""
    from monitor.setup.demo import BLACKBOX_PAIR, ensure_demo

    pairs = ensure_demo(vendor_url=vendor)
    assert BLACKBOX_PAIR not in [p.name for p in pairs]  # no probes or audits of its own
    pair = Pair.objects.get(name=BLACKBOX_PAIR)
    assert {pair.fast.protocol, pair.base.protocol} == {"anthropic"}
    run = Run.objects.get(id=probe_pair_task.run(pair.name, "tripwire"))
    execute_run_task.run(run.id, kind="tripwire")
    state = TripwireState.objects.get(pair=pair)
    for tier in ("fast", "base"):
        assert state.tiers[tier]["mode"] == "border" and state.tiers[tier]["border"]["inputs"]
