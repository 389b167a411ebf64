"""Plain helpers the test folders share (no fixtures: those live in the conftests): the repo
root, starting a process and waiting for its health URL, the SMTP inbox and Slack-like receiver
behind the ``smtp``/``slack`` fixtures, the worker's database URL, starting, waiting for and
stopping Celery workers, the canary API key, the API's Bearer client (``Api``) and the xdist
group ids (``group_ids``)."""

from __future__ import annotations

import ast
import base64
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
import unicodedata
import urllib.parse
from collections.abc import Callable
from datetime import UTC, datetime
from email import message_from_bytes
from email.policy import default as default_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from json import dumps
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.test import Client

from evals.pysource import parse_module
from evals.vendors.llamacpp import build
from monitor.celery import worker_argv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CANARY = "sk-canary-Zq8xW2vLm5Rt9Yp3Kd7N"
WEEK = "2026-W48"  # Monday 2026-11-23 to Sunday 2026-11-29
IN_WEEK = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def start_process(
    args: list[str], health_url: str, env: dict | None = None, timeout_s: float = 30
) -> subprocess.Popen:
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=1) as client:  # one client: each new one loads the CA file
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                out = proc.stdout.read() if proc.stdout else ""
                raise RuntimeError(f"{args} exited early:\n{out}")
            try:
                if client.get(health_url).status_code == 200:
                    return proc
            except httpx.HTTPError:
                time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{args} did not become healthy at {health_url}")


def group_ids(items: list[pytest.Item]) -> None:
    """Give each test of an ``xdist_group`` the ``@<group>`` suffix ``--dist loadgroup`` reads
    from its id to send the group to one worker. pytest-xdist writes that suffix to
    ``item._nodeid``, which pytest 9 no longer reads (the id lives in ``item._id``), so every
    group was silently split across workers: fault tests restarted servers beside each other
    and a group's module fixtures ran once per worker. Written once: a pytest-xdist that does
    it itself finds it there."""
    from _pytest.nodeid import NodeId

    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})  # fmt: skip
        suffix = "@" + "_".join(names)
        if names and not item.nodeid.endswith(suffix):
            item._id = NodeId.parse(item.nodeid + suffix)  # type: ignore[attr-defined]


FIRST = ("long", "browser")  # the markers of the tests handed out first


def long_first(items: list[pytest.Item]) -> None:
    """The slowest tests first, the order otherwise kept: xdist hands out tests in this order,
    and a long test started last keeps one worker busy after the others have finished. (Groups
    go first anyway: ``--dist loadgroup`` sorts its work units by size.)"""
    items.sort(key=lambda item: not any(item.get_closest_marker(m) for m in FIRST))


def real_services() -> bool:
    return bool(os.environ.get("DATABASE_URL")) and bool(os.environ.get("REDIS_URL"))


