"""Backup and restore of a running deployment (docs/operations.md, "Backups"): a database filled
through the product's own path (``apply_config``, ``manage.py probe`` of a probe and an audit
against the simulated vendor), served by gunicorn and a worker with beat, is dumped with the
documented ``pg_dump`` while a run is writing its samples, restored with the documented
commands into a new database, and the product pointed at it: every table holds the same rows,
the pages show the same numbers, the run cut off by the dump is reaped and the schedules go on
from the restored rows.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest

from tests.factories import free_port
from tests.monitor import deployment
from tests.monitor.deployment import dsn, manage, page, pair_row
from tests.support import purge, start_process, start_worker, stop, wait_for

pytestmark = [pytest.mark.long, pytest.mark.timeout(300)]

CONFIG = """
endpoints:
  - {{name: fast, base_url: "{quick}", local: true, model: demo-fast}}
  - {{name: base, base_url: "{quick}", local: true, model: demo-base}}
  - {{name: slow-fast, base_url: "{slow}", local: true, model: demo-fast, max_concurrency: 1}}
  - {{name: slow-base, base_url: "{slow}", local: true, model: demo-base, max_concurrency: 1}}
pairs:
  - {{name: steady, fast: fast, base: base, suite: smoke, repeat: 2,
      schedule: {{every: 1d, audit_every: 7d}}}}
  - {{name: busy, fast: slow-fast, base: slow-base, suite: smoke, repeat: 1,
      schedule: {{every: 1m}}}}
"""
STEADY_PAGES = ["/pairs/steady/", "/pairs/steady/verdict/", "/pairs/steady/timeline/"]


@pytest.fixture(scope="module")
def slow_vendor_url() -> Iterator[str]:
    """The simulated vendor at its real pace, so a run is still writing when the dump starts."""
    port = free_port()
    proc = start_process(
        [sys.executable, "-m", "evals.vendors.simulated", "--port", str(port), "--time-scale", "1"],
        f"http://127.0.0.1:{port}/health",
    )
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(timeout=10)


def one(url: str, sql: str, *args: object) -> tuple:
    with psycopg.connect(dsn(url)) as db:
        return db.execute(sql, args).fetchone()


def fill(url: str, quick: str, slow: str, folder) -> None:
    """Migrate, configure and measure the steady pair through the product's commands."""
    manage(url, "migrate", "--noinput")
    config = folder / "pairs.yaml"
    config.write_text(CONFIG.format(quick=quick, slow=slow))
    manage(url, "apply_config", str(config))
    manage(url, "probe", "steady", "--cases", "5")
    manage(url, "probe", "steady", "--kind", "audit", "--cases", "5")
    deployment.create_user(url)


def test_a_dump_of_a_running_deployment_restores_with_every_row_page_and_schedule(
    demo_vendor_url, slow_vendor_url, tmp_path
):
    backup = tmp_path / "tierwatch.dump"
    with (
        deployment.scratch_database("backup_src") as source,
        deployment.scratch_database("backup_dst") as restored,
    ):
        fill(source, demo_vendor_url, slow_vendor_url, tmp_path)
        worker = start_worker(deployment.env(source), tmp_path, "source-worker")
        try:
            with deployment.web(source, tmp_path) as client:
                # a run of the busy pair through the running deployment: the page's button,
                # then the worker
                probe_page = client.get("/pairs/busy/")
                token = probe_page.text.split('name="csrfmiddlewaretoken" value="', 1)[1]
                queued = client.post(
                    "/pairs/busy/probe/", data={"csrfmiddlewaretoken": token.split('"', 1)[0]}
                )
                assert queued.status_code == 302, queued.text[:500]
                run_id = int(queued.headers["location"].rstrip("/").rsplit("/", 1)[1])
                wait_for(
                    lambda: one(source, "SELECT count(*) FROM monitor_sample WHERE run_id = %s",
                                run_id)[0] >= 2,
                    60, "the busy run's first samples", worker,
                )  # fmt: skip
                # the documented pg_dump, at one exported snapshot that the test counts too
                with psycopg.connect(dsn(source)) as snap:
                    snap.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                    (snapshot,) = snap.execute("SELECT pg_export_snapshot()").fetchone()
                    deployment.run_documented(
                        "### Back up",
                        {"DATABASE_URL": source, "BACKUP": str(backup)},
                        extra=f" --snapshot={snapshot}",
                    )
                    before = deployment.digests(snap)
                    status_at_dump, samples_at_dump = snap.execute(
                        "SELECT status, (SELECT count(*) FROM monitor_sample WHERE run_id = %s) "
                        "FROM monitor_run WHERE id = %s",
                        (run_id, run_id),
                    ).fetchone()
                # the deployment kept writing after the dump: the run was cut in the middle
                at_dump = before["monitor_sample"][0]
                wait_for(
                    lambda: one(source, "SELECT count(*) FROM monitor_sample")[0] > at_dump,
                    60, "a sample stored after the dump", worker,
                )  # fmt: skip
                stop(worker)  # one beat and one set of workers per broker (docs/operations.md)
                purge(deployment.env(source))
                source_pages = {p: page(client, p) for p in ["/", *STEADY_PAGES]}

            deployment.run_documented(
                "### Restore", {"DATABASE_URL": restored, "BACKUP": str(backup)}
            )
            with psycopg.connect(dsn(restored)) as db:
                after = deployment.digests(db)
            assert status_at_dump == "running"
            assert set(after) == set(before) and len(after) > 30
            assert after == before  # every table: the same count and the same rows
            assert before["monitor_pair"][0] == 2 and before["monitor_run"][0] == 3
            assert before["monitor_sample"][0] > 2 * 2 * 5  # the steady pair's and the busy one's

            (last_run_at,) = one(
                restored,
                "SELECT last_run_at FROM django_celery_beat_periodictask WHERE name = 'probe:busy'",
            )
            worker = start_worker(
                deployment.env(restored, TIERWATCH_STALE_AFTER_S="10"), tmp_path, "restored-worker"
            )
            with deployment.web(restored, tmp_path) as client:
                restored_pages = {p: page(client, p) for p in ["/", *STEADY_PAGES]}
                for path in STEADY_PAGES:
                    assert restored_pages[path] == source_pages[path], path
                assert pair_row(restored_pages["/"], "steady") == pair_row(
                    source_pages["/"], "steady"
                )
                # the restored beat goes on from the restored rows: busy's next scheduled probe
                # (every minute) runs and finishes, no earlier than its restored last run allows
                done = wait_for(
                    lambda: one(
                        restored,
                        "SELECT id, created_at FROM monitor_run WHERE pair_id = (SELECT id FROM "
                        "monitor_pair WHERE name = 'busy') AND trigger = 'scheduled' "
                        "AND status = 'done' ORDER BY id LIMIT 1",
                    ),
                    150, "a scheduled run of the busy pair done on the restored database", worker,
                )  # fmt: skip
                assert done[1] >= last_run_at + timedelta(seconds=59)
                # the run the dump cut off is reaped (worker lost), its stored samples kept
                status, error, kept = wait_for(
                    lambda: (
                        row
                        if (row := one(
                            restored,
                            "SELECT status, error, (SELECT count(*) FROM monitor_sample "
                            "WHERE run_id = %s) FROM monitor_run WHERE id = %s",
                            run_id, run_id,
                        ))[0] == "failed"
                        else None
                    ),
                    90, "the cut-off run reaped", worker,
                )  # fmt: skip
                assert error.startswith("worker lost")
                assert kept == samples_at_dump >= 2
                assert client.get("/pairs/busy/").status_code == 200
        finally:
            stop(worker)
