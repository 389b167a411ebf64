"""Faults with real parts (docs/reliability.md): a Celery worker killed with SIGKILL mid-run, a
PostgreSQL cluster and a Redis server restarted mid-run. The cluster and the Redis server are
the test's own, on free ports; the machine's services are left alone. Each test is bounded by
its waits (well under a minute) and marked ``faults``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from monitor.alerting.alerts import notify
from monitor.models import Channel, Endpoint, Pair, Run, Sample
from monitor.runs import watchdog
from monitor.runs.steps import create_run
from monitor.setup.schedules import ensure_probe_schedule
from monitor.setup.suites import sync_builtin_suite
from monitor.tasks import execute_run_task
from tests.factories import free_port
from tests.support import (
    ROOT,
    purge,
    start_process,
    start_worker,
    stop,
    wait_for,
    worker_env,
)

# serial: each kills workers and restarts servers on a tight clock; one at a time under xdist
pytestmark = [pytest.mark.faults, pytest.mark.timeout(120), pytest.mark.xdist_group("serial")]

PG_BIN = "/usr/lib/postgresql/15/bin"
CASES = 8  # smoke cases; one request at a time per tier: a run of ~10 s at time scale 1


@pytest.fixture(scope="module")
def slow_vendor_url() -> Iterator[str]:
    """The simulated vendor at its real pace (time scale 1), so a run lasts long enough to be
    interrupted in the middle."""
    port = free_port()
    proc = start_process(
        [sys.executable, "-m", "evals.vendors.simulated", "--port", str(port), "--time-scale", "1"],
        f"http://127.0.0.1:{port}/health",
    )
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(timeout=10)


def slow_pair(vendor_url: str, cases: int = CASES) -> Pair:
    endpoints = [
        Endpoint.objects.create(
            name=name, base_url=vendor_url, model=f"demo-{name}", simulated=True, max_concurrency=1
        )
        for name in ("fast", "base")
    ]
    return Pair.objects.create(
        name="faulty",
        fast=endpoints[0],
        base=endpoints[1],
        suite=sync_builtin_suite(name="smoke"),
        repeat=1,
        cases_per_run=cases,
    )


def sample_keys(run: Run) -> list[tuple]:
    return list(run.samples.values_list("case__key", "tier", "batch", "repetition"))


def killed_mid_run(vendor_url: str, tmp_path) -> tuple[Run, set[int]]:
    """A run executing in a real worker, the worker SIGKILLed after three samples: the
    situation of the issue (the run stays running, the message is gone)."""
    run = create_run(pair=slow_pair(vendor_url), seed=4)
    connection.close()  # SQLite: let the worker write
    env = worker_env()
    purge(env)
    worker = start_worker(env, tmp_path, "worker-a")
    try:
        execute_run_task.delay(run.id)
        wait_for(lambda: Sample.objects.filter(run=run).count() >= 3, 40, "3 samples", worker)
        watchdog.run_watchdog()  # as beat would, so /health has nothing to complain about
        health = Client().get("/health")
        assert health.status_code == 200, health.json()
        os.killpg(worker.pid, signal.SIGKILL)
    finally:
        stop(worker)
    run.refresh_from_db()
    assert run.status == "running" and run.completed < run.planned == 2 * CASES
    return run, set(run.samples.values_list("id", flat=True))


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_run_is_reaped_with_its_samples_kept(
    slow_vendor_url, tmp_path, settings, smtp
):
    run, stored = killed_mid_run(slow_vendor_url, tmp_path)
    settings.TIERWATCH_STALE_AFTER_S = 1
    # polled: the watchdog reaps the run on the first pass after its heartbeat is 1 s old
    (alert,) = wait_for(
        lambda: [a for a in watchdog.run_watchdog() if a.run_id == run.id],
        10,
        "the killed run reaped as stale",
    )
    assert watchdog.reap_stale_runs() == []  # once per run
    run.refresh_from_db()
    assert run.status == "failed" and run.error.startswith("worker lost: no heartbeat for")
    assert set(run.samples.values_list("id", flat=True)) == stored
    tiers = run.summary["tiers"]
    assert run.completed == tiers["fast"]["n"] + tiers["base"]["n"] == len(stored)
    assert f"{len(stored)} of {2 * CASES} samples were stored" in alert.message
    Channel.objects.create(name="ops", kind="email", target="ops@example.com")
    (sent,) = notify(alert_id=alert.id)
    assert sent.ok and smtp.messages[0][1]["Subject"].endswith("run failed: worker lost")


@pytest.mark.django_db(transaction=True)
def test_a_redelivered_task_takes_over_and_stores_only_what_is_missing(slow_vendor_url, tmp_path):
    run, stored = killed_mid_run(slow_vendor_url, tmp_path)
    env = worker_env(TIERWATCH_STALE_AFTER_S="2")
    wait_for(  # the dead owner's heartbeat is now stale for the new worker (with a margin)
        lambda: Run.objects.filter(
            id=run.id, heartbeat_at__lt=timezone.now() - timedelta(seconds=2.5)
        ).exists(),
        10,
        "the dead owner's heartbeat 2.5 s old",
    )
    worker = start_worker(env, tmp_path, "worker-b")
    try:
        execute_run_task.delay(run.id)  # what acks_late redelivers
        wait_for(
            lambda: Run.objects.filter(id=run.id, status="done").exists(),
            45,
            "the taken-over run done",
            worker,
        )
    finally:
        stop(worker)
    run.refresh_from_db()
    keys = sample_keys(run)
    assert run.attempt == 2 and len(keys) == len(set(keys)) == run.planned == run.completed
    assert stored <= set(run.samples.values_list("id", flat=True))


# PostgreSQL restarted mid-run ------------------------------------------------------------------


@dataclass
class Cluster:
    data: str
    port: int
    as_user: list[str]

    def ctl(self, *args: str) -> None:
        subprocess.run(
            [*self.as_user, f"{PG_BIN}/pg_ctl", "-D", self.data, "-w", *args],
            check=True,
            capture_output=True,
            timeout=60,
        )

    def start(self, action: str = "start") -> None:
        """Start (or restart); the log goes to a file, or the server would hold our pipe."""
        self.ctl(
            "-l",
            f"{self.data}/server.log",
            "-m",
            "fast",
            "-o",
            f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off",
            action,
        )

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"


def _initdb(as_user: list[str]) -> str:
    data = tempfile.mkdtemp(prefix="tierwatch-pg-")
    if as_user:
        shutil.chown(data, "postgres")
    subprocess.run(
        [
            *as_user,
            f"{PG_BIN}/initdb",
            "-D",
            data,
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return data


@pytest.fixture(scope="module")
def migrated_data() -> Iterator[tuple[str, list[str]]]:
    """A stopped PostgreSQL 15 cluster with tierwatch's tables, made once per module (initdb,
    then ``manage.py migrate``): each test starts from a copy, so none pays the migrations
    again (as the postgres user when the test runs as root: initdb refuses root)."""
    if not os.path.exists(f"{PG_BIN}/initdb"):
        pytest.skip(f"PostgreSQL 15 binaries not installed in {PG_BIN}")
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    cluster = Cluster(_initdb(as_user), free_port(), as_user)
    cluster.start()
    try:
        env = {
            **os.environ,
            "DATABASE_URL": cluster.url,
            "DJANGO_SETTINGS_MODULE": "monitor.settings",
        }
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
        )
    finally:
        cluster.ctl("-m", "fast", "stop")
    yield cluster.data, as_user
    shutil.rmtree(cluster.data, ignore_errors=True)


@pytest.fixture
def own_postgres(migrated_data) -> Iterator[Cluster]:
    """A migrated PostgreSQL 15 cluster of the test's own: a copy of ``migrated_data`` in a
    temporary directory, started on a free port."""
    template, as_user = migrated_data
    data = tempfile.mkdtemp(prefix="tierwatch-pg-")
    os.rmdir(data)  # cp -a makes it, with the template's owner and mode
    subprocess.run([*as_user, "cp", "-a", template, data], check=True, timeout=60)
    cluster = Cluster(data, free_port(), as_user)
    cluster.start()
    yield cluster
    cluster.ctl("-m", "immediate", "stop")
    shutil.rmtree(data, ignore_errors=True)


PG_CONFIG = """
endpoints:
  - {{name: fast, base_url: "{url}", local: true, model: demo-fast, max_concurrency: 1}}
  - {{name: base, base_url: "{url}", local: true, model: demo-base, max_concurrency: 1}}
