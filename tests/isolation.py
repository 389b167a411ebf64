"""Per-worker isolation under pytest-xdist, loaded with ``-p tests.isolation`` (pyproject's
addopts) so it runs before pytest-django reads the settings, which a conftest would be too late
for.

Each xdist worker is a test session of its own beside the others: pytest-django gives it its
own test database (``_gw0``, ``_gw1``…), and this module gives it the rest a session shares with
the processes it starts. In SQLite mode that is a var dir of its own (the test database file,
kombu's filesystem broker, the file cache, beat schedules); with ``REDIS_URL`` it is one Redis
database per worker (broker, cache and rate-limit leases), numbered from the URL's own: base +
worker number. Both are written into ``os.environ``, so the Celery workers and ``manage.py``
processes a test starts copy them with the rest of the environment; without xdist nothing
changes.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
REDIS_DATABASES = 16  # redis.conf's default `databases`
DONE = "TIERWATCH_TEST_ISOLATED"  # set once applied: a second pass would shift again


def worker_number(worker: str) -> int:
    """``gw3`` → 3 (pytest-xdist's worker ids)."""
    if not worker.startswith("gw") or not worker[2:].isdigit():
        raise ValueError(f"PYTEST_XDIST_WORKER={worker!r}: expected gw<N> (pytest-xdist's ids)")
    return int(worker[2:])


def redis_for_worker(url: str, number: int) -> str:
    """``url`` with its database index moved up by ``number`` (db 0 when the URL has none)."""
    parts = urlsplit(url)
    path = parts.path.strip("/")
    if path and not path.isdigit():
        raise ValueError(f"REDIS_URL={url!r}: its path must be a database number, e.g. /1")
    db = int(path or 0) + number
    if db >= REDIS_DATABASES:
        raise ValueError(
            f"REDIS_URL={url!r} with xdist worker {number}: database {db} is past Redis's "
            f"{REDIS_DATABASES} (0-{REDIS_DATABASES - 1}); use fewer workers (-n) or a lower base"
        )
    return urlunsplit(parts._replace(path=f"/{db}"))


def isolate(environ: os._Environ | dict) -> None:
    """Point this worker's var dir and Redis database at its own, in ``environ``."""
    worker = environ.get("PYTEST_XDIST_WORKER")
    if not worker or environ.get(DONE) == worker:
        return
    number = worker_number(worker)
    base = Path(environ.get("TIERWATCH_VAR_DIR") or ROOT / "var")
    environ["TIERWATCH_VAR_DIR"] = str(base / "xdist" / worker)
    if environ.get("REDIS_URL"):
        environ["REDIS_URL"] = redis_for_worker(environ["REDIS_URL"], number)
    environ[DONE] = worker


isolate(os.environ)
