"""Runs left queued while later runs of the same pair ran: the task message of a queued run
vanished (a worker killed after reserving it takes it along on kombu's filesystem broker; a task
that gave up before its claim leaves the same state), and nothing sent it again. The watchdog
now does (``watchdog.resend_lost``); a second delivery is a no-op claim."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from monitor.models import Pair, Run
from monitor.runs import heartbeat, watchdog
from monitor.runs.routing import PROBES
from monitor.runs.steps import queue_run
from monitor.tasks import enqueue_run, probe_pair_task, send_run
from tests.factories import vendor_pair
from tests.support import ROOT, purge, start_worker, stop, wait_for, worker_env

RESERVE_AND_HANG = """
import django, sys, time
django.setup()
from monitor.celery import app
channel = app.connection_for_read().default_channel
message = channel.basic_get("probes", no_ack=False)  # reserved, as a worker's prefetch does
print("reserved" if message is not None else "empty", flush=True)
time.sleep(120)
"""


def broker_messages() -> list[str]:
    folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"]
    return [name for name in os.listdir(folder) if name.endswith(f".{PROBES}.msg")]


def sibling(pair: Pair, name: str) -> Pair:
    """Another pair on the same endpoints (runs of their own, queued on their own)."""
    return Pair.objects.create(
        name=name, fast=pair.fast, base=pair.base, suite=pair.suite, repeat=1, cases_per_run=1
    )


def aged(run: Run, seconds: float) -> None:
    Run.objects.filter(pk=run.pk).update(sent_at=timezone.now() - timedelta(seconds=seconds))


@pytest.mark.django_db
def test_only_runs_queued_past_the_limit_since_their_last_send_are_sent_again(
    demo_vendor_url, settings
):
    settings.TIERWATCH_RESEND_AFTER_S = 600
    pair = vendor_pair(demo_vendor_url, suite="smoke")
    lost = queue_run(pair=pair)
    aged(lost, 700)
    fresh = queue_run(pair=sibling(pair, "other"))
    aged(fresh, 60)
    never = queue_run(pair=sibling(pair, "third"))
    Run.objects.filter(pk=never.pk).update(created_at=timezone.now() - timedelta(seconds=900))
    sent: list[int] = []
    assert watchdog.resend_lost(lambda run: sent.append(run.pk)) == [lost.pk, never.pk]
    assert sent == [lost.pk, never.pk]
    assert heartbeat.claim(lost.pk) == 1 and heartbeat.claim(lost.pk) is None  # twice: once


@pytest.mark.skipif(bool(os.environ.get("REDIS_URL")), reason="the filesystem broker's behaviour")
@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(150)
def test_a_run_whose_message_a_killed_worker_took_runs_once_the_watchdog_sends_it_again(
    demo_vendor_url, tmp_path
):
    pair = vendor_pair(demo_vendor_url, suite="smoke", cases_per_run=1, repeat=1)
    env = worker_env()
    purge(env)
    lost = enqueue_run(pair=pair)
    assert len(broker_messages()) == 1
    connection.close()
    consumer = subprocess.Popen(
        [sys.executable, "-c", RESERVE_AND_HANG],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert consumer.stdout is not None and consumer.stdout.readline().strip() == "reserved"
    finally:
        os.killpg(consumer.pid, signal.SIGKILL)  # killed before it acknowledged
        consumer.wait(timeout=20)
    # The state of the issue: queued, no broker message, nothing reserved by a live worker.
    assert broker_messages() == [] and Run.objects.get(pk=lost.pk).status == "queued"

    worker = start_worker(env, tmp_path, "worker", queues=(PROBES,))
    try:
        other = sibling(pair, "other")
        later = enqueue_run(pair=other)
        wait_for(lambda: Run.objects.get(pk=later.pk).status == "done", 60, "a later run", worker)
        assert Run.objects.get(pk=lost.pk).status == "queued"  # later runs ran; it did not
        assert probe_pair_task(pair.name) is None  # and it blocks every tick of its schedule

        aged(lost, settings.TIERWATCH_RESEND_AFTER_S + 1)
        watchdog.run_watchdog(resend=send_run)
        wait_for(lambda: Run.objects.get(pk=lost.pk).status == "done", 60, "the lost run", worker)
    finally:
        stop(worker)
    assert Run.objects.get(pk=lost.pk).sent_at > timezone.now() - timedelta(seconds=120)
