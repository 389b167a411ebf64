"""How long ``/health`` takes with a live worker on the embedded set-up (SQLite, kombu's
filesystem broker), and its worker ping two ways: Celery's ``control.ping(timeout=1)``, which
always waits out its timeout, and with ``limit=1``, which returns at the first reply.

    .venv/bin/python -m benchmarks.health_latency [--n 10]

A fresh var dir in /tmp (its own database and broker), one worker (threads, 1), migrations
applied; the view is called in this process through Django's test client. Prints medians in
milliseconds; the figures go to docs/benchmarks.md ("/health").
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

VAR = tempfile.mkdtemp(prefix="tw-health-")
os.environ["TIERWATCH_VAR_DIR"] = VAR
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from monitor.celery import app, worker_argv  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10)
    n = parser.parse_args().n
    call_command("migrate", verbosity=0)
    argv = worker_argv(concurrency=1, schedule_file=f"{VAR}/beat", queues=("celery",))
    worker = subprocess.Popen(
        argv, env=os.environ.copy(), start_new_session=True, stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while not app.control.ping(timeout=1, limit=1):
            if time.monotonic() > deadline:
                raise SystemExit("the worker never answered")
        rows: dict[str, list[float]] = {"ping timeout=1": [], "ping limit=1": [], "/health": []}
        worker_check: list[float] = []
        for _ in range(n):
            for label, kwargs in (("ping timeout=1", {}), ("ping limit=1", {"limit": 1})):
                start = time.perf_counter()
                replies = app.control.ping(timeout=1.0, **kwargs)
                rows[label].append(1000 * (time.perf_counter() - start))
                assert replies, label
            start = time.perf_counter()
            body = Client(SERVER_NAME="127.0.0.1").get("/health").json()
            rows["/health"].append(1000 * (time.perf_counter() - start))
            worker_check.append(body["checks"]["worker"]["latency_ms"])
        for label, values in rows.items():
            print(f"{label:16s} median {statistics.median(values):7.1f} ms  max {max(values):7.1f}")
        print(f"{'worker check':16s} median {statistics.median(worker_check):7.1f} ms (n={n})")
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
