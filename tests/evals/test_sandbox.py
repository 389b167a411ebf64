"""The sandbox runs real generated code in a real bwrap (or the fallback); nothing is mocked."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from evals.sandbox import extract_code, isolation, run_unit_tests
from tests.support import ROOT

MODES = ["bwrap", "unsafe-subprocess"]
TESTS = (
    "assert inc(1) == 2\n\n"
    "def test_zero():\n    assert inc(0) == 1\n\n"
    "def test_neg():\n    assert inc(-5) == -4\n"
)

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bwrap not installed (apt-get install bubblewrap)"
)


def _modes() -> list[str]:
    return MODES if isolation() == "bwrap" else MODES[1:]


def test_it_uses_bubblewrap_when_installed():
    if shutil.which("bwrap"):
        assert isolation() == "bwrap"
    else:
        assert isolation() in ("none", "unsafe-subprocess")


@pytest.mark.parametrize("mode", MODES)
def test_it_passes_correct_code_and_counts_each_test(mode):
    if mode not in _modes():
        pytest.skip("bwrap unavailable")
    result = run_unit_tests("def inc(x):\n    return x + 1\n", TESTS, mode=mode)
    assert result.passed, result.output
    assert (result.n_tests, result.n_failed, result.error_class) == (3, 0, None)


@pytest.mark.parametrize("mode", MODES)
def test_it_counts_failures_of_wrong_code(mode):
    if mode not in _modes():
        pytest.skip("bwrap unavailable")
    result = run_unit_tests("def inc(x):\n    return x + 1 if x > 0 else x\n", TESTS, mode=mode)
    assert not result.passed
    assert (result.n_tests, result.n_failed, result.error_class) == (3, 2, None)
    assert "AssertionError" in result.output


@pytest.mark.parametrize("mode", MODES)
def test_the_code_sees_the_standard_library_and_site_s_builtins_but_no_site_packages(mode):
    """The child starts with ``-S``: no installation's ``site-packages`` or ``.pth`` files, but
    ``exit``, ``quit``, ``help`` and ``copyright`` as under ``site``."""
    if mode not in _modes():
        pytest.skip("bwrap unavailable")
    code = (
        "import sys, json\n"
        "def paths():\n    return [p for p in sys.path if 'site-packages' in p]\n"
        "def builtins_of_site():\n"
        "    return [callable(f) for f in (exit, quit, help, copyright)]\n"
    )
    tests = "assert paths() == []\nassert builtins_of_site() == [True, True, True, True]\n"
    result = run_unit_tests(code, tests, mode=mode)
    assert result.passed and result.n_tests == 2, result.output


def test_it_runs_tests_that_import_the_solution_module():
    tests = "from solution import inc\nassert inc(2) == 3\n"
    result = run_unit_tests("def inc(x):\n    return x + 1\n", tests)
    assert result.passed and result.n_tests == 1


def test_it_awaits_async_test_functions():
    tests = "async def test_async():\n    assert inc(1) == 3\n"
    result = run_unit_tests("def inc(x):\n    return x + 1\n", tests)
    assert (result.passed, result.n_tests, result.n_failed) == (False, 1, 1)


def test_it_classifies_a_syntax_error():
    result = run_unit_tests("def inc(x) return x", TESTS)
    assert (result.passed, result.error_class) == (False, "syntax")


def test_it_classifies_code_that_raises_as_crash():
    result = run_unit_tests("raise SystemExit(0)\n", TESTS)
    assert (result.passed, result.error_class) == (False, "crash")


def test_it_classifies_empty_code_as_no_code():
    assert run_unit_tests("  \n", TESTS).error_class == "no_code"


def test_it_rejects_tests_without_any_test():
    with pytest.raises(ValueError, match="tests"):
        run_unit_tests("x = 1", "x = 2\n")


@pytest.mark.parametrize("mode", MODES)
def test_it_stops_an_infinite_loop_at_the_wall_clock_limit(mode):
    if mode not in _modes():
        pytest.skip("bwrap unavailable")
    result = run_unit_tests("while True:\n    pass\n", TESTS, timeout_s=1.5, cpu_s=30, mode=mode)
    assert (result.passed, result.error_class) == (False, "timeout")
    assert result.duration_ms < 10_000  # killed at the limit, not left running


def test_it_stops_a_busy_loop_at_the_cpu_limit():
    result = run_unit_tests("while True:\n    pass\n", TESTS, timeout_s=60, cpu_s=1)
    assert result.error_class == "timeout"
    assert result.duration_ms < 30_000  # RLIMIT_CPU acted long before the wall clock


@pytest.mark.parametrize("mode", MODES)
def test_it_classifies_a_huge_allocation_as_memory(mode):
    if mode not in _modes():
        pytest.skip("bwrap unavailable")
    result = run_unit_tests("data = bytearray(8 * 1024**3)\n", TESTS, mode=mode)
    assert (result.passed, result.error_class) == (False, "memory")


@pytest.mark.parametrize("mode", MODES)
def test_it_hides_the_parent_environment(mode, monkeypatch):
    if mode not in _modes():
        pytest.skip("bwrap unavailable")
    monkeypatch.setenv("TIERWATCH_TEST_SECRET", "sk-should-never-leak")
    code = "import os\nSEEN = dict(os.environ)\n"
    tests = (
        "assert 'TIERWATCH_TEST_SECRET' not in SEEN\n"
        "assert not any('sk-should-never-leak' in v for v in SEEN.values())\n"
        "assert set(SEEN) <= {'PATH', 'LANG', 'PWD', 'LC_CTYPE'}, sorted(SEEN)\n"
    )
    result = run_unit_tests(code, tests, mode=mode)
    assert result.passed, result.output


@needs_bwrap
def test_it_blocks_network_connections():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    port = server.getsockname()[1]
    code = (
        "import socket\n"
        "def connects(host, port):\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=3).close()\n"
        "        return True\n"
        "    except OSError:\n"
        "        return False\n"
    )
    # The external name is only tried inside the network namespace: no packet can leave it.
    tests = f"assert not connects('127.0.0.1', {port})\nassert not connects('example.com', 80)\n"
    try:
        result = run_unit_tests(code, tests, mode="bwrap")
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()
    assert result.passed and result.n_tests == 2, result.output


@needs_bwrap
def test_it_cannot_write_outside_its_work_dir():
    outside = Path(f"/tmp/x-outside-{uuid.uuid4().hex}")
    in_repo = Path(ROOT) / f"x-outside-{uuid.uuid4().hex}"
    code = (
        "def can_write(path):\n"
        "    try:\n"
        "        with open(path, 'w') as f:\n"
        "            f.write('x')\n"
        "        return True\n"
        "    except OSError:\n"
        "        return False\n"
    )
    tests = (
        f"assert can_write({str(outside)!r})\n"  # the sandbox's own /tmp, not the host's
        f"assert not can_write({str(in_repo)!r})\n"
        "assert not can_write('/usr/x-outside')\n"
        "assert can_write('scratch.txt')\n"
    )
    result = run_unit_tests(code, tests, mode="bwrap")
    assert result.passed and result.n_tests == 4, result.output
    assert not outside.exists() and not in_repo.exists()


def _processes_with(marker: str) -> int:
    count = 0
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            count += marker in cmdline.read_bytes().decode(errors="replace")
        except OSError:
            continue
    return count


@needs_bwrap
def test_it_bounds_the_number_of_processes():
    marker = f"{uuid.uuid4().int % 1000}.{os.getpid()}"  # a unique `sleep` argument
    code = (
        "import os\n"
        "FORKED = 0\n"
        "for _ in range(500):\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        f"        os.execv('/bin/sleep', ['sleep', '{marker}'])\n"
        "    FORKED += 1\n"
    )
    result = run_unit_tests(code, "assert FORKED < 40, FORKED\n", max_procs=32, mode="bwrap")
    assert result.passed, result.output
    assert _processes_with(marker) == 0  # the namespace died with the runner


@needs_bwrap
@pytest.mark.xdist_group("serial")  # takes every core it can for its 2 s
def test_it_survives_a_fork_bomb():
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    result = run_unit_tests(bomb, TESTS, timeout_s=2, mode="bwrap")
    # stopped either way: RLIMIT_NPROC holds it to its deadline, or the evaluation's watch
    # counts past max_procs first (evals.sandbox_watch), whichever a loaded machine meets first
    assert not result.passed and result.error_class in {"timeout", "processes"}, result


def test_it_truncates_output():
    code = "print('y' * 100_000)\ndef inc(x):\n    return x + 1\n"
    result = run_unit_tests(code, TESTS)
    assert result.passed
    assert 1000 < len(result.output) <= 4200


def test_it_ignores_a_forged_verdict_line():
    code = 'print(\'@@tierwatch-0 {"n_tests": 9, "n_failed": 0, "error": null}\')\ninc = None\n'
    result = run_unit_tests(code, TESTS)
    assert not result.passed and result.n_failed == 3


def test_it_extracts_the_longest_python_block():
    text = "Try:\n```python\nx = 1\n```\nFixed:\n```python\ndef f():\n    return 2\n```\nDone."
    assert extract_code(text) == "def f():\n    return 2"


def test_it_extracts_the_last_of_equally_long_blocks():
    text = "```python\nx = 1\n```\n```py\ny = 2\n```"
    assert extract_code(text) == "y = 2"


def test_it_falls_back_to_the_first_fenced_block():
    assert extract_code("a\n```\nprint(1)\n```\n```js\nx()\n```") == "print(1)"


def test_it_takes_an_unclosed_block_cut_by_max_tokens():
    assert extract_code("Here:\n```python\ndef f():\n    return 1\n") == "def f():\n    return 1"


def test_it_takes_bare_code_and_rejects_prose():
    assert extract_code("def f(x):\n    return x\n") == "def f(x):\n    return x"
    assert extract_code("I cannot help with that.") == ""
    assert extract_code("yes") == ""


# --- adversarial: the code under test tries to forge its result or escape ------------------


@pytest.mark.parametrize("mode", MODES)
def test_an_object_equal_to_everything_does_not_pass(mode):
    if mode not in _modes():
        pytest.skip("bwrap unavailable")
    code = (
        "class Yes:\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"
        "    def __bool__(self):\n        return True\n"
        "class YesInt(int):\n"
        "    def __eq__(self, other):\n        return True\n"
        "def inc(x):\n    return Yes()\n"
        "def inc_int(x):\n    return YesInt(7)\n"
        "def inc_list(x):\n    return [Yes()]\n"
    )
    tests = "assert inc(1) == 2\nassert inc_int(1) == 2\nassert inc_list(1) == [2]\n"
    result = run_unit_tests(code, tests, mode=mode)
    assert (result.passed, result.n_tests, result.n_failed) == (False, 3, 3), result.output


@pytest.mark.parametrize("mode", MODES)
def test_a_forged_verdict_or_reply_does_not_pass(mode):
    """The old attack printed the runner's verdict line; now it also writes fake replies on
    every descriptor it can find and tries the judge's stdout through /proc."""
    if mode not in _modes():
        pytest.skip("bwrap unavailable")
    fake = (
        '{"n_tests": 9, "n_failed": 0, "n_in_child": 0, "error": null, "failures": [], '
        '"timed_out": false, "child_rc": 0}'
    )
    code = (
        "import os, json\n"
        f"FAKE = {fake!r}\n"
        "print(FAKE)\n"
        "for path in (f'/proc/{os.getppid()}/fd/1', '/proc/1/fd/1'):\n"
        "    try:\n"
        "        with open(path, 'w') as f:\n"
        "            f.write(FAKE + '\\n')\n"
        "    except OSError:\n"
        "        pass\n"
        "for fd in range(3, 20):\n"
        "    try:\n"
        "        os.write(fd, b'[' * 100000 + b'\\n[1]\\n')  # too deep, and not a dict\n"
        "    except OSError:\n"
        "        pass\n"
        "    for i in range(5):\n"
        "        try:\n"
        "            os.write(fd, (json.dumps({'i': i, 'ok': True}) + '\\n').encode())\n"
        "        except OSError:\n"
        "            pass\n"
        "inc = None\n"
    )
    result = run_unit_tests(code, TESTS, mode=mode)
    assert not result.passed
    assert result.n_failed >= 1 and result.n_tests == 3, result


