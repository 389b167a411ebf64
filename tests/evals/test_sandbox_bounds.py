"""The sandbox bounded per evaluation, not only per process: a fork bomb, eight children of
200 MB each and a /dev/shm filler are each stopped and recorded as a failed evaluation with
its class, the worker goes on, and the memory the evaluation's processes hold stays under the
total cap (unbounded, the eight children held 1.6 GB). As root (the code runs as a uid of
its own) and as an unprivileged worker uid (a real worker process started with ``setpriv``). In
``unsafe-subprocess``, a self-healing process chain that leaves its session is killed with
the evaluation. Memory is sampled by the test's own walk of ``/proc``, not the watch's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evals.sandbox import EVALUATION_UIDS, TOTAL_MEMORY_MB, isolation, run_unit_tests
from tests.evals.sandbox_bounds_worker import CHAIN_MARKER, GOOD, PROGRAMS, TIMEOUT_S

# the sandbox's uid shares one RLIMIT_NPROC: with the other sandbox tests, one at a time
# (tests/evals/test_sandbox.py says why)
pytestmark = pytest.mark.xdist_group("serial")

ROOT = Path(__file__).resolve().parent.parent.parent
WORKER = Path(__file__).with_name("sandbox_bounds_worker.py")
UNPRIVILEGED = 64022  # a uid with no name and no files: nothing it may do but what any user may
EXPECTED = {  # the class each program's evaluation ends with
    "fork bomb": {"timeout", "processes"},  # RLIMIT_NPROC holds it, or the watch's count
    "8 children of 200 MB": {"memory"},
    "/dev/shm filler": {"write_limit"},
}
# the cap plus what the test's RSS view adds (a page shared after fork counted in each
# process) and what a 50 ms step of the watch lets 8 children allocate under load (peaks of
# 668-711 MB measured at load ~19: docs/benchmarks.md); unbounded, the 8 children hold 1,766 MB
BOUND_MB = TOTAL_MEMORY_MB + 500

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or isolation() != "bwrap",
    reason="bwrap not installed or not working here (apt-get install bubblewrap)",
)


class Sampler(threading.Thread):
    """The peak resident memory of ``root``'s descendants, and of the host's shared memory
    (tmpfs, /dev/shm) above its level at the start, every 20 ms."""

    def __init__(self, root: int, include_root: bool = False) -> None:
        super().__init__(daemon=True)
        self.root, self.include_root = root, include_root
        self.peak_mb = self.peak_shmem_mb = 0.0
        self.shmem0 = _shmem_mb()
        self.done = threading.Event()

    def run(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while not self.done.is_set():
            parent, rss = {}, {}
            for entry in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except (OSError, IndexError):
                    continue
                parent[int(entry)], rss[int(entry)] = int(fields[1]), int(fields[21]) * page
            tree, todo = set(), [self.root]
            while todo:
                pid = todo.pop()
                kids = [p for p, pp in parent.items() if pp == pid and p not in tree]
                tree.update(kids)
                todo.extend(kids)
            if self.include_root:
                tree.add(self.root)
            self.peak_mb = max(self.peak_mb, sum(rss.get(p, 0) for p in tree) / 2**20)
            self.peak_shmem_mb = max(self.peak_shmem_mb, _shmem_mb() - self.shmem0)
            self.done.wait(0.02)


def _shmem_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1]) / 1024
    return 0.0


def settled(wait_s: float = 60.0) -> None:
    """Wait until no process of an evaluation's uid (``EVALUATION_UIDS``) is left from an
    earlier test: a fork bomb's last copies die after its evaluation returns, and while they
    go on forking they take the cores the next program is measured on."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        owners = set()
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                owners.add(int(status.read_text().split("\nUid:\t", 1)[1].split("\t", 1)[0]))
            except (OSError, IndexError, ValueError):
                continue
        if not owners & set(EVALUATION_UIDS):
            return
        time.sleep(0.1)


@needs_bwrap
@pytest.mark.xdist_group("serial")  # the fork bomb takes every core it can
@pytest.mark.parametrize("program", list(EXPECTED))
def test_each_program_is_stopped_with_its_class_as_root(program):
    if os.geteuid() != 0:
        pytest.skip("this case runs the worker as root; the unprivileged case is the next test")
    settled()
    sampler = Sampler(os.getpid())
    sampler.start()
    tests, limit = "assert True\n", TIMEOUT_S[program]
    procs = 32
    result = run_unit_tests(
        PROGRAMS[program], tests, timeout_s=limit, mode="bwrap", max_procs=procs
    )
    sampler.done.set()
    sampler.join()
    assert not result.passed and result.error_class in EXPECTED[program], result
    assert sampler.peak_mb < BOUND_MB, f"{program}: {sampler.peak_mb:.0f} MB"
    assert sampler.peak_shmem_mb < 100, f"{program}: /dev/shm grew {sampler.peak_shmem_mb} MB"
    after = run_unit_tests(GOOD, "assert inc(1) == 2\n", mode="bwrap")
    assert after.passed, after.output  # the worker goes on


