"""A deployment of the product on a scratch PostgreSQL database, for the backup/restore and
upgrade tests: the database (created and dropped here), ``manage.py`` against it, the web
server as production runs it (gunicorn), a signed-in client of its pages, and a digest of
every table. The documented commands are read from docs/operations.md, so what the test
runs is what the page says.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest
from django.conf import settings

from tests.factories import free_port
from tests.support import ROOT, wait_for

OPERATIONS = Path(ROOT) / "docs" / "operations.md"
USER, PASSWORD = "ops", "pw-ops-restore-1"
# what changes between two views of the same data: CSRF tokens and relative times
VOLATILE = [
    (re.compile(r'(csrfmiddlewaretoken" value=|"X-CSRFToken": )"[^"]+"'), r'\1"…"'),
    (re.compile(r"\b\d+ (?:second|minute|hour|day)s? ago\b|\bjust now\b"), "(a while ago)"),
]


def documented(heading: str) -> str:
    """The first ``sh`` block under ``heading`` in docs/operations.md."""
    text = OPERATIONS.read_text()
    section = text.split(f"\n{heading}\n", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def run_documented(heading: str, env: dict[str, str], extra: str = "") -> None:
    """Run the block (``extra`` appended to its last line) in bash with ``env``, from the
    project's folder, with this interpreter's ``python`` first on the PATH."""
    block = documented(heading).rstrip() + extra
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=ROOT,
        env={**os.environ, "PATH": path, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"{heading}: {block}\n{result.stderr[-3000:]}"


def _server() -> dict[str, str]:
    db = settings.DATABASES["default"]
    if "postgresql" not in db["ENGINE"]:
        pytest.skip("needs PostgreSQL (DATABASE_URL): pg_dump and pg_restore")
    return {
        "user": db.get("USER") or "postgres",
        "password": db.get("PASSWORD") or "",
        "host": db.get("HOST") or "127.0.0.1",
        "port": str(db.get("PORT") or 5432),
    }


def url(name: str) -> str:
    s = _server()
    auth = f"{s['user']}:{s['password']}" if s["password"] else s["user"]
    return f"postgres://{auth}@{s['host']}:{s['port']}/{name}"


def dsn(database_url: str) -> str:
    return database_url.replace("postgres://", "postgresql://", 1)


@contextmanager
def scratch_database(purpose: str) -> Iterator[str]:
    """An empty database named after DATABASE_URL's, the purpose and the xdist worker (so
    parallel workers and sessions never share one), dropped afterwards; yields its URL."""
    base = urlsplit(os.environ.get("DATABASE_URL", "")).path.strip("/") or "tierwatch"
    name = f"{base}_{purpose}_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"
    admin = dsn(url("postgres"))
    with psycopg.connect(admin, autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        db.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    try:
        yield url(name)
    finally:
        with psycopg.connect(admin, autocommit=True) as db:
            db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def env(database_url: str, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "monitor.settings",
        **extra,
    }


def manage(database_url: str, *args: str, **extra: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env(database_url, **extra),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, f"manage.py {' '.join(args)}:\n{result.stderr[-3000:]}"
    return result.stdout


def create_user(database_url: str) -> None:
    manage(database_url, "createsuperuser", "--noinput", "--username", USER,
           "--email", "ops@example.com", DJANGO_SUPERUSER_PASSWORD=PASSWORD)  # fmt: skip


@contextmanager
def web(database_url: str, folder: Path) -> Iterator[httpx.Client]:
    """gunicorn (the compose file's web command) on a free port against the database, and a
    client signed in as ``USER``."""
    port = free_port()
    log = open(folder / f"web-{port}.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "monitor.wsgi", "-b", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env(database_url),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
    try:

        def up() -> bool:
            try:
                return client.get("/accounts/login/").status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 60, f"gunicorn on {port}", proc)
        login = client.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)
        assert token, login.text[:500]
        signed = client.post(
            "/accounts/login/",
            data={"username": USER, "password": PASSWORD, "csrfmiddlewaretoken": token[1]},
        )
        assert signed.status_code == 302, signed.text[:500]
        yield client
    finally:
        client.close()
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def page(client: httpx.Client, path: str) -> str:
    """A page as two views of the same data show it alike (``VOLATILE`` replaced)."""
    response = client.get(path)
    assert response.status_code == 200, (path, response.status_code, response.text[:500])
    text = response.text
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


def pair_row(overview: str, pair: str) -> str:
    """The overview's table row of one pair."""
    rows = re.findall(r"<tr\b.*?</tr>", overview, flags=re.S)
    mine = [r for r in rows if f'href="/pairs/{pair}/"' in r]
    assert len(mine) == 1, f"{len(mine)} overview rows link /pairs/{pair}/"
    return mine[0]


def tables(db: psycopg.Connection) -> list[str]:
    return [
        name
        for (name,) in db.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )
    ]


def digests(db: psycopg.Connection) -> dict[str, tuple[int, str]]:
    """Per table: its row count and an md5 of its rows (as text, sorted), in the connection's
    current snapshot."""
    out = {}
    for name in tables(db):
        rows = "coalesce(string_agg(t::text, chr(10) ORDER BY t::text), '')"
        count, digest = db.execute(f'SELECT count(*), md5({rows}) FROM "{name}" t').fetchone()
        out[name] = (count, digest)
    return out
