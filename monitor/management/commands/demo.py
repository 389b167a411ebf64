"""``demo``: the embedded setup in one command (simulated vendor, worker + beat, web server).

Child processes are started with ``subprocess`` and stopped on exit, so Ctrl-C leaves nothing
behind. The broker is kombu's filesystem transport and the database SQLite unless
``REDIS_URL`` / ``DATABASE_URL`` say otherwise.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from monitor.celery import worker_argv
from monitor.services.demo import DEMO_PASSWORD, DEMO_USER, ensure_demo
from monitor.services.runs import create_run


def free_port(preferred: int) -> int:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            sock.bind(("127.0.0.1", 0))
            return sock.getsockname()[1]


def wait_http(url: str, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise CommandError(f"{what} did not answer at {url} within {timeout_s:.0f} s")


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class Command(BaseCommand):
    help = "Start the demo: simulated vendor, Celery worker with beat, and the web server."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--vendor-port", type=int, default=8811)
        parser.add_argument("--every", type=int, default=30, help="seconds between probes")
        parser.add_argument("--no-web", action="store_true", help="vendor and worker only")

    def handle(self, *args, **opts):
        procs: list[subprocess.Popen] = []
        # SIGTERM (e.g. from `timeout` or a process manager) must stop the children too.
        signal.signal(signal.SIGTERM, _interrupt)
        env = {
            **os.environ,
            "EMAIL_BACKEND": os.environ.get(
                "EMAIL_BACKEND", "django.core.mail.backends.filebased.EmailBackend"
            ),
        }

        def start(cmd: list[str]) -> subprocess.Popen:
            proc = subprocess.Popen(cmd, env=env, start_new_session=True)
            procs.append(proc)
            return proc

        try:
            call_command("migrate", interactive=False, verbosity=0)
            vendor_port = free_port(opts["vendor_port"])
            start([sys.executable, "-m", "evals.demo_vendor", "--port", str(vendor_port)])
            vendor_url = f"http://127.0.0.1:{vendor_port}/v1"
            wait_http(f"http://127.0.0.1:{vendor_port}/health", "the demo vendor")
            pairs = ensure_demo(vendor_url=vendor_url, probe_every_s=opts["every"])
            from monitor.tasks import execute_run_task

            for pair in pairs:  # data flows at once, not only after the first beat tick
                execute_run_task.delay(create_run(pair=pair, trigger="manual").id)
                # a small audit (5 samples per prompt per tier) so a verdict shows in ~2 min
                execute_run_task.delay(create_run(pair=pair, kind="audit", repeat=5).id)
            start(
                worker_argv(
                    concurrency=4, schedule_file=str(settings.VAR_DIR / "celerybeat-schedule")
                )
            )
            if not opts["no_web"]:
                port = free_port(opts["port"])
                start(
                    [
                        sys.executable,
                        "manage.py",
                        "runserver",
                        f"127.0.0.1:{port}",
                        "--noreload",
                        "--skip-checks",
                    ]
                )
                wait_http(f"http://127.0.0.1:{port}/accounts/login/", "the web server")
                self.stdout.write(
                    self.style.SUCCESS(
                        f"\n  tierwatch demo (SIMULATED vendor) is running:\n"
                        f"    open  http://127.0.0.1:{port}/\n"
                        f"    login {DEMO_USER} / {DEMO_PASSWORD}\n"
                        f"  probes every {opts['every']} s; Ctrl-C stops everything.\n"
                    )
                )
            while all(p.poll() is None for p in procs):
                time.sleep(1)
            dead = [p.args for p in procs if p.poll() is not None]
            raise CommandError(f"a demo process exited: {dead}")
        except KeyboardInterrupt:
            self.stdout.write("stopping…")
        finally:
            for proc in procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
