"""The sandbox queue: a probe's generated code is tested after its timed requests, in a worker
of its own queue, and the run is summarised once that is done (``pipeline.evaluate_run``)."""

from __future__ import annotations

import pytest
from django.db import connection

from monitor.models import Run, Sample
from monitor.runs.pipeline import evaluate_run, execute_run
from monitor.runs.routing import PROBES, SANDBOX
from monitor.runs.steps import PENDING, create_run
from monitor.tasks import execute_run_task
from tests.factories import vendor_pair
from tests.support import purge, start_worker, stop, wait_for, worker_env


def pending(run: Run):
    return Sample.objects.filter(run=run, tests_detail__has_key=PENDING)


@pytest.mark.django_db
def test_a_run_is_handed_to_the_sandbox_after_its_timed_requests_and_evaluated_once(
    demo_vendor_url,
):
    pair = vendor_pair(demo_vendor_url, suite="coding", repeat=1)
    handed: list[int] = []
    run = execute_run(
        run_id=create_run(pair=pair, seed=2).id, cases_limit=2, evaluate=handed.append
    )
    assert handed == [run.id]
    assert run.status == "evaluating" and run.measured_at and run.heartbeat_at is None
    assert run.completed == run.planned == 4 and not run.summary.get("tiers")
    waiting = pending(run).count()
    assert waiting == run.samples.filter(ok=True).count() > 0
    assert not pending(run).exclude(tests_passed=None).exists()  # no result before the sandbox

    done = evaluate_run(run_id=run.id)
    assert done.status == "done" and done.attempt == run.attempt + 1
    assert not pending(done).exists() and done.summary["tiers"]["fast"]["n"] == 2
    evaluated = done.samples.filter(ok=True)
    assert all("n_tests" in s.tests_detail or s.tests_detail.get("error_class") for s in evaluated)
    assert evaluate_run(run_id=run.id).attempt == done.attempt  # a second delivery: nothing


@pytest.mark.django_db
def test_a_hand_off_that_cannot_be_sent_is_evaluated_where_it_was_measured(demo_vendor_url):
    def broker_down(run_id: int) -> None:
        raise ConnectionError("broker unreachable")

    pair = vendor_pair(demo_vendor_url, suite="coding", repeat=1)
    run = execute_run(run_id=create_run(pair=pair, seed=4).id, cases_limit=1, evaluate=broker_down)
    assert run.status == "done" and run.measured_at and not pending(run).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(150)
def test_real_workers_measure_on_probes_and_test_the_code_on_sandbox(demo_vendor_url, tmp_path):
    """A worker of the probes queue alone leaves the measured run waiting for the sandbox; a
    worker of the sandbox queue then tests its code and finishes it."""
    run = create_run(
        pair=vendor_pair(demo_vendor_url, suite="coding", repeat=1, cases_per_run=2), seed=3
    )
    connection.close()
    env = worker_env()
    purge(env)
    probes = start_worker(env, tmp_path, "probes", queues=(PROBES,))
    sandbox = None
    try:
        execute_run_task.delay(run.id, kind=run.kind)
        wait_for(
            lambda: Run.objects.get(id=run.id).status == "evaluating",
            90,
            "the run measured and handed off",
            probes,
        )
        assert pending(run).exists()
        sandbox = start_worker(env, tmp_path, "sandbox", queues=(SANDBOX,))
        wait_for(
            lambda: Run.objects.get(id=run.id).status == "done",
            90,
            "the run evaluated and done",
            sandbox,
        )
    finally:
        for proc in (probes, sandbox):
            if proc is not None:
                stop(proc)
    run.refresh_from_db()
    assert not pending(run).exists() and run.samples.exclude(tests_detail=None).count() > 0
    assert run.summary["tiers"]["base"]["n"] == 2
