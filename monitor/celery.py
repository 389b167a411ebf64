"""The Celery application, configured from Django settings (``CELERY_*`` names)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")

app = Celery("tierwatch")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def worker_argv(*, concurrency: int, schedule_file: str, loglevel: str = "WARNING") -> list[str]:
    """A worker with embedded beat, as the demo and the scheduling test start it. Threads, not
    processes: runs wait on the network, and one process keeps the SQLite demo simple. It
    serves every queue (monitor.routing) and Celery's default one."""
    import sys

    from monitor.routing import QUEUES

    return [
        sys.executable, "-m", "celery", "-A", "monitor", "worker", "--beat", "--pool=threads",
        f"--concurrency={concurrency}", f"--loglevel={loglevel}", "--schedule", schedule_file,
        "-Q", ",".join(("celery", *QUEUES)),
    ]  # fmt: skip