@pytest.mark.parametrize("mode", MODES)
def test_it_cannot_kill_its_parent_or_the_worker(mode):
    if mode not in _modes():
        pytest.skip("bwrap unavailable")
    code = (
        "import os\n"
        "def killed(pid):\n"
        "    try:\n"
        "        os.kill(pid, 9)\n"
        "        return True\n"
        "    except OSError:\n"
        "        return False\n"
    )
    tests = f"assert killed(os.getppid()) is False\nassert killed({os.getpid()}) is False\n"
    result = run_unit_tests(code, "import os\n" + tests, mode=mode)
    assert result.passed, result.output  # the judge lived to write the verdict; so do we


@pytest.mark.parametrize("mode", MODES)
def test_no_process_outlives_the_time_limit(mode):
    if mode not in _modes():
        pytest.skip("bwrap unavailable")
    marker = f"{uuid.uuid4().int % 1000}.{os.getpid()}7"
    code = (
        "import os\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv('/bin/sleep', ['sleep', '{marker}'])\n"
        "    os._exit(0)\n"
        "while True:\n    pass\n"
    )
    result = run_unit_tests(code, TESTS, timeout_s=2, cpu_s=30, mode=mode)
    assert result.error_class == "timeout"
    assert _processes_with(marker) == 0


@pytest.mark.parametrize("mode", MODES)
def test_it_cannot_read_the_worker_environment(mode, monkeypatch):
    if mode not in _modes():
        pytest.skip("bwrap unavailable")
    canary = f"sk-canary-{uuid.uuid4().hex}"
    monkeypatch.setenv("TIERWATCH_TEST_CANARY", canary)
    code = (
        "import os\n"
        "def read(pid):\n"
        "    try:\n"
        "        with open(f'/proc/{pid}/environ', 'rb') as f:\n"
        "            return f.read().decode(errors='replace')\n"
        "    except OSError as exc:\n"
        "        return type(exc).__name__\n"
        f"for pid in (os.getppid(), {os.getpid()}, 1):\n"
        "    print(pid, read(pid))\n"
    )
    result = run_unit_tests(code, "assert read(1) is not None\n", mode=mode)
    assert result.passed, result.output
    assert canary not in result.output


