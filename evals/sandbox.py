"""Run untrusted, model-generated code against a case's unit tests.

Why a sandbox: the code comes from a vendor's model, so it is treated like code from a
stranger. It never runs in this process, never sees our environment (API keys live there), and
runs under CPU, memory, file-size, open-file and process rlimits (set by our runner before any
generated code runs) plus a wall-clock deadline that kills the whole process group.

Two isolation levels, chosen once per process by :func:`isolation`:

- ``"bubblewrap"`` (``bwrap``, Debian package ``bubblewrap``): new pid, net, ipc, uts and cgroup
  namespaces (no network at all: only a loopback with nothing listening), a root made of a tmpfs
  with read-only binds of ``/usr`` and the interpreter's prefix, a small tmpfs work dir holding
  only ``solution.py``, ``tests.py`` and the runner, a cleared environment, a new session, and
  death with its parent. When we are root the runner drops to ``nobody`` (65534) before any
  generated code runs: root is exempt from ``RLIMIT_NPROC`` (so a fork bomb would be unbounded)
  and a user namespace would map back to root, which is why, as root, the user namespace is
  not unshared. As a normal user ``--unshare-all`` is used.
- ``"subprocess-rlimits"``: the fallback when ``bwrap`` is missing or cannot start. A bare
  subprocess with the same rlimits, an empty environment, ``python -I``, a fresh temp dir as
  cwd. It does NOT block the network or the filesystem, and as root the process-count limit
  does not bind; results say which level was used so a reader can weigh them.

The runner prints its verdict as JSON on a line that starts with a per-run nonce sent on stdin,
so text printed by the generated code cannot be mistaken for the verdict by accident. (Code that
inspects the runner's own frames could forge it; this is a guard against accidents, and the
limits above are the security boundary.)
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from evals.records import SandboxResult

log = logging.getLogger(__name__)

OUTPUT_LIMIT = 4096  # characters of stdout+stderr kept for the samples table
NOBODY = 65534
WORKDIR = "/sandbox"  # the work dir inside the bubblewrap sandbox
WORKDIR_BYTES = 16 * 1024 * 1024  # tmpfs size: bounds what generated code can write
MIN_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}

_isolation: str | None = None

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
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    if any(not isinstance(node, ast.Expr) for node in tree.body):
        return text.strip("\n")
    return ""


# The runner executes inside the sandbox with the standard library only.
_RUNNER = r"""
import ast, json, os, resource, sys, traceback, types

