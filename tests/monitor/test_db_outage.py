"""A database outage in the database-only parts: the watchdog gives a run's owner one pass to
beat again after missing its own passes, and a run failed as "database unavailable" opens its
own alert. The outage itself (a PostgreSQL cluster stopped mid-run) is in test_faults.py."""

from datetime import timedelta

import pytest
from django.utils import timezone

from monitor.models import Beacon, Run
from monitor.runs import heartbeat, watchdog
from monitor.runs.pipeline import _steps
from monitor.runs.steps import create_run
from tests.factories import vendor_pair

pytestmark = pytest.mark.django_db


def ago(seconds: float):
    return timezone.now() - timedelta(seconds=seconds)


def test_after_missing_its_passes_the_watchdog_reaps_one_pass_later(demo_vendor_url, settings):
    settings.TIERWATCH_STALE_AFTER_S = 60
    run = create_run(pair=vendor_pair(demo_vendor_url, suite="smoke"))
    Run.objects.filter(pk=run.pk).update(
        status="running", started_at=ago(400), heartbeat_at=ago(400)
    )
    Beacon.objects.create(name=watchdog.WATCHDOG_BEACON, seen_at=ago(400))  # down with the db
    assert watchdog.run_watchdog() == []
    assert Run.objects.get(pk=run.pk).status == "running"  # its owner may be about to beat
    (alert,) = watchdog.run_watchdog()  # a pass later, still silent: lost
    assert alert.run_id == run.pk and alert.rule.metric == "worker_lost"


def test_a_run_failed_as_database_unavailable_says_so_with_its_alert(demo_vendor_url):
    run = create_run(pair=vendor_pair(demo_vendor_url, suite="smoke"))
    Run.objects.filter(pk=run.pk).update(status="running", attempt=1)
    outage = heartbeat.DatabaseUnavailable(
        "database unavailable: it did not answer for 601 s (limit 600 s); "
        "28 measured samples could not be stored"
    )
    notified = []

    def fails():
        raise outage

    assert not _steps(run.pk, 1, fails, notify=notified.append)
    run.refresh_from_db()
    assert run.status == "failed" and run.error == str(outage)  # no class name, no "lost"
    (alert,) = run.alerts.all()
    assert alert.rule.metric == "database_unavailable" and notified == [alert.pk]
    assert "failed: database unavailable: it did not answer for 601 s" in alert.message
