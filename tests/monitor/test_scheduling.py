"""A real Celery worker with beat (DatabaseScheduler) runs a scheduled probe end to end.

The broker is Redis when REDIS_URL is set (CI), else kombu's filesystem transport; the worker
is a separate process reading the same test database as this test.
"""

import os
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.db import connection

from monitor.celery import worker_argv
from monitor.models import Endpoint, Pair, Run
from monitor.setup.schedules import ensure_probe_schedule
from monitor.setup.suites import sync_builtin_suite
from tests.support import ROOT, worker_database_url


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
def test_a_scheduled_probe_runs_in_a_real_worker(demo_vendor_url):
    base = Endpoint.objects.create(
        name="b", base_url=demo_vendor_url, model="demo-base", simulated=True
    )
    fast = Endpoint.objects.create(
        name="f", base_url=demo_vendor_url, model="demo-fast", simulated=True
    )
    Pair.objects.create(
        name="sched",
        fast=fast,
        base=base,
        suite=sync_builtin_suite(name="smoke"),
        repeat=1,
        cases_per_run=3,
    )
    ensure_probe_schedule(pair_name="sched", every_s=3)
    connection.close()  # SQLite: let the worker write without waiting for our connection
    env = {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "DJANGO_SETTINGS_MODULE": "monitor.settings",
    }
    subprocess.run(
        [sys.executable, "-m", "celery", "-A", "monitor", "purge", "-f"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    worker = subprocess.Popen(
        worker_argv(
            concurrency=2,
            schedule_file=os.path.join(settings.VAR_DIR, "test-beat"),
            loglevel="INFO",
        ),
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        run = None
        while time.monotonic() < deadline and worker.poll() is None:
            run = Run.objects.filter(pair__name="sched", trigger="scheduled", status="done").first()
            if run:
                break
            time.sleep(0.2)
        assert run is not None, "no scheduled run completed"
        assert run.planned == run.completed == run.samples.count() == 6
        assert run.summary["tiers"]["fast"]["n_ok"] == 3
    finally:
        worker.terminate()
        try:
            out, _ = worker.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, 9)
            out, _ = worker.communicate()
        if run is None:
            print(out[-5000:])
