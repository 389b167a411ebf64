"""``demo``: the embedded setup in one command (simulated vendor, worker + beat, web server).

Child processes are started with ``subprocess`` and stopped on exit, so Ctrl-C leaves nothing
behind. The broker is kombu's filesystem transport and the database SQLite unless
``REDIS_URL`` / ``DATABASE_URL`` say otherwise.

``--engine llama.cpp`` is the second profile: the same dashboard over real llama.cpp servers on
this machine (``evals.vendors.llamacpp.vendor``, registered by
``monitor.setup.local_vendor``). The servers it started are stopped by pid on exit; ones
already running (``local_vendor up``) stay.
One worker process: two servers at one thread each already fill two cores.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from evals.vendors.llamacpp import EngineError, build, cache_dir, models, vendor
from monitor.celery import worker_argv
from monitor.models import Pair, RunKind
from monitor.setup.demo import DEMO_PASSWORD, DEMO_USER, ensure_demo
from monitor.setup.local_vendor import deactivate, ensure_local_demo
from monitor.tasks import enqueue_run

# A subset that 2 cores carry: the base tier, one fast tier per mechanism, a different model.
ENGINE_TARGETS = [
    "smollm2-f16",
    "smollm2-q4",
    "smollm2-f16-spec",
    "smollm2-f16-cached",
    "gemma-270m",
]
ENGINE_EVERY_S, ENGINE_AUDIT_EVERY_S = 300, 3600  # real engines run ~70-150 tok/s per thread
ENGINE_CTX = 4096  # per server: the long scenarios fit, xl_context (~10k) is skipped


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


def demo_env(environ: os._Environ | dict[str, str], port: int | None) -> dict[str, str]:
    """The children's environment: mail to files unless set, and the site URL of the port the
    web server really listens on (every alert link, email and report pointed at port 8000
    while the demo ran on another), unless ``TIERWATCH_SITE_URL`` is set already."""
    env = {
        **environ,
        "EMAIL_BACKEND": environ.get(
            "EMAIL_BACKEND", "django.core.mail.backends.filebased.EmailBackend"
        ),
    }
    if port is not None and not environ.get("TIERWATCH_SITE_URL"):
        env["TIERWATCH_SITE_URL"] = f"http://127.0.0.1:{port}"
    return env


def banner(label: str, port: int, every: int, log_path: Path) -> str:
    """The last lines on the console: where to go, how to log in, where the rest went."""
    return (
        f"\n  tierwatch demo ({label}) is running:\n"
        f"    open  http://127.0.0.1:{port}/\n"
        f"    login {DEMO_USER} / {DEMO_PASSWORD}\n"
        f"  probes every {every} s; Ctrl-C stops everything.\n"
        f"  web, worker and vendor logs: {log_path}\n"
    )


def tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


class Command(BaseCommand):
    help = "Start the demo: simulated vendor, Celery worker with beat, and the web server."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--vendor-port", type=int, default=8811)
        parser.add_argument(
            "--every",
            type=int,
            default=None,
            help="seconds between probes (default 30; 300 with --engine)",
        )
        parser.add_argument("--no-web", action="store_true", help="vendor and worker only")
        parser.add_argument(
            "--engine",
            choices=["llama.cpp"],
            default=None,
            help="real llama.cpp servers on this machine instead of the "
            "simulated vendor (first run builds: ~6-18 min, once)",
        )
        parser.add_argument(
            "--targets",
            nargs="+",
            choices=list(vendor.TARGETS),
            help=f"local vendor targets (with --engine; default: {' '.join(ENGINE_TARGETS)})",
        )
        parser.add_argument(
            "--suite",
            choices=["smoke", "scenarios"],
            help="suite of the probes (with --engine; default: smoke)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        procs: list[subprocess.Popen] = []
        owned: list[str] = []  # local vendor targets this command started (stopped on exit)
        engine = opts["engine"]
        if not engine and (opts["targets"] or opts["suite"]):
            raise CommandError("--targets and --suite go with --engine llama.cpp")
        every = opts["every"] or (ENGINE_EVERY_S if engine else 30)
        targets, suite = opts["targets"] or ENGINE_TARGETS, opts["suite"] or "smoke"
        if engine and not any(p.base in targets and p.fast in targets for p in vendor.PAIRS):
            raise CommandError(
                f"--targets {' '.join(targets)} make no pair: include "
                "smollm2-f16 (the base tier) and at least one other target"
            )
        # SIGTERM (e.g. from `timeout` or a process manager) must stop the children too.
        signal.signal(signal.SIGTERM, _interrupt)
        port = None if opts["no_web"] else free_port(opts["port"])
        env = demo_env(os.environ, port)

        log_path = settings.VAR_DIR / "demo.log"
        log = open(log_path, "w")  # noqa: SIM115 (closed in the finally below)

        def start(cmd: list[str]) -> subprocess.Popen:
            """The children's output (access lines, axes, the worker) goes to ``log_path``, so
            the console keeps the banner last and readable."""
            proc = subprocess.Popen(
                cmd, env=env, start_new_session=True, stdout=log, stderr=subprocess.STDOUT
            )
            procs.append(proc)
            return proc

        try:
            call_command("migrate", interactive=False, verbosity=0)
            if engine:
                pairs = self._engine_up(targets, suite, every, owned)
                label = f"REAL llama.cpp servers: {', '.join(targets)}"
            else:
                vendor_port = free_port(opts["vendor_port"])
                start([sys.executable, "-m", "evals.vendors.simulated", "--port", str(vendor_port)])
                vendor_url = f"http://127.0.0.1:{vendor_port}/v1"
                wait_http(f"http://127.0.0.1:{vendor_port}/health", "the demo vendor")
                pairs = ensure_demo(vendor_url=vendor_url, probe_every_s=every)
                label = "SIMULATED vendor"
            for pair in pairs:  # data flows at once, not only after the first beat tick
                enqueue_run(pair=pair)
            for pair in pairs:  # then a small audit (5 samples per prompt per tier) so a
                # verdict shows in ~2 min (simulated; real engines take minutes per pair)
                enqueue_run(pair=pair, kind=RunKind.AUDIT, repeat=5)
            start(
                worker_argv(
                    concurrency=1 if engine else 4,
                    schedule_file=str(settings.VAR_DIR / "celerybeat-schedule"),
                )
            )
            if port is not None:
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
                self.stdout.write(banner(label, port, every, log_path))
            else:
                self.stdout.write(f"demo worker and vendor running; logs in {log_path}")
            while all(p.poll() is None for p in procs):
                time.sleep(1)
            dead = [p.args for p in procs if p.poll() is not None]
            log.flush()
            raise CommandError(
                f"a demo process exited: {dead}\nthe end of {log_path}:\n{tail(log_path)}"
            )
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
            log.close()
            if owned:  # after the worker: nothing probes the servers any more
                stopped = vendor.down(owned)
                deactivate(targets=owned)
                self.stdout.write(f"stopped llama-server: {', '.join(stopped) or 'none'}")

    def _engine_up(
        self, targets: list[str], suite: str, every: int, owned: list[str]
    ) -> list[Pair]:
        """Start the local vendor's ``targets`` (building first if needed) and register them.

        ``owned`` gets the targets not already running *before* they start, so the caller's
        ``finally`` stops them even when a later one fails to start.
        """
        running = {n for n, st in vendor.status().items() if st.state == "running"}
        owned += [n for n in targets if n not in running]
        if build.cached_binaries() is None or any(
            models.prepared_model(vendor.TARGETS[n].model) is None for n in targets
        ):
            self.stdout.write(
                self.style.WARNING(
                    "First run: building llama.cpp's llama-server (~6-18 minutes on 2 cores) and "
                    f"downloading the models (~330 MB) into {cache_dir()} ($TIERWATCH_CACHE); "
                    "cached afterwards, later starts take seconds."
                )
            )
        try:
            urls = vendor.up(targets, ctx=ENGINE_CTX, log=self.stdout.write)
        except EngineError as exc:
            raise CommandError(str(exc)) from exc
        return ensure_local_demo(
            urls=urls,
            ctx=ENGINE_CTX,
            suite_name=suite,
            probe_every_s=every,
            audit_every_s=ENGINE_AUDIT_EVERY_S,
        )