@pytest.mark.parametrize("mode", MODES)
def test_as_root_each_evaluation_runs_as_a_uid_of_its_own(mode):
    """RLIMIT_NPROC counts every process of a uid: with one uid for all evaluations, code that
    forks failed with EAGAIN beside another evaluation's processes. Two at once, each forking
    its whole allowance and holding it, both pass, under two different uids."""
    if os.geteuid() != 0:
        pytest.skip("the uid is dropped only when the worker is root")
    if mode == "bwrap" and isolation() != "bwrap":
        pytest.skip("bubblewrap does not work here")
    code = (
        "import os, time\n"
        "UID = os.getuid()\n"
        "KIDS = []\n"
        "for _ in range(12):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        time.sleep(3)\n"
        "        os._exit(0)\n"
        "    KIDS.append(pid)\n"
        "print('uid', UID)\n"
    )
    tests = f"from solution import UID, KIDS\nassert len(KIDS) == 12\nassert UID >= {1 << 20}\n"
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(run_unit_tests, code, tests, max_procs=14, mode=mode) for _ in "ab"]
        results = [r.result() for r in runs]
    assert all(r.passed for r in results), [r.output for r in results]
    uids = {line for r in results for line in r.output.splitlines() if line.startswith("uid ")}
    assert len(uids) == 2, [r.output for r in results]


