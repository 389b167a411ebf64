"""The watchdog's parts on the real database: claims and takeover, the reaper, the dead man's
switch. Worker processes killed for real, and database and broker restarts, are in
tests/monitor/test_faults.py."""

from datetime import timedelta

import pytest
from django.utils import timezone

from monitor.alerting.alerts import notify
from monitor.models import Alert, AlertRule, Beacon, Channel, Run, Sample
from monitor.runs import heartbeat, watchdog
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.setup.schedules import ensure_probe_schedule
from tests.factories import vendor_pair

pytestmark = pytest.mark.django_db


def ago(seconds: float):
    return timezone.now() - timedelta(seconds=seconds)


def running(pair, *, heartbeat_s: float | None, attempt: int = 1) -> Run:
    run = create_run(pair=pair, seed=3)
    Run.objects.filter(pk=run.pk).update(
        status="running",
        attempt=attempt,
        started_at=ago(heartbeat_s or 0),
        heartbeat_at=None if heartbeat_s is None else ago(heartbeat_s),
    )
    return Run.objects.get(pk=run.pk)


def test_it_claims_a_queued_run_once(demo_vendor_url):
    run = create_run(pair=vendor_pair(demo_vendor_url, suite="smoke"))
    assert heartbeat.claim(run.id) == 1
    assert heartbeat.claim(run.id) is None  # the second delivery of the same task
    run.refresh_from_db()
    assert run.status == "running" and run.heartbeat_at is not None


def test_it_lets_a_new_delivery_take_over_only_a_stale_run(demo_vendor_url, settings):
    settings.TIERWATCH_STALE_AFTER_S = 60
    pair = vendor_pair(demo_vendor_url, suite="smoke")
    alive = running(pair, heartbeat_s=5)
    stale = running(pair, heartbeat_s=120)
    assert heartbeat.claim(alive.id) is None
    assert heartbeat.claim(stale.id) == 2
    with pytest.raises(heartbeat.RunLost):
        heartbeat.beat(stale)  # the old owner (attempt 1) learns it lost the run
    heartbeat.beat(alive)


def test_a_taken_over_run_resumes_without_duplicating_samples(demo_vendor_url, settings):
    settings.TIERWATCH_STALE_AFTER_S = 60
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=2)
    run = execute_run(run_id=create_run(pair=pair, seed=5).id, cases_limit=3)
    assert run.status == "done" and run.planned == 12
    keep = list(run.samples.order_by("seq").values_list("id", flat=True)[:5])
    run.samples.exclude(id__in=keep).delete()  # as if the worker died after five samples
    Run.objects.filter(pk=run.pk).update(status="running", heartbeat_at=ago(120), completed=5)
    resumed = execute_run(run_id=run.id, cases_limit=3)
    assert resumed.status == "done" and resumed.attempt == 2
    keys = list(resumed.samples.values_list("case__key", "tier", "batch", "repetition"))
    assert len(keys) == len(set(keys)) == resumed.planned == resumed.completed == 12
    assert set(keep) <= set(resumed.samples.values_list("id", flat=True))


def test_it_reaps_a_silent_run_once_summarised_with_an_alert(demo_vendor_url, settings, smtp):
    settings.TIERWATCH_STALE_AFTER_S = 60
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=1)
    run = execute_run(run_id=create_run(pair=pair, seed=1).id, cases_limit=2)
    run.samples.filter(tier="base").delete()
    Run.objects.filter(pk=run.pk).update(status="running", summary={}, heartbeat_at=ago(90))
    alive = running(pair, heartbeat_s=10)
    Channel.objects.create(name="ops", kind="email", target="ops@example.com")

    (alert,) = watchdog.reap_stale_runs()
    assert watchdog.reap_stale_runs() == []  # once per run
    run.refresh_from_db()
    assert run.status == "failed" and run.error.startswith("worker lost: no heartbeat for 9")
    assert run.samples.count() == 2 and run.summary["tiers"]["fast"]["n"] == 2
    assert alert.run_id == run.id and alert.rule.metric == "worker_lost"
    assert "2 of 4 samples were stored" in alert.message
    assert Run.objects.get(pk=alive.pk).status == "running"
    (sent,) = notify(alert_id=alert.id)  # a rule with no channels reaches every channel
    assert sent.ok
    ((_, message),) = smtp.messages
    assert message["Subject"] == "[tierwatch] ALERT p (simulated): run failed: worker lost"
    assert "raised by the watchdog" in message.get_body(("plain",)).get_content()


def test_it_reaps_a_run_queued_too_long_and_one_running_past_its_limit(demo_vendor_url, settings):
    settings.TIERWATCH_QUEUED_STALE_S, settings.TIERWATCH_RUN_MAX_S = 600, 900
    pair = vendor_pair(demo_vendor_url, suite="smoke")
    lost = create_run(pair=pair)
    Run.objects.filter(pk=lost.pk).update(created_at=ago(700))
    waiting = create_run(pair=pair)
    overrun = running(pair, heartbeat_s=1)
    Run.objects.filter(pk=overrun.pk).update(started_at=ago(1000))
    assert len(watchdog.reap_stale_runs()) == 2
    errors = dict(Run.objects.filter(status="failed").values_list("pk", "error"))
    assert errors[lost.pk].startswith("worker lost: queued for 7")
    assert "beyond the run time limit of 900 s" in errors[overrun.pk]
    assert Run.objects.get(pk=waiting.pk).status == "queued"


