"""``/health`` without login, on the real database and broker. With a live worker it answers 200:
tests/monitor/test_faults.py, which starts one."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from monitor.models import Beacon
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
