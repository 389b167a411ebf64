"""Run untrusted, model-generated code against a case's unit tests.

Why a sandbox: the code comes from a vendor's model, so it is treated like code from a
stranger. It never runs in this process, never sees our environment (API keys live there), and
runs under CPU, memory, file-size, open-file and process rlimits plus a wall-clock deadline.

Two processes run inside: the judge (``sandbox_judge.py``) reads the tests from stdin, never
runs generated code, and alone writes the verdict on its stdout; the child
(``sandbox_child.py``) imports the code, evaluates what the judge asks and sends back values in
a typed encoding, so ``assert f(x) == <literal>`` is decided by the judge with exact types (see
the judge's docstring for what stays in the child). The child's stdout and stderr are our
output; it never holds the verdict channel.

Isolation levels (``SandboxResult.isolation``), chosen by :func:`isolation`:

- ``"bwrap"`` (bubblewrap, Debian package ``bubblewrap``): new pid, net, ipc, uts and cgroup
  namespaces (no network at all: only a loopback with nothing listening), a root made of a tmpfs
  with read-only binds of ``/usr`` and the interpreter's prefix, a small tmpfs work dir holding
  only the code and the two runner scripts, a cleared environment, a new session, and death with
  its parent; ``/tmp`` and ``/dev/shm`` are small tmpfs of their own and ``/`` and ``/dev``
  read-only. When we are root the judge starts the child as a uid of its own (one of
  ``EVALUATION_UIDS``, run by no other process): root is exempt from ``RLIMIT_NPROC`` and a user
  namespace would map back to root, which is why, as root, the user namespace is not unshared;
  and ``RLIMIT_NPROC`` counts every process of a uid, so with one uid shared by all evaluations
  (``nobody``) an evaluation that forked failed with EAGAIN beside another one, and one
  evaluation's code could signal another's. As a normal user ``--unshare-all`` is used.
- ``"unsafe-subprocess"``: only when bwrap does not work AND the operator set
  ``TIERWATCH_SANDBOX=unsafe-subprocess``. Same judge and child, empty environment, rlimits,
  own session, the child as its own uid when we are root, killed (with every process it left:
  the judge is a child subreaper) at the deadline and when the worker dies (PR_SET_PDEATHSIG).
  It does NOT block the network (127.0.0.1 included) or writes to world-writable places such as
  /tmp; run as non-root it cannot drop privileges, so the code can signal the worker's uid.
In both modes ``evals.sandbox_watch.Watch`` bounds the evaluation as a whole (total memory,
process count) and kills every process once seen in it when it ends.
- ``"none"``: bwrap does not work and no opt-in: nothing runs, the result is
  ``sandbox_unavailable`` (never passed). Fails closed.

bwrap is probed once per binary (``$TIERWATCH_BWRAP``, default the one on PATH) by a real run,
and the outcome logged (an error when it fails, with the reason).
"""

from __future__ import annotations

import ast
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from evals.pysource import parse_module
from evals.records import SandboxResult
from evals.sandbox_sweep import owner_prefix
from evals.sandbox_watch import RUNNER_PROCS, Watch

log = logging.getLogger(__name__)

OUTPUT_LIMIT = 4096  # characters of stdout+stderr kept for the samples table
# Above nobody (65534) and the ranges useradd hands out, so no account's processes share the count.
EVALUATION_UIDS = range(1 << 20, (1 << 20) + (1 << 16))
WORKDIR = "/sandbox"  # the work dir inside the bubblewrap sandbox
WORKDIR_BYTES = 16 * 1024 * 1024  # tmpfs size: bounds what generated code can write
SCRATCH_BYTES = 16 * 1024 * 1024  # the same for /tmp and /dev/shm inside bwrap
TOTAL_MEMORY_MB = 512  # resident memory of all of an evaluation's processes together
MIN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}

BWRAP, UNSAFE, NONE = "bwrap", "unsafe-subprocess", "none"  # isolation levels
# Copied into the work dir: the code under test, the judge and the child (the tests are not).
FILES = ("solution.py", "sandbox_judge.py", "sandbox_child.py")