def main():
    settings = json.loads(sys.argv[1])
    nonce = sys.stdin.readline().strip()
    with open("solution.py", encoding="utf-8") as f:
        source = f.read()
    with open("tests.py", encoding="utf-8") as f:
        tests = f.read()
    for name, (soft, hard) in settings["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if settings["drop_to"] is not None:  # drop root before any generated code runs
        os.setgroups([])
        os.setgid(settings["drop_to"])
        os.setuid(settings["drop_to"])
    result = {"n_tests": 0, "n_failed": 0, "error": None, "failures": []}

    def report():
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout.write("\n" + nonce + " " + json.dumps(result) + "\n")
        sys.stdout.flush()

    def fail(name, exc):
        result["n_failed"] += 1
        if isinstance(exc, MemoryError):
            result["error"] = "memory"
        if len(result["failures"]) < 20:
            result["failures"].append(f"{name}: {type(exc).__name__}: {exc}"[:200])
        traceback.print_exception(exc, limit=3, file=sys.stderr)

    try:
        code = compile(source, "solution.py", "exec")
    except (SyntaxError, ValueError) as exc:
        result["error"] = "syntax"
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return report()
    module = types.ModuleType("solution")
    module.__file__ = "solution.py"
    sys.modules["solution"] = module
    try:
        exec(code, module.__dict__)
    except BaseException as exc:
        result["error"] = "memory" if isinstance(exc, MemoryError) else "crash"
        traceback.print_exception(exc, limit=5, file=sys.stderr)
        return report()

    namespace = dict(module.__dict__)
    namespace["__name__"] = "tests"
    for i, node in enumerate(ast.parse(tests).body):
        is_assert = isinstance(node, ast.Assert)
        name = f"assert@line{node.lineno}" if is_assert else f"setup@line{node.lineno}"
        try:
            exec(compile(ast.Module([node], []), "tests.py", "exec"), namespace)
        except BaseException as exc:
            result["n_tests"] += 1
            fail(name, exc)
        else:
            result["n_tests"] += is_assert
    for name, fn in list(namespace.items()):
        code_obj = getattr(fn, "__code__", None)
        if not name.startswith("test_") or code_obj is None:
            continue
        if code_obj.co_filename != "tests.py":
            continue
        result["n_tests"] += 1
        try:
            value = fn()
            if isinstance(value, types.CoroutineType):
                import asyncio
                asyncio.run(value)
        except BaseException as exc:
            fail(name, exc)
    report()

main()
"""


def _interpreter() -> str:
    """The real interpreter behind this process (a venv's python is a symlink into its base)."""
    exe = os.path.realpath(sys.executable)
    if exe.startswith(os.path.realpath(sys.base_prefix) + os.sep):
        return exe
    return str(Path(sys.base_prefix) / "bin" / "python3")


def _bwrap_args(host_dir: Path, runner_args: list[str]) -> list[str]:
    """bwrap command line: what the sandbox sees, nothing more (see the module docstring)."""
    bwrap = shutil.which("bwrap") or "/usr/bin/bwrap"
    if os.geteuid() == 0:
        ns = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        ns.append("--unshare-cgroup-try")
    else:
        ns = ["--unshare-all"]
    args = [bwrap, *ns, "--die-with-parent", "--new-session", "--clearenv"]
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
        # bwrap creates missing parents as 0700; nobody must be able to walk down to the prefix.
        parts = Path(prefix).parts[1:-1]
        for i in range(1, len(parts) + 1):
            args += ["--perms", "0755", "--dir", "/" + "/".join(parts[:i])]
        args += ["--ro-bind", prefix, prefix]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--perms", "01777", "--size", str(WORKDIR_BYTES), "--tmpfs", WORKDIR]
    for name in ("solution.py", "tests.py", "runner.py"):
        args += ["--ro-bind", str(host_dir / name), f"{WORKDIR}/{name}"]
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


def _runner_settings(memory_mb: int, cpu_s: int, nproc: int, drop_to: int | None) -> str:
    """Limits the runner sets on itself before the generated code runs (inherited by any child).

    Set by the runner rather than in a ``preexec_fn``: the caller may be a threaded or async
    worker, where Python documents ``preexec_fn`` as unsafe. The effect is the same, since no
    generated code runs before they are in place. The CPU hard limit is one second above the
    soft one, so code that ignores SIGXCPU is killed.
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
    return json.dumps({"rlimits": rlimits, "drop_to": drop_to})


class _Capture(threading.Thread):
    """Reads a pipe to EOF keeping only its head and tail, so endless printing costs nothing."""

    def __init__(self, stream, head: int = OUTPUT_LIMIT, tail: int = 32_768) -> None:
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


def _spawn(
    mode: str,
    host_dir: Path,
    stdin: str,
    timeout_s: float,
    memory_mb: int,
    cpu_s: int,
    max_procs: int,
) -> tuple[int | None, bool, str, str]:
    """Start the runner under ``mode``; return (returncode, timed_out, stdout, stderr)."""
    drop_to = None
    if os.geteuid() == 0 and mode == "bubblewrap":
        drop_to = NOBODY
    owner = NOBODY if drop_to is not None else os.geteuid()
    nproc = max_procs + _processes_of(owner)
    runner = [_interpreter(), "-I", "runner.py", _runner_settings(memory_mb, cpu_s, nproc, drop_to)]
    if mode == "bubblewrap":
        args, cwd = _bwrap_args(host_dir, runner), str(host_dir)
    else:
        work = host_dir / "work"
        work.mkdir()
        for name in ("solution.py", "tests.py", "runner.py"):
            shutil.copy(host_dir / name, work / name)
        args, cwd = runner, str(work)
    proc = subprocess.Popen(
        args,
        cwd=cwd,
        env=dict(MIN_ENV),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    out, err = _Capture(proc.stdout), _Capture(proc.stderr)
    out.start()
    err.start()
    timed_out = False
    try:
        proc.stdin.write(stdin.encode() + b"\n")
        proc.stdin.close()
    except OSError:  # the process died before reading; its output says why
        pass
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    # Kill the whole group either way: children left behind by the code must not outlive it.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    out.join(2)
    err.join(2)
    return proc.returncode, timed_out, out.text(), err.text()


def _probe() -> tuple[bool, str]:
    """Can bwrap start here, under the same limits, and run the interpreter? (why, if not)"""
    if shutil.which("bwrap") is None:
        return False, "bwrap not found on PATH (Debian package bubblewrap)"
    try:
        result = _run("bubblewrap", "x = 1", "assert x == 1", 20, 256, 5, 64)
    except OSError as exc:
        return False, f"bwrap could not be started: {exc}"
    if result.passed:
        return True, "ok"
    return False, f"bwrap probe failed ({result.error_class}): {result.output[:300]}"


def isolation() -> str:
    """The isolation level used by this process: "bubblewrap" or "subprocess-rlimits".

    Checked once (a trivial test run in bwrap) and cached; the reason for a fallback is logged.
    """
    global _isolation
    if _isolation is None:
        ok, why = _probe()
        _isolation = "bubblewrap" if ok else "subprocess-rlimits"
        if not ok:
            log.warning("sandbox: falling back to subprocess-rlimits: %s", why)
    return _isolation


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
) -> SandboxResult:
    nonce = "@@tierwatch-" + secrets.token_hex(12)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tierwatch-sandbox-") as tmp:
        host_dir = Path(tmp)
        for name, text in (("solution.py", code), ("tests.py", tests), ("runner.py", _RUNNER)):
            (host_dir / name).write_text(text, encoding="utf-8")
            # After the uid drop the code may read itself (tracebacks), not the tests or runner.
            (host_dir / name).chmod(0o644 if name == "solution.py" else 0o600)
        rc, timed_out, stdout, stderr = _spawn(
            mode, host_dir, nonce, timeout_s, memory_mb, cpu_s, max_procs
        )
    duration_ms = (time.perf_counter() - started) * 1000
    verdict, lines = None, []
    for line in stdout.splitlines():
        if line.startswith(nonce + " "):
            verdict = json.loads(line[len(nonce) + 1 :])
        else:
            lines.append(line)
    output = _truncate(("\n".join(lines).strip() + "\n" + stderr.strip()).strip())

    if verdict is not None and not timed_out:
        n_tests, n_failed, error = verdict["n_tests"], verdict["n_failed"], verdict["error"]
        passed = error is None and n_tests > 0 and n_failed == 0
        return SandboxResult(passed, n_tests, n_failed, error, output, duration_ms)
    # A signal shows as -N from a bare subprocess and as 128+N from bwrap. SIGXCPU is the CPU
    # limit; SIGKILL not sent by us is its hard limit (the code ignored SIGXCPU).
    sig = -rc if rc is not None and rc < 0 else (rc - 128 if mode == "bubblewrap" else 0)
    if timed_out or (sig in (signal.SIGXCPU, signal.SIGKILL) and "MemoryError" not in stderr):
        error = "timeout"
    elif "MemoryError" in stderr or "Cannot allocate memory" in stderr:
        error = "memory"
    elif mode == "bubblewrap" and stderr.startswith("bwrap:"):
        error = "sandbox"
    else:
        error = "crash"
    return SandboxResult(False, 0, 0, error, output, duration_ms)


def run_unit_tests(
    code: str,
    tests: str,
    *,
    timeout_s: float = 10,
    memory_mb: int = 256,
    cpu_s: int = 5,
    max_procs: int = 32,
    mode: str | None = None,
) -> SandboxResult:
    """Run ``code`` then ``tests`` (plain asserts, or ``def test_*`` functions) in the sandbox.

    Each top-level assert and each test function (no arguments; ``async def`` is awaited) counts
    as one test; a failing setup statement counts as a failed test. The code sees the standard
    library only (``python -I``), as ``solution`` and as the globals of the tests.
    ``passed`` means at least one test ran and none failed.
    ``error_class``: ``no_code`` (nothing to run), ``syntax``, ``crash`` (the code raised or
    the process died), ``memory``, ``timeout`` (wall clock or CPU limit), ``sandbox`` (bwrap
    itself failed). ``mode`` forces an isolation level; default :func:`isolation`.
    ``tests`` are the case author's, trusted: a test file with no test is a ValueError.
    """
    tree = ast.parse(tests)
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
    return _run(mode or isolation(), code, tests, timeout_s, memory_mb, cpu_s, max_procs)
