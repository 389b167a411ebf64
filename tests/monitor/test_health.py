"""``/health`` without login, on the real database and broker. With a live worker it answers 200:
tests/monitor/test_faults.py, which starts one."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from monitor.models import Beacon, Run
from monitor.runs.steps import create_run
from monitor.runs.watchdog import run_watchdog
from monitor.setup.schedules import ensure_probe_schedule
from tests.factories import free_port, vendor_pair

pytestmark = pytest.mark.django_db


def test_it_answers_503_naming_the_missing_worker_and_beat(client):
    response = client.get("/health")
    assert response.status_code == 503 and response["Content-Type"] == "application/json"
    body = response.json()
    checks = body["checks"]
    assert body["status"] == "fail"
    assert checks["database"]["ok"] and checks["broker"]["ok"]
    assert checks["worker"] == {
        "ok": False,
        "reason": "no worker answered a ping within 1 s",
        "latency_ms": checks["worker"]["latency_ms"],
    }
    assert checks["beat"]["reason"] == "the watchdog has never run (is beat running?)"
    assert checks["schedules"]["reason"] == "0 scheduled pair(s) on time"
    assert all(c["latency_ms"] >= 0 for c in checks.values())


def test_it_reports_when_the_watchdog_last_ran(client):
    run_watchdog()
    beat = client.get("/health/").json()["checks"]["beat"]
    assert beat["ok"] and re.match(r"the watchdog last ran \d+ s ago, at 20\d\d-", beat["reason"])
    Beacon.objects.filter(name="watchdog").update(seen_at=timezone.now() - timedelta(minutes=10))
    beat = client.get("/health").json()["checks"]["beat"]
    assert not beat["ok"] and beat["reason"].endswith("it runs every 60 s: beat or worker down")


def test_a_dead_broker_fails_without_showing_its_password(client, settings):
    settings.CELERY_BROKER_URL = f"redis://:hunter2-secret@127.0.0.1:{free_port()}/0"
    response = client.get("/health")
    checks = response.json()["checks"]
    assert response.status_code == 503 and not checks["broker"]["ok"]
    assert checks["broker"]["reason"].startswith("ConnectionError")
    assert checks["worker"]["reason"] == "not asked: the broker is down"
    assert "hunter2" not in response.content.decode()


def test_it_fails_when_a_scheduled_pair_went_unmeasured(client, demo_vendor_url):
    """The dead man's switch seen from outside: it holds even when beat and every worker are
    down, because the web process evaluates it."""
    pair = vendor_pair(demo_vendor_url, suite="smoke")
    task = ensure_probe_schedule(pair_name=pair.name, every_s=60)
    schedules = client.get("/health").json()["checks"]["schedules"]
    assert schedules["ok"] and schedules["reason"] == "1 scheduled pair(s) on time"
    Beacon.objects.create(name=f"schedule-{task.pk}", seen_at=timezone.now() - timedelta(hours=1))
    schedules = client.get("/health").json()["checks"]["schedules"]
    assert not schedules["ok"]
    assert schedules["reason"] == (
        "overdue: pair p: probe every 60 s (none finished yet; grace 900 s)"
    )


def test_it_reports_the_queue_depth_and_the_oldest_queued_runs_age(client, demo_vendor_url):
    """The demo fell behind (56 runs queued, the oldest 24 minutes) while /health said "on
    time": the queue is now a check of its own, failing past the overdue grace."""
    assert client.get("/health").json()["queue"] == {
        "depth": 0,
        "oldest_run": None,
        "oldest_s": None,
    }
    pair = vendor_pair(demo_vendor_url, suite="smoke")
    old, new = create_run(pair=pair), create_run(pair=pair, kind="audit")
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(seconds=120))
    body = client.get("/health").json()
    assert body["queue"]["depth"] == 2 and body["queue"]["oldest_run"] == old.pk
    assert 120 <= body["queue"]["oldest_s"] < 600
    queue = body["checks"]["queue"]
    assert queue["ok"]
    assert re.match(rf"2 run\(s\) queued, the oldest \(run {old.pk}\) for 12\d s$", queue["reason"])
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(seconds=1000))
    queue = client.get("/health").json()["checks"]["queue"]
    assert not queue["ok"]
    assert queue["reason"].endswith("longer than 900 s, the workers fall behind")
    assert new.status == "queued"