_FENCE = re.compile(r"```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PY_TAGS = {"python", "py", "python3", "py3"}


def extract_code(text: str) -> str:
    """The code in a model's reply.

    Order: the longest ```python fenced block (the last of equally long ones: models often show
    a broken version first and the fix after), else the first fenced block of any language,
    else the whole text if it parses as Python and holds at least one statement other than a
    bare expression (so a one-word answer is not taken for code), else "".
    An unclosed fence at the end (a reply cut by max_tokens) still counts as a block.
    """
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    python = [body for tag, body in blocks if tag in _PY_TAGS]
    if python:
        best = max(len(b) for b in python)
        return [b for b in python if len(b) == best][-1].strip("\n")
    if blocks:
        return blocks[0][1].strip("\n")
    try:
        tree = parse_module(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    if any(not isinstance(node, ast.Expr) for node in tree.body):
        return text.strip("\n")
    return ""


def _interpreter() -> str:
    """The real interpreter behind this process (a venv's python is a symlink into its base)."""
    exe = os.path.realpath(sys.executable)
    if exe.startswith(os.path.realpath(sys.base_prefix) + os.sep):
        return exe
    return str(Path(sys.base_prefix) / "bin" / "python3")


def _others_can_run(path: str) -> bool:
    """Whether another uid (the evaluation's) can execute ``path``: every directory above it
    and the file o+x."""
    real = Path(os.path.realpath(path))
    try:
        return all(p.stat().st_mode & 0o001 for p in (real, *real.parents))
    except OSError:
        return False


def _child_interpreter(mode: str) -> str:
    """The interpreter for the child. Without bwrap, as root, the child runs as its own uid,
    which may not reach our interpreter (pyenv under /root): then a system python3 (the child
    and judge use the standard library only)."""
    own = _interpreter()
    if mode == BWRAP or os.geteuid() != 0 or _others_can_run(own):
        return own
    for candidate in ("/usr/local/bin/python3", "/usr/bin/python3"):
        if _others_can_run(candidate):
            return candidate
    return own  # the judge reports the permission error; the result is never a pass


def bwrap_path() -> str:
    """The bwrap binary: ``$TIERWATCH_BWRAP``, else the one on PATH."""
    return os.environ.get("TIERWATCH_BWRAP") or shutil.which("bwrap") or "/usr/bin/bwrap"


def _bwrap_args(
    host_dir: Path, runner_args: list[str], files: tuple[str, ...] = FILES
) -> list[str]:
    """bwrap command line: what the sandbox sees, nothing more (see the module docstring)."""
    if os.geteuid() == 0:
        ns = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        ns.append("--unshare-cgroup-try")
    else:
        ns = ["--unshare-all"]
    args = [bwrap_path(), *ns, "--die-with-parent", "--new-session", "--clearenv"]
    for key, value in MIN_ENV.items():
        args += ["--setenv", key, value]
    args += ["--ro-bind", "/usr", "/usr"]
    for top in ("/lib", "/lib64", "/bin", "/sbin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    if os.path.isdir("/etc/alternatives"):
        args += ["--ro-bind", "/etc/alternatives", "/etc/alternatives"]
    prefix = os.path.realpath(sys.base_prefix)
    if not prefix.startswith("/usr/"):
        # bwrap creates missing parents as 0700; the evaluation's uid must walk down to the prefix
        parts = Path(prefix).parts[1:-1]
        for i in range(1, len(parts) + 1):
            args += ["--perms", "0755", "--dir", "/" + "/".join(parts[:i])]
        args += ["--ro-bind", prefix, prefix]
    args += ["--proc", "/proc", "--dev", "/dev"]
    # bounded scratch space: bwrap's /dev (with its /dev/shm) and root are unbounded tmpfs,
    # writable by the code when the worker is not root (1.76 GiB in 7.7 s through /dev/shm)
    for scratch in ("/dev/shm", "/tmp"):
        args += ["--perms", "01777", "--size", str(SCRATCH_BYTES), "--tmpfs", scratch]
    args += ["--perms", "01777", "--size", str(WORKDIR_BYTES), "--tmpfs", WORKDIR]
    for name in files:
        args += ["--ro-bind", str(host_dir / name), f"{WORKDIR}/{name}"]
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]  # not what is mounted on them
    return [*args, "--chdir", WORKDIR, *runner_args]


def _processes_of(uid: int) -> int:
    """How many processes ``uid`` already runs: RLIMIT_NPROC counts them all, not just ours."""
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        match = re.search(r"^Uid:\s+(\d+)", text, re.MULTILINE)
        count += bool(match and int(match.group(1)) == uid)
    return count


def evaluation_uid() -> int:
    """A uid for one evaluation (root only): one of ``EVALUATION_UIDS`` that no process runs as
    now, so ``RLIMIT_NPROC`` bounds this evaluation alone."""
    pick = random.SystemRandom()
    while True:
        uid = pick.choice(EVALUATION_UIDS)
        if _processes_of(uid) == 0:
            return uid


def _settings(
    tests: str,
    timeout_s: float,
    memory_mb: int,
    cpu_s: int,
    nproc: int,
    python: str,
    drop_to: int,
) -> bytes:
    """What the judge reads on stdin: the tests and the limits it puts on the child.

    The CPU hard limit is one second above the soft one, so code that ignores SIGXCPU is killed.
    """
    mem = memory_mb * 1024 * 1024
    rlimits = {
        "RLIMIT_AS": (mem, mem),
        "RLIMIT_CPU": (cpu_s, cpu_s + 1),
        "RLIMIT_NPROC": (nproc, nproc),
        "RLIMIT_FSIZE": (WORKDIR_BYTES, WORKDIR_BYTES),
        "RLIMIT_NOFILE": (64, 64),
        "RLIMIT_CORE": (0, 0),
    }
    settings = {
        "tests": tests,
        "timeout_s": timeout_s,
        "rlimits": rlimits,
        "drop_to": drop_to,
        "python": python,
    }
    return json.dumps(settings).encode() + b"\n"


class _Capture(threading.Thread):
    """Reads a pipe to EOF keeping only its head and tail, so endless printing costs nothing."""

    def __init__(self, stream: Any, head: int = OUTPUT_LIMIT, tail: int = 32_768) -> None:
        # stream: a buffered binary pipe (it needs read1, which IO[bytes] does not declare)
        super().__init__(daemon=True)
        self.stream, self.head_max, self.tail_max = stream, head, tail
        self.head, self.tail, self.dropped = bytearray(), bytearray(), False

    def run(self) -> None:
        while chunk := self.stream.read1(65536):
            room = self.head_max - len(self.head)
            self.head += chunk[:room]
            self.tail += chunk[room:] if room > 0 else chunk
            if len(self.tail) > self.tail_max:
                del self.tail[: len(self.tail) - self.tail_max]
                self.dropped = True

    def text(self) -> str:
        gap = b"\n[...]\n" if self.dropped else b""
        return (bytes(self.head) + gap + bytes(self.tail)).decode("utf-8", "replace")


def command(
    mode: str, host_dir: Path, files: tuple[str, ...], script: str, *, site: bool = True
) -> tuple[list[str], str]:
    """``python -I <script>`` isolated by ``mode`` (bwrap or unsafe-subprocess), seeing only
    ``files`` (names of files or directories in ``host_dir``): the command line and its working
    dir. The unit-test judge and an agent task's environment (:mod:`evals.agent.environment`)
    start this way, so both get the same isolation. ``site=False`` adds ``-S`` for a script
    that needs only the standard library: the ``site`` module and the interpreter's ``.pth``
    files are a third of a start."""
    runner = [_interpreter(), "-I", *([] if site else ["-S"]), script]
    if mode == BWRAP:
        return _bwrap_args(host_dir, runner, files), str(host_dir)
    work = host_dir / "work"
    work.mkdir()
    work.chmod(0o1777)  # the child, as its own uid, may write scratch files here
    for name in files:
        source = host_dir / name
        if source.is_dir():
            shutil.copytree(source, work / name)
        else:
            shutil.copy(source, work / name)
    return runner, str(work)


def _spawn(
    mode: str, host_dir: Path, stdin: bytes, timeout_s: float, watch: Watch
) -> tuple[int | None, bool, str, str]:
    """Start the judge under ``mode``, bounded as a whole by ``watch`` (which kills every
    process of the evaluation when it ends, those that left its session too); return
    (returncode, timed_out, verdict, output)."""
    # the judge and the child it starts see the standard library only (``-S``); the child adds
    # the builtins site would (exit() and quit() among them) itself
    args, cwd = command(mode, host_dir, FILES, "sandbox_judge.py", site=False)
    proc = subprocess.Popen(
        args,
        cwd=cwd,
        env=dict(MIN_ENV),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    watch.watch(proc.pid)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = _Capture(proc.stdout), _Capture(proc.stderr)
    out.start()
    err.start()
    timed_out = False
    try:
        proc.stdin.write(stdin)
        proc.stdin.close()
    except OSError:  # the process died before reading; its output says why
        pass
    try:  # the judge keeps the deadline itself; this is the backstop if it cannot
        proc.wait(timeout=timeout_s + 10)
    except subprocess.TimeoutExpired:
        timed_out = True
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    watch.stop()
    proc.wait()
    out.join(2)
    err.join(2)
    return proc.returncode, timed_out, out.text(), err.text()


_probed: dict[str, tuple[bool, str]] = {}


def _probe(bwrap: str) -> tuple[bool, str]:
    """Can bwrap start here, under the same limits, and run the judge? (why, if not)"""
    if not os.access(bwrap, os.X_OK):
        return False, f"{bwrap} not found or not executable (Debian package bubblewrap)"
    try:
        result = _run(BWRAP, "x = 1", "assert x == 1\n", 20, 256, 5, 64)
    except OSError as exc:
        return False, f"bwrap could not be started: {exc}"
    if result.passed:
        return True, "ok"
    return False, f"bwrap probe failed ({result.error_class}): {result.output[:300]}"


def configured_mode() -> str:
    """``$TIERWATCH_SANDBOX``: ``bwrap`` (default) or ``unsafe-subprocess`` (explicit opt-in)."""
    value = os.environ.get("TIERWATCH_SANDBOX", "").strip() or BWRAP
    if value not in (BWRAP, UNSAFE):
        raise ValueError(f"TIERWATCH_SANDBOX={value!r}: expected {BWRAP!r} (default) or {UNSAFE!r}")
    return value


def isolation() -> str:
    """The isolation this process uses now: "bwrap", "unsafe-subprocess" or "none".

    bwrap is probed once per binary (a real test run in it) and the answer cached; a failure is
    logged as an error with its reason. Without a working bwrap the answer is "none" (every
    evaluation then returns ``sandbox_unavailable``) unless ``TIERWATCH_SANDBOX=
    unsafe-subprocess`` opts into the weaker fallback.
    """
    bwrap = bwrap_path()
    if bwrap not in _probed:
        _probed[bwrap] = _probe(bwrap)
        ok, why = _probed[bwrap]
        if ok:
            log.info("sandbox: bubblewrap works (%s)", bwrap)
        else:
            log.error(
                "SANDBOX UNAVAILABLE: %s. Generated code will not run (results say "
                "sandbox_unavailable) unless TIERWATCH_SANDBOX=unsafe-subprocess is set.",
                why,
            )
    if _probed[bwrap][0]:
        return BWRAP
    return UNSAFE if configured_mode() == UNSAFE else NONE


def _truncate(text: str, limit: int = OUTPUT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + "\n[... truncated ...]\n" + text[-half:]


def _run(
    mode: str,
    code: str,
    tests: str,
    timeout_s: float,
    memory_mb: int,
    cpu_s: int,
    max_procs: int,
    total_memory_mb: int = TOTAL_MEMORY_MB,
) -> SandboxResult:
    started = time.perf_counter()
    if os.geteuid() == 0:  # a uid no process runs as: the evaluation's allowance is its own
        owner, nproc = evaluation_uid(), max_procs
    else:  # our own uid, whose processes RLIMIT_NPROC counts too
        owner = os.geteuid()
        nproc = max_procs + _processes_of(owner)
    python = _child_interpreter(mode)
    stdin = _settings(tests, timeout_s, memory_mb, cpu_s, nproc, python, owner)
    # the name says which process owns the dir, so a sweep can remove it if we are killed
    with tempfile.TemporaryDirectory(prefix=owner_prefix()) as tmp:
        host_dir = Path(tmp)
        host_dir.chmod(
            0o755
        )  # the evaluation's uid must reach the files (the tests are not among them)
        (host_dir / "solution.py").write_text(code, encoding="utf-8")
        for name in FILES[1:]:
            shutil.copy(Path(__file__).with_name(name), host_dir / name)
        for name in FILES:
            (host_dir / name).chmod(0o644)
        watch = Watch(total_memory_mb * 2**20, max_procs + RUNNER_PROCS)
        rc, timed_out, stdout, stderr = _spawn(mode, host_dir, stdin, timeout_s, watch)
    duration_ms = (time.perf_counter() - started) * 1000
    output = _truncate(stderr.strip())
    if watch.exceeded:  # killed as a whole: whatever the judge managed to say is moot
        error, why = watch.exceeded
        output = _truncate(f"stopped: {why}\n{stderr.strip()}")
        return SandboxResult(False, 0, 0, error, output, duration_ms, mode)
    try:
        verdict = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else None
    except ValueError:
        verdict = None
    if verdict is not None and not timed_out:
        n_tests, n_failed, error = verdict["n_tests"], verdict["n_failed"], verdict["error"]
        child_rc = verdict["child_rc"] or 0
        if verdict["timed_out"]:
            error = "timeout"
        elif error == "crash" and "MemoryError" in stderr:
            error = "memory"
        elif error == "crash" and re.search(r"\[Errno (27|28)\]", stderr):
            error = "write_limit"  # the file-size limit, or a full work dir, /tmp or /dev/shm
        elif error == "crash" and -child_rc in (signal.SIGXCPU, signal.SIGKILL):
            error = "timeout"  # SIGXCPU is the CPU limit; SIGKILL its hard limit
        if verdict["failures"]:
            output = _truncate(output + "\n" + "\n".join(verdict["failures"]))
        passed = error is None and n_tests > 0 and n_failed == 0
        n_in_child = verdict.get("n_in_child", 0)
        return SandboxResult(
            passed, n_tests, n_failed, error, output, duration_ms, mode, n_in_child
        )
    if timed_out:
        error = "timeout"
    elif mode == BWRAP and stderr.startswith("bwrap:"):
        error = "sandbox"
    else:
        error = "crash"  # the judge itself died: never a pass
    return SandboxResult(False, 0, 0, error, output, duration_ms, mode)


def run_unit_tests(
    code: str,
    tests: str,
    *,
    timeout_s: float = 10,
    memory_mb: int = 256,
    cpu_s: int = 5,
    max_procs: int = 32,
    total_memory_mb: int = TOTAL_MEMORY_MB,
    mode: str | None = None,
) -> SandboxResult:
    """Run ``code`` then ``tests`` (plain asserts, or ``def test_*`` functions) in the sandbox.

    Each top-level assert and each test function (no arguments; ``async def`` is awaited) counts
    as one test; a failing setup statement counts as a failed test. The code sees the standard
    library only (``python -I``), as ``solution`` and as the globals of the tests.
    ``passed`` means at least one test ran and none failed.
    ``error_class``: ``no_code`` (nothing to run), ``syntax``, ``crash`` (the code raised or
    the process died), ``memory`` (one process, or all of the evaluation's over
    ``total_memory_mb``), ``processes`` (more than ``max_procs`` + the runner's),
    ``write_limit`` (the file-size limit, or a full work dir, /tmp or /dev/shm), ``timeout``
    (wall clock or CPU limit), ``sandbox`` (bwrap itself failed), ``sandbox_unavailable`` (no
    isolation and no opt-in: nothing ran).
    ``mode`` forces an isolation level; default :func:`isolation`.
    ``tests`` are the case author's, trusted: a test file with no test is a ValueError.
    """
    tree = parse_module(tests)
    has_test = any(
        isinstance(n, ast.Assert)
        or isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
        and n.name.startswith("test_")
        for n in tree.body
    )
    if not has_test:
        raise ValueError("tests: no top-level assert and no test_* function")
    if not code.strip():
        return SandboxResult(False, error_class="no_code")
    mode = mode or isolation()
    if mode == NONE:
        why = _probed.get(bwrap_path(), (False, "not probed"))[1]
        return SandboxResult(
            False,
            error_class="sandbox_unavailable",
            output=f"sandbox unavailable: {why}",
            isolation=NONE,
        )
    if mode == UNSAFE and os.geteuid() != 0:
        _hide_this_process()
    return _run(mode, code, tests, timeout_s, memory_mb, cpu_s, max_procs, total_memory_mb)


def _hide_this_process() -> None:
    """Without bwrap and without root the code runs as our own uid: make this process
    non-dumpable, so that uid cannot read its memory or ``/proc/<pid>/environ`` (the API
    keys). It can still signal us; only bwrap or a root worker prevents that."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
