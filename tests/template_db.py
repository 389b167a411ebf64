"""One migrated PostgreSQL database per test run, copied for each xdist worker.

pytest-django gives each worker a test database of its own (``test_…_gw0``) and would migrate
each from empty: 74 migrations, several seconds of CPU per worker on a 2-core machine, the
same work once per worker. Here the first worker to take a file lock migrates a template
(``test_…_template``) once per run; every worker then copies it with PostgreSQL's ``CREATE
DATABASE … TEMPLATE`` (a file copy) and pytest-django keeps that copy (``keepdb``), so its
``migrate`` finds nothing left to apply. Each worker drops its copy at the end; the xdist
controller drops the template and the run's lock directory, which it made before the workers
started and named to them in ``TIERWATCH_TEST_TEMPLATE_DIR``.

Only under xdist, on PostgreSQL, and when ``--reuse-db`` is not given; otherwise pytest-django
does what it always does.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SUFFIX = "_template"
SHARED = "TIERWATCH_TEST_TEMPLATE_DIR"  # the run's lock directory, made by the controller


def _postgresql(config: pytest.Config) -> bool:
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"]
    return "postgresql" in engine and not config.getvalue("reuse_db")


def _controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput") and bool(config.getoption("numprocesses", None))


def applies(config: pytest.Config) -> bool:
    """Whether this process is an xdist worker that copies the run's template."""
    return hasattr(config, "workerinput") and SHARED in os.environ and _postgresql(config)


def pytest_configure(config: pytest.Config) -> None:
    if _controller(config) and _postgresql(config):
        os.environ[SHARED] = tempfile.mkdtemp(prefix="tierwatch-db-")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _controller(config) and SHARED in os.environ:
        drop_template(config)
        shutil.rmtree(os.environ.pop(SHARED), ignore_errors=True)


def template_name(worker_test_name: str, worker: str) -> str:
    """``test_test_gw0`` (pytest-django's per-worker name) → ``test_test_template``."""
    return worker_test_name.removesuffix(f"_{worker}") + SUFFIX


def _copy(cursor, target: str, template: str) -> None:
    from django.db import connection

    name = connection.ops.quote_name
    cursor.execute(f"DROP DATABASE IF EXISTS {name(target)} WITH (FORCE)")
    cursor.execute(f"CREATE DATABASE {name(target)} TEMPLATE {name(template)}")


def _migrate(template: str) -> None:
    """The template migrated as a test database, by Django's own test-database creation; the
    connection's settings are put back to this worker's afterwards."""
    from django.conf import settings
    from django.db import connection

    own = dict(connection.settings_dict), dict(connection.settings_dict["TEST"])
    connection.settings_dict["TEST"]["NAME"] = template
    try:
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    finally:
        connection.close()
        connection.settings_dict.update(own[0])
        connection.settings_dict["TEST"] = own[1]
        settings.DATABASES[connection.alias]["NAME"] = own[0]["NAME"]


def clone_for_worker(config: pytest.Config) -> str:
    """This worker's test database, copied from the run's template (migrated here first if no
    worker has yet). Returns the copy's name."""
    from django.db import connection

    worker = config.workerinput["workerid"]  # type: ignore[attr-defined]
    mine = connection.settings_dict["TEST"]["NAME"]
    template = template_name(mine, worker)
    shared = Path(os.environ[SHARED])
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one migrates; the others wait for its template
        if not (shared / template).exists():
            _migrate(template)
            (shared / template).touch()
    with connection._nodb_cursor() as cursor:
        _copy(cursor, mine, template)
    return mine


def drop(name: str) -> None:
    from django.db import connection

    connection.close()
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(name)} WITH (FORCE)")


@pytest.fixture(scope="session")
def cloned_database(
    request, django_db_modify_db_settings_parallel_suffix, django_db_blocker
) -> Iterator[bool]:
    """Whether this worker's test database is a copy of the run's template (then kept by
    pytest-django and dropped here, after its teardown)."""
    if not applies(request.config):
        yield False
        return
    with django_db_blocker.unblock():
        mine = clone_for_worker(request.config)
    yield True
    with django_db_blocker.unblock():
        drop(mine)


def drop_template(config: pytest.Config) -> None:
    """In the xdist controller at the end of the run: the workers' template goes (by psycopg:
    pytest-django blocks the controller's Django connections)."""
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    name = (db.get("TEST", {}).get("NAME") or "test_" + db["NAME"]) + SUFFIX
    params = {"host": db.get("HOST") or None, "port": db.get("PORT") or None}
    params |= {"user": db.get("USER") or None, "password": db.get("PASSWORD") or None}
    with psycopg.connect(dbname="postgres", autocommit=True, **params) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