def test_it_reaps_an_evaluating_run_left_by_its_sandbox_worker_or_never_taken(
    demo_vendor_url, settings
):
    """A sandbox worker killed mid-evaluation (silent past the stale limit) and a run no sandbox
    worker took (no consumer, lost message) are failed; a run still waiting in time is not. A
    redelivered task may take the silent one over before the watchdog gets to it."""
    settings.TIERWATCH_STALE_AFTER_S, settings.TIERWATCH_QUEUED_STALE_S = 60, 600
    pair = vendor_pair(demo_vendor_url, suite="smoke")
    killed, never, waiting, taken_over = (running(pair, heartbeat_s=1) for _ in range(4))
    for run, beat_s, measured_s in (
        (killed, 120, 130),
        (never, None, 700),
        (waiting, None, 30),
        (taken_over, 120, 130),
    ):
        assert heartbeat.hand_off(run.id, run.attempt)
        Run.objects.filter(pk=run.pk).update(
            measured_at=ago(measured_s), heartbeat_at=None if beat_s is None else ago(beat_s)
        )
    assert heartbeat.claim_evaluation(taken_over.id) == 2  # the redelivered sandbox task
    assert len(watchdog.reap_stale_runs()) == 2
    errors = dict(Run.objects.filter(status="failed").values_list("pk", "error"))
    assert errors[killed.pk].startswith("worker lost: no heartbeat for 1")
    assert errors[never.pk].startswith("worker lost: measured, then waited 7")
    assert "sandbox queue" in errors[never.pk]
    statuses = dict(
        Run.objects.filter(pk__in=[waiting.pk, taken_over.pk]).values_list("pk", "status")
    )
    assert statuses == {waiting.pk: "evaluating", taken_over.pk: "evaluating"}


def test_a_disabled_system_rule_silences_the_alert_not_the_reaping(demo_vendor_url, settings):
    settings.TIERWATCH_STALE_AFTER_S = 60
    pair = vendor_pair(demo_vendor_url, suite="smoke")
    watchdog.system_rules("worker_lost", pair)
    AlertRule.objects.filter(metric="worker_lost").update(enabled=False)
    run = running(pair, heartbeat_s=None)
    Run.objects.filter(pk=run.pk).update(started_at=ago(100))
    assert watchdog.reap_stale_runs() == []
    assert Run.objects.get(pk=run.pk).status == "failed"


def test_the_dead_mans_switch_opens_once_and_resolves(demo_vendor_url, settings):
    settings.TIERWATCH_OVERDUE_GRACE_S = 30
    pair = vendor_pair(demo_vendor_url, suite="smoke")
    task = ensure_probe_schedule(pair_name=pair.name, every_s=60)
    assert watchdog.check_schedules() == []  # a new schedule: armed now, not late yet
    Beacon.objects.filter(name=f"schedule-{task.pk}").update(seen_at=ago(100))

    (opened,) = watchdog.check_schedules()
    assert watchdog.check_schedules() == []
    assert opened.rule.metric == "schedule_overdue" and opened.is_open
    assert "probe every 60 s (none finished yet; grace 30 s)" in opened.message

    run = create_run(pair=pair, trigger="scheduled")
    Run.objects.filter(pk=run.pk).update(status="done", finished_at=timezone.now())
    (resolved,) = watchdog.check_schedules()
    assert resolved.pk == opened.pk and not resolved.is_open


def test_a_disabled_schedule_is_not_watched(demo_vendor_url, settings):
    settings.TIERWATCH_OVERDUE_GRACE_S = 0
    pair = vendor_pair(demo_vendor_url, suite="smoke")
    task = ensure_probe_schedule(pair_name=pair.name, every_s=60, enabled=False)
    Beacon.objects.create(name=f"schedule-{task.pk}", seen_at=ago(1000))
    assert watchdog.check_schedules() == []
    assert not Beacon.objects.filter(name=f"schedule-{task.pk}").exists()


def test_the_watchdog_records_that_it_ran():
    assert watchdog.last_watchdog_run() is None
    watchdog.run_watchdog()
    assert (timezone.now() - watchdog.last_watchdog_run()).total_seconds() < 5
    assert not Alert.objects.exists() and not Sample.objects.exists()


def test_a_rule_naming_a_watchdog_metric_routes_its_alerts(demo_vendor_url):
    pair = vendor_pair(demo_vendor_url, suite="smoke")
    rule = AlertRule.objects.create(
        name="lost-to-ops", metric="worker_lost", tier="pair", threshold=0
    )
    assert watchdog.system_rules("worker_lost", pair) == [rule]
    assert not AlertRule.objects.filter(name="system-worker-lost").exists()
    assert [r.name for r in watchdog.system_rules("schedule_overdue", pair)] == [
        "system-schedule-overdue"
    ]


def test_a_worker_without_a_sandbox_says_so_once_and_never_passes_code(
    demo_vendor_url, monkeypatch
):
    monkeypatch.setenv("TIERWATCH_BWRAP", "/nonexistent/bwrap")  # no isolation, no opt-in
    monkeypatch.delenv("TIERWATCH_SANDBOX", raising=False)
    pair = vendor_pair(demo_vendor_url, suite="coding", repeat=1)
    first = execute_run(run_id=create_run(pair=pair).id, cases_limit=2)
    tested = first.samples.exclude(tests_detail=None)
    assert tested.exists() and all(
        s.tests_detail["error_class"] == "sandbox_unavailable" and s.tests_passed is False
        for s in tested
    )
    (alert,) = Alert.objects.filter(rule__metric="sandbox_unavailable")
    assert alert.pair == pair and alert.run == first and "no working sandbox" in alert.message
    execute_run(run_id=create_run(pair=pair).id, cases_limit=2)  # still no sandbox
    assert Alert.objects.filter(rule__metric="sandbox_unavailable").count() == 1  # said once