def _unprivileged_python() -> str:
    """A python the unprivileged uid can run (ours may live under /root), or a skip."""
    if os.geteuid() != 0:
        pytest.skip("starting a worker as another uid needs root (setpriv)")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) not installed")
    for python in ("/usr/bin/python3", "/usr/local/bin/python3"):
        probe = subprocess.run(
            ["setpriv", f"--reuid={UNPRIVILEGED}", f"--regid={UNPRIVILEGED}", "--clear-groups"]
            + [python, "-c", "import sys; print(sys.version_info >= (3, 11))"],
            capture_output=True,
            text=True,
            cwd="/",
        )
        if probe.stdout.strip() == "True":
            return python
    pytest.skip("no python >= 3.11 that an unprivileged uid can run")


@pytest.fixture
def readable_tree() -> Iterator[Path]:
    """``evals`` and the worker script copied where the unprivileged uid can read them: a
    checkout may sit under a directory only its owner can enter (``mktemp -d`` makes 0700)."""
    top = Path(tempfile.mkdtemp(prefix="tierwatch-bounds-"))
    try:
        shutil.copytree(ROOT / "evals", top / "evals", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(WORKER, top / WORKER.name)
        for path in (top, *top.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


@needs_bwrap
@pytest.mark.xdist_group("serial")
def test_each_program_is_stopped_with_its_class_as_an_unprivileged_worker(readable_tree):
    python = _unprivileged_python()
    args = ["setpriv", f"--reuid={UNPRIVILEGED}", f"--regid={UNPRIVILEGED}", "--clear-groups"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(readable_tree), "LANG": "C.UTF-8"}
    worker = subprocess.Popen(
        [*args, python, str(readable_tree / WORKER.name), "bwrap", *EXPECTED],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd="/",
    )
    sampler = Sampler(worker.pid)
    sampler.start()
    out, _ = worker.communicate(timeout=120)
    sampler.done.set()
    sampler.join()
    results = {r["program"]: r for r in map(json.loads, out.splitlines())}
    if results.get("plain", {}).get("error") == "sandbox":  # no user namespaces for this uid
        pytest.skip(f"bwrap cannot run as an unprivileged uid here: {results}")
    assert worker.returncode == 0  # the worker stays alive through all three
    for program, classes in EXPECTED.items():
        result = results[program]
        assert not result["passed"] and result["error"] in classes, result
    assert results["plain"]["passed"], results["plain"]
    assert sampler.peak_mb < BOUND_MB, f"{sampler.peak_mb:.0f} MB"
    assert sampler.peak_shmem_mb < 100, f"/dev/shm grew {sampler.peak_shmem_mb:.0f} MB"


def test_unsafe_mode_stops_many_children_by_their_total():
    sampler = Sampler(os.getpid())
    sampler.start()
    program = "8 children of 200 MB"
    result = run_unit_tests(
        PROGRAMS[program], "assert True\n", timeout_s=TIMEOUT_S[program], mode="unsafe-subprocess"
    )
    sampler.done.set()
    sampler.join()
    assert (result.passed, result.error_class) == (False, "memory"), result
    assert "over its 512 MB total" in result.output
    assert sampler.peak_mb < BOUND_MB, f"{sampler.peak_mb:.0f} MB"


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def test_unsafe_mode_as_an_unprivileged_worker_kills_a_chain_that_killed_its_judge(
    readable_tree,
):
    """As the worker's own uid the code can kill the judge (its parent) so that its processes,
    each in a session of its own and respawning its child, are re-parented to PID 1."""
    python = _unprivileged_python()
    args = ["setpriv", f"--reuid={UNPRIVILEGED}", f"--regid={UNPRIVILEGED}", "--clear-groups"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(readable_tree), "LANG": "C.UTF-8"}
    run = subprocess.run(
        [
            *args,
            python,
            str(readable_tree / WORKER.name),
            "unsafe-subprocess",
            "self-healing chain",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=120,
    )
    time.sleep(1.0)  # a link that escaped would be alive and respawning now
    left = _processes_with(CHAIN_MARKER)
    for _ in range(20):  # leave the machine clean whatever the outcome
        for pid in _processes_with(CHAIN_MARKER):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    results = {r["program"]: r for r in map(json.loads, run.stdout.splitlines())}
    assert run.returncode == 0, run.stderr
    assert not results["self-healing chain"]["passed"], results
    assert left == [], f"{len(left)} processes of the chain outlived the evaluation"