pairs:
  - {{name: faulty, fast: fast, base: base, suite: smoke, repeat: 1}}
"""


def test_a_postgresql_restart_mid_run_loses_and_duplicates_nothing(
    own_postgres, slow_vendor_url, tmp_path
):
    env = {
        **os.environ,
        "DATABASE_URL": own_postgres.url,
        "TIERWATCH_DB_RETRY_S": "30",
        "DJANGO_SETTINGS_MODULE": "monitor.settings",
    }
    manage = [sys.executable, "manage.py"]
    config = tmp_path / "faulty.yaml"
    config.write_text(PG_CONFIG.format(url=slow_vendor_url))
    subprocess.run(  # the cluster is migrated (``migrated_data``)
        [*manage, "apply_config", str(config)], cwd=ROOT, env=env, check=True, capture_output=True
    )
    probe = subprocess.Popen(
        [*manage, "probe", "faulty", "--cases", "5", "--json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    dsn = own_postgres.url.replace("postgres://", "postgresql://")

    def count(sql: str) -> int:
        try:
            with psycopg.connect(dsn, connect_timeout=2) as db:
                return db.execute(sql).fetchone()[0]
        except psycopg.OperationalError:
            return 0

    try:
        wait_for(lambda: count("SELECT count(*) FROM monitor_sample") >= 2, 40, "2 samples")
        own_postgres.start("restart")  # fast shutdown: every open connection is terminated
        _, err = probe.communicate(timeout=50)
    finally:
        if probe.poll() is None:
            probe.kill()
    assert probe.returncode == 0, err[-3000:]
    assert "database lost while storing" in err or "heartbeat not stored" in err, err[-3000:]
    with psycopg.connect(dsn) as db:
        status, planned, completed = db.execute(
            "SELECT status, planned, completed FROM monitor_run"
        ).fetchone()
        stored, distinct = db.execute(
            "SELECT count(*), count(DISTINCT (case_id, tier, batch, repetition)) "
            "FROM monitor_sample"
        ).fetchone()
    assert status == "done" and planned == 2 * 5
    assert stored == distinct == completed == planned  # none lost, none twice


# Redis restarted mid-run -----------------------------------------------------------------------


def start_redis(port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import redis

    client = redis.Redis(port=port, socket_connect_timeout=0.5)
    wait_for(lambda: _pings(client), 10, f"redis on {port}")
    return proc


def _pings(client) -> bool:
    try:
        return bool(client.ping())
    except Exception:
        return False


@pytest.mark.django_db(transaction=True)
def test_a_redis_restart_mid_run_completes_it_and_the_schedule_goes_on(slow_vendor_url, tmp_path):
    pair = slow_pair(slow_vendor_url, cases=4)
    ensure_probe_schedule(pair_name=pair.name, every_s=5)
    connection.close()
    port = free_port()
    redis_server = start_redis(port)
    env = worker_env(REDIS_URL=f"redis://127.0.0.1:{port}/0")
    worker = start_worker(env, tmp_path, "worker-c")
    scheduled = Run.objects.filter(pair=pair, trigger="scheduled")
    try:
        first = wait_for(
            lambda: scheduled.filter(status="running", completed__gte=2).first(),
            40,
            "a scheduled run with 2 samples",
            worker,
        )
        redis_server.terminate()  # no persistence: every queued message is gone
        redis_server.wait(timeout=10)
        restarted_at = timezone.now()
        redis_server = start_redis(port)
        wait_for(
            lambda: Run.objects.filter(id=first.id, status="done").exists(),
            30,
            "the interrupted run done",
            worker,
        )
        wait_for(
            lambda: scheduled.filter(created_at__gt=restarted_at, status="done").exists(),
            30,
            "a run scheduled after the restart done",
            worker,
        )
        assert worker.poll() is None, "the worker must outlive a broker restart"
    finally:
        stop(worker)
        redis_server.terminate()
        redis_server.wait(timeout=10)
    first.refresh_from_db()
    keys = sample_keys(first)
    assert len(keys) == len(set(keys)) == first.planned == first.completed == 8
    for run in scheduled.filter(status="done"):
        keys = sample_keys(run)
        assert len(keys) == len(set(keys)) == run.planned


def children(pid: int) -> list[int]:
    """The live child processes of ``pid`` (from /proc: no ps needed)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(entry))
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_with_sigkill_takes_its_embedded_beat_with_it(slow_vendor_url, tmp_path):
    """Only the worker's own pid is killed (a supervisor's kill, not the process group): its
    embedded beat must not live on, or the restarted worker's beat makes every schedule run
    twice."""
    pair = slow_pair(slow_vendor_url, cases=1)
    ensure_probe_schedule(pair_name=pair.name, every_s=4)
    connection.close()
    env = worker_env()
    purge(env)
    worker = start_worker(env, tmp_path, "worker-beat")
    try:
        wait_for(lambda: children(worker.pid), 30, "the embedded beat process", worker)
        beats = children(worker.pid)
        wait_for(  # beat is ticking: a scheduled run exists
            lambda: Run.objects.filter(pair=pair, trigger="scheduled").exists(), 60, "a run", worker
        )
        os.kill(worker.pid, signal.SIGKILL)  # the worker alone, not its group
        worker.wait(timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(alive(b) for b in beats):
            time.sleep(0.2)
        assert not any(alive(b) for b in beats), "the embedded beat outlived its worker"
    finally:
        stop(worker)


# PostgreSQL down for longer than the retry ---------------------------------------------------


def _probe_against(cluster: Cluster, vendor_url: str, tmp_path, **env_extra: str):
    """``manage.py probe`` of 5 cases per tier against the cluster, its stderr read as it
    comes (a thread), so the test can act on what the worker says."""
    env = {
        **os.environ,
        "DATABASE_URL": cluster.url,
        "DJANGO_SETTINGS_MODULE": "monitor.settings",
        **env_extra,
    }
    manage = [sys.executable, "manage.py"]
    config = tmp_path / "faulty.yaml"
    config.write_text(PG_CONFIG.format(url=vendor_url))
    subprocess.run(  # the cluster is migrated (``migrated_data``)
        [*manage, "apply_config", str(config)], cwd=ROOT, env=env, check=True, capture_output=True
    )
    probe = subprocess.Popen(
        [*manage, "probe", "faulty", "--cases", "5", "--json"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(probe.stderr), daemon=True)
    reader.start()
    return probe, lines, reader


def _count(cluster: Cluster, sql: str) -> int:
    try:
        with psycopg.connect(cluster.url.replace("postgres://", "postgresql://")) as db:
            return db.execute(sql).fetchone()[0]
    except psycopg.OperationalError:
        return 0


@pytest.mark.timeout(300)  # a run of ~10 s held up by the outage
def test_a_postgresql_outage_past_the_retry_keeps_the_samples_and_stores_them_after(
    own_postgres, slow_vendor_url, tmp_path
):
    """Down 12 s with a 1 s retry (the issue's 100 s against 60 s, scaled): every measured
    sample waits in memory, each is stored once when the database returns, and the run is done
    (before: the run failed, later "worker lost", with 4 of 32 samples stored)."""
    probe, lines, reader = _probe_against(
        own_postgres, slow_vendor_url, tmp_path, TIERWATCH_DB_RETRY_S="1"
    )
    try:
        wait_for(lambda: _count(own_postgres, "SELECT count(*) FROM monitor_sample") >= 2, 40, "2")
        own_postgres.ctl("-m", "fast", "stop")
        time.sleep(12)  # the vendor answers the rest of the plan meanwhile (~1 s per request)
        own_postgres.start()
        probe.wait(timeout=60)
    finally:
        if probe.poll() is None:
            probe.kill()
    reader.join(5)
    err = "".join(lines)
    assert probe.returncode == 0, err[-3000:]
    assert "database unavailable; measured samples wait in memory" in err, err[-3000:]
    assert "database back after" in err, err[-3000:]
    with psycopg.connect(own_postgres.url.replace("postgres://", "postgresql://")) as db:
        status, error, planned, completed = db.execute(
            "SELECT status, error, planned, completed FROM monitor_run"
        ).fetchone()
        stored, distinct = db.execute(
            "SELECT count(*), count(DISTINCT (case_id, tier, batch, repetition)) "
            "FROM monitor_sample"
        ).fetchone()
    assert (status, error) == ("done", ""), error
    assert stored == distinct == completed == planned == 2 * 5  # none lost, none twice


@pytest.mark.timeout(300)  # a run of ~10 s held up by the outage
def test_a_postgresql_outage_past_its_limit_fails_the_run_as_database_unavailable(
    own_postgres, slow_vendor_url, tmp_path
):
    """Down past ``TIERWATCH_DB_OUTAGE_S`` (4 s here): the worker, alive, gives up waiting,
    then waits again to mark the run failed; once the database is back the run says
    "database unavailable" with an alert of its own, never "worker lost"."""
    probe, lines, reader = _probe_against(
        own_postgres,
        slow_vendor_url,
        tmp_path,
        TIERWATCH_DB_RETRY_S="1",
        TIERWATCH_DB_OUTAGE_S="4",
    )
    try:
        wait_for(lambda: _count(own_postgres, "SELECT count(*) FROM monitor_sample") >= 2, 40, "2")
        own_postgres.ctl("-m", "fast", "stop")
        wait_for(lambda: "did not answer for" in "".join(lines), 60, "the worker giving up")
        own_postgres.start()
        probe.wait(timeout=60)
    finally:
        if probe.poll() is None:
            probe.kill()
    reader.join(5)
    err = "".join(lines)
    with psycopg.connect(own_postgres.url.replace("postgres://", "postgresql://")) as db:
        status, error = db.execute("SELECT status, error FROM monitor_run").fetchone()
        alerts = db.execute(
            "SELECT r.metric, a.message FROM monitor_alert a JOIN monitor_alertrule r "
            "ON a.rule_id = r.id"
        ).fetchall()
    assert status == "failed", err[-3000:]
    assert error.startswith("database unavailable: it did not answer for"), error
    assert "samples could not be stored" in error and "worker lost" not in error
    ((metric, message),) = alerts
    assert metric == "database_unavailable" and "database unavailable" in message