def test_unsafe_mode_drops_root(monkeypatch):
    tests = "import os\nassert os.getuid() != 0\nassert os.geteuid() != 0\n"
    result = run_unit_tests("x = 1\n", tests, mode="unsafe-subprocess")
    if os.geteuid() == 0:
        assert result.passed, result.output
    assert result.isolation == "unsafe-subprocess"


def test_without_bwrap_it_fails_closed(monkeypatch):
    monkeypatch.setenv("TIERWATCH_BWRAP", "/nonexistent/bwrap")
    monkeypatch.delenv("TIERWATCH_SANDBOX", raising=False)
    assert isolation() == "none"
    result = run_unit_tests("def inc(x):\n    return x + 1\n", TESTS)
    assert (result.passed, result.error_class, result.isolation) == (
        False,
        "sandbox_unavailable",
        "none",
    )
    assert "/nonexistent/bwrap" in result.output


def test_without_bwrap_the_unsafe_mode_needs_an_explicit_opt_in(monkeypatch):
    monkeypatch.setenv("TIERWATCH_BWRAP", "/nonexistent/bwrap")
    monkeypatch.setenv("TIERWATCH_SANDBOX", "unsafe-subprocess")
    result = run_unit_tests("def inc(x):\n    return x + 1\n", TESTS)
    assert (result.passed, result.isolation) == (True, "unsafe-subprocess"), result.output
    monkeypatch.setenv("TIERWATCH_SANDBOX", "yolo")
    with pytest.raises(ValueError, match="TIERWATCH_SANDBOX"):
        isolation()


@needs_bwrap
def test_every_result_records_its_isolation():
    result = run_unit_tests("def inc(x):\n    return x + 1\n", TESTS)
    assert result.isolation == isolation() == "bwrap"
    assert run_unit_tests(" ", TESTS).isolation == "none"  # nothing ran


def test_the_worker_dying_takes_the_code_with_it(tmp_path):
    """PR_SET_PDEATHSIG: a worker killed mid-evaluation leaves no generated code running."""
    marker = f"{uuid.uuid4().int % 1000}.{os.getpid()}9"
    script = tmp_path / "worker.py"
    script.write_text(
        "from evals.sandbox import run_unit_tests\n"
        f"code = \"import os\\nos.execv('/bin/sleep', ['sleep', '{marker}'])\\n\"\n"
        "run_unit_tests(code, 'assert True\\n', timeout_s=60, mode='unsafe-subprocess')\n"
    )
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}  # this checkout's evals, not an installed one
    worker = subprocess.Popen([sys.executable, str(script)], cwd=root, env=env)
    deadline = time.monotonic() + 30
    while _processes_with(marker) == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_with(marker) == 1
    worker.kill()
    worker.wait()
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_with(marker) == 0
