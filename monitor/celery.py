"""The Celery application, configured from Django settings (``CELERY_*`` names)."""

import ctypes
import os
import signal

from celery import Celery
from celery.signals import beat_embedded_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")

app = Celery("tierwatch")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

PR_SET_PDEATHSIG = 1  # linux/prctl.h


@beat_embedded_init.connect
def die_with_the_worker(sender: object = None, **kwargs: object) -> None:
    """An embedded beat (``worker --beat``) is a child process of its worker. A worker killed
    with SIGKILL cannot stop it, so it lived on under PID 1, and the restarted worker started a
    second beat: every schedule ran twice. Ask the kernel to send this process SIGTERM when its
    parent dies (Linux ``prctl``), and leave at once if the parent is already gone."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the pidfile of a standalone beat instead
        return
    if os.getppid() != parent or parent == 1:
        os._exit(0)


@worker_init.connect
def sweep_sandbox_dirs(sender: object = None, **kwargs: object) -> None:
    """A worker killed during an evaluation left the generated code in its sandbox work dir:
    remove the ones whose owner is gone (``evals.sandbox_sweep``), before taking any task."""
    from evals.sandbox_sweep import sweep

    sweep()


def worker_argv(
    *,
    concurrency: int,
    schedule_file: str,
    loglevel: str = "WARNING",
    queues: tuple[str, ...] | None = None,
) -> list[str]:
    """A worker with embedded beat, as the demo and the scheduling test start it. Threads, not
    processes: runs wait on the network, and one process keeps the SQLite demo simple. It
    serves every queue (monitor.runs.routing) and Celery's default one; given ``queues``, only
    those, without beat (a second worker beside one that has it)."""
    import sys

    from monitor.runs.routing import QUEUES

    beat = ["--beat", "--schedule", schedule_file] if queues is None else []
    return [
        sys.executable, "-m", "celery", "-A", "monitor", "worker", *beat, "--pool=threads",
        f"--concurrency={concurrency}", f"--loglevel={loglevel}",
        "-Q", ",".join(queues or ("celery", *QUEUES)),
    ]  # fmt: skip
