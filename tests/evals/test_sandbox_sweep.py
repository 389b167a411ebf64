"""Sandbox work dirs left by a worker killed during an evaluation: a real worker process is
killed with the generated code on disk; the sweep at worker start and from the watchdog
removes that dir and keeps the dirs of processes that still run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from evals import sandbox_sweep
from evals.sandbox_sweep import PREFIX, owner_prefix, stale_dirs, sweep
from evals.sandbox_watch import start_time

# the sandbox's uid shares one RLIMIT_NPROC: with the other sandbox tests, one at a time
# (tests/evals/test_sandbox.py says why)
pytestmark = pytest.mark.xdist_group("serial")

ROOT = Path(__file__).resolve().parent.parent.parent


def _dead_pid() -> tuple[int, int]:
    """A pid and start time of a process that has ended (and been reaped)."""
    proc = subprocess.Popen(["sleep", "5"])
    started = start_time(proc.pid)
    proc.kill()
    proc.wait()
    return proc.pid, started


def _dir(tmp: Path, name: str, age_s: float = 0) -> Path:
    path = tmp / name
    path.mkdir()
    (path / "solution.py").write_text("print('generated')\n")
    when = time.time() - age_s
    os.utime(path, (when, when))
    return path


def test_it_removes_dirs_of_dead_owners_and_keeps_live_and_fresh_ones(tmp_path):
    pid, started = _dead_pid()
    dead = _dir(tmp_path, f"{PREFIX}{pid}.{started}-abc")
    live = _dir(tmp_path, f"{owner_prefix()}def")
    reused = _dir(tmp_path, f"{PREFIX}{os.getpid()}.{start_time(os.getpid()) + 1}-ghi")
    old_unowned = _dir(tmp_path, f"{PREFIX}jkl", age_s=sandbox_sweep.UNOWNED_GRACE_S + 60)
    fresh_unowned = _dir(tmp_path, f"{PREFIX}mno", age_s=10)
    other = _dir(tmp_path, "someone-else", age_s=10**6)
    assert sorted(sweep(str(tmp_path))) == sorted([dead, reused, old_unowned])
    assert not dead.exists() and not reused.exists() and not old_unowned.exists()
    assert live.exists() and fresh_unowned.exists() and other.exists()


def _worker_killed_mid_evaluation(tmp: Path) -> Path:
    """A worker process evaluating code that sleeps, killed with SIGKILL: its work dir."""
    script = tmp / "worker.py"
    script.write_text(
        "from evals.sandbox import run_unit_tests\n"
        "code = 'import time\\ntime.sleep(60)\\n'\n"
        "run_unit_tests(code, 'assert True\\n', timeout_s=60, mode='unsafe-subprocess')\n"
    )
    work = tmp / "tmp"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(work)}
    worker = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, env=env)
    deadline = time.monotonic() + 120  # a poll, not a timing claim: start-up is slow under load
    while not list(work.glob(f"{PREFIX}*/solution.py")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the judge started
    worker.kill()
    worker.wait()
    (left,) = work.glob(f"{PREFIX}*")
    assert "time.sleep(60)" in (left / "solution.py").read_text()
    return left


@pytest.fixture
def reachable_tmp():
    """A temporary dir the sandbox's unprivileged child can reach: pytest's ``tmp_path`` lies
    under a 0700 dir of root's, where the child (nobody) gets "Permission denied"."""
    path = Path(tempfile.mkdtemp(prefix="tierwatch-sweep-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_worker_killed_mid_evaluation_leaves_a_dir_the_sweep_removes(reachable_tmp):
    left = _worker_killed_mid_evaluation(reachable_tmp)
    assert stale_dirs(str(left.parent)) == [left]
    assert sweep(str(left.parent)) == [left]
    assert not left.exists()


@pytest.mark.django_db
@pytest.mark.filterwarnings("ignore:DjangoFixup.on_worker_init called without a sender")
def test_the_watchdog_and_a_starting_worker_sweep(reachable_tmp, monkeypatch):
    from celery.signals import worker_init

    from monitor.runs.watchdog import run_watchdog

    left = _worker_killed_mid_evaluation(reachable_tmp)
    monkeypatch.setattr(tempfile, "tempdir", str(left.parent))
    run_watchdog()
    assert not left.exists()
    again = _dir(left.parent, left.name)
    worker_init.send(sender=None)  # what a starting worker sends (monitor.celery)
    assert not again.exists()