def worker_database_url() -> str:
    """The test database as a URL a separate worker process can open."""
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    return (
        f"postgres://{user}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    )


def wait_for(
    condition: Callable[[], object], seconds: float, what: str, proc: subprocess.Popen | None = None
) -> object:
    """Poll until ``condition`` is truthy; fail naming ``what``, with the log of ``proc``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value := condition():
            return value
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.2)
    log = getattr(proc, "log_path", None)
    tail = open(log).read()[-6000:] if log else ""
    raise AssertionError(f"not within {seconds} s: {what}\n{tail}")


def worker_env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": worker_database_url(),
        "DJANGO_SETTINGS_MODULE": "monitor.settings",
        **extra,
    }


def start_worker(
    env: dict[str, str], folder, name: str, queues: tuple[str, ...] | None = None
) -> subprocess.Popen:
    """A worker with embedded beat (or, given ``queues``, serving only those), its log in a
    file (a pipe nobody drains would block it)."""
    log_path = folder / f"{name}.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            worker_argv(
                concurrency=2,
                schedule_file=str(folder / f"{name}-beat"),
                loglevel="INFO",
                queues=queues,
            ),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proc.log_path = log_path  # type: ignore[attr-defined]
    return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=20)


def purge(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "celery", "-A", "monitor", "purge", "-f"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )


def canary_forms(key: str) -> list[str]:
    """The key as a server may echo it (``evals.client.key_scrubber`` lists them)."""
    return [
        key,
        key.lower(),
        key.upper(),
        urllib.parse.quote(f"Bearer {key}"),
        base64.b64encode(key.encode()).decode().rstrip("="),
        key[:8] + "...",
        key[-6:],
    ]


def key_decoded_hits(text: str, key: str = CANARY, piece: int = 8) -> list[str]:
    """Where ``text`` holds ``piece`` consecutive characters of ``key`` once decoded the ways a
    server may encode it: as is, folded (NFKC, format characters dropped, dashes made ``-``),
    reversed, and every run of base64 (at each of its 4 offsets, both alphabets) or hex
    (at each of its 2 offsets) decoded. Written apart from ``evals.scrub`` on purpose: it
    decodes what it finds rather than matching the forms the scrubber knows."""
    low = key.lower()
    pieces = {t[i : i + piece] for t in (low, low[::-1]) for i in range(len(t) - piece + 1)}

    def fold(s: str) -> str:
        s = unicodedata.normalize("NFKC", s)
        s = "".join(
            "-" if unicodedata.category(c) == "Pd" else c
            for c in s
            if unicodedata.category(c) != "Cf" and c != "\u00ad"
        )
        return s.lower()

    found = []
    candidates = {"text": text, "folded": fold(text)}
    for i, run in enumerate(re.findall(r"[A-Za-z0-9+/_-]{12,}", text)):
        for off in range(4):
            body = run[off:]
            body = body[: len(body) - len(body) % 4]
            for alt in (None, b"-_"):
                try:
                    raw = base64.b64decode(body, altchars=alt, validate=True)
                except ValueError:
                    continue
                candidates[f"base64 run {i} at {off}"] = raw.decode("latin-1")
    for i, run in enumerate(re.findall(r"[0-9A-Fa-f]{16,}", text)):
        for off in range(2):
            body = run[off:]
            body = body[: len(body) - len(body) % 2]
            candidates[f"hex run {i} at {off}"] = bytes.fromhex(body).decode("latin-1")
    for where, decoded in candidates.items():
        d = decoded.lower()
        if any(p in d for p in pieces):
            found.append(where)
    return found


class Api:
    """Django's test client under ``/api`` with a Bearer token, called as httpx is (``params=``,
    ``json=``, ``content=``): the API's JSON and permissions read inside the test's transaction,
    with no live server, no flush and no role resync per test."""

    def __init__(self, token: str) -> None:
        self.client = Client(headers={"Authorization": f"Bearer {token}"})

    def get(self, path: str, params: dict | None = None):
        return self.client.get(f"/api{path}", params or {})

    def post(self, path: str, json: object = None, content: str | None = None):
        body = content if content is not None else dumps(json if json is not None else {})
        return self.client.post(f"/api{path}", body, content_type="application/json")

    def request(self, method: str, path: str, json: object = None):
        return self.post(path, json) if method == "POST" else self.get(path)


WEBHOOK_ENV = "TIERWATCH_TEST_SLACK_WEBHOOK"


class Inbox:
    """aiosmtpd handler that keeps every message and can refuse some recipients."""

    def __init__(self) -> None:
        self.messages: list = []
        self.refuse: set[str] = set()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in self.refuse:
            return "550 5.1.1 no such user"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        parsed = message_from_bytes(envelope.content, policy=default_policy)
        self.messages.append((envelope.rcpt_tos, parsed))
        return "250 OK"


class Receiver:
    """A Slack-like webhook: answers the scripted statuses in order (then 200), keeps JSON."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.posted: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posted.append(json.loads(body))
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                reply = b"ok" if status == 200 else b"no_service"
                self.send_response(status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/services/T0/B0/secret-token"


BUILD_ON_DEMAND = os.environ.get("TIERWATCH_ENGINE_TESTS") == "1"
skip_without_build = pytest.mark.skipif(
    build.cached_binaries() is None and not BUILD_ON_DEMAND,
    reason="llama-server is not built in the cache ($TIERWATCH_CACHE or ~/.cache/tierwatch); "
    "build it once with `python -m evals.vendors.llamacpp.vendor up` (6-18 min on 2 cores) or set "
    "TIERWATCH_ENGINE_TESTS=1 to build it during the tests",
)


def engine(fn: Callable[..., None]) -> Callable[..., None]:
    """Needs the real engine: marked, skipped without the build, time for a first build."""
    return pytest.mark.engine(pytest.mark.timeout(1800)(skip_without_build(fn)))


def parse_source(path: Path) -> ast.Module:
    """``ast.parse`` of a file, robust to CPython 3.11.7's "AST constructor recursion depth
    mismatch" (python/cpython gh-106905): in a long-lived xdist worker, where other tests have
    changed the recursion limit or run deep stacks, the in-process parse can raise SystemError on
    a valid file. Then the file is parsed by a fresh interpreter and its tree sent back pickled."""
    source = path.read_text()
    try:
        return parse_module(source)
    except SystemError:
        code = (
            "import ast, pickle, sys; "
            "sys.stdout.buffer.write(pickle.dumps(ast.parse(sys.stdin.read())))"
        )
        out = subprocess.run([sys.executable, "-c", code], input=source.encode(),
                             capture_output=True, check=True)  # fmt: skip
        return pickle.loads(out.stdout)
