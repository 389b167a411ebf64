"""The Celery application, configured from Django settings (``CELERY_*`` names)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")

app = Celery("tierwatch")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


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
