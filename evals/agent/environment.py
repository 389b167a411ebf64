"""An agent task's environment: BFCL's executable classes, in the sandbox, one process per use.

Why a sandbox: the calls' arguments come from a vendor's model, and BFCL's own runner executes
them with ``eval`` of a call string in its process. Here BFCL's ``func_source_code`` modules are
read out of the pinned wheel at run time (never imported into the worker, never copied into
the repository) into a sandbox work dir beside ``environment_child.py``, and the child is
started by :func:`evals.sandbox.command`, the same bubblewrap isolation as the unit tests (no
network, cleared environment, read-only root, small tmpfs) under rlimits and the whole-process
watch (:class:`evals.sandbox_watch.Watch`). The child builds each call from parsed JSON
arguments, not from a string.

Why one persistent process per episode rather than one per call or per turn with the state as
JSON: BFCL's state is live objects (a file system of ``Directory`` objects with parent links,
seeded random generators, ``__eq__`` that compares only some attributes), and BFCL's checker
compares them with ``==``. A JSON round trip would have to re-implement each class's equality;
a process that keeps the objects keeps BFCL's semantics, and costs one interpreter start per
episode instead of one per call.

Every failure is bounded and named (:class:`EnvironmentFailure`): a call over ``call_s``
(the process is killed), a reply over its size cap, a MemoryError under the address-space limit,
the evaluation over its total memory, a process that died, a sandbox that is not available.
"""

from __future__ import annotations

import functools
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evals import sandbox
from evals.benchmarks.fetch import read_member
from evals.sandbox_sweep import owner_prefix
from evals.sandbox_watch import RUNNER_PROCS, Watch

PACKAGE = "bfcl_eval/eval_checker/multi_turn_eval/func_source_code"
# BFCL's CLASS_FILE_PATH_MAPPING (constants/executable_backend_config.py) for the multi-turn
# categories; ``long_context`` holds the extra data several of them import
CLASS_MODULES = {
    "GorillaFileSystem": "gorilla_file_system",
    "MathAPI": "math_api",
    "MessageAPI": "message_api",
    "TwitterAPI": "posting_api",
    "TicketAPI": "ticket_api",
    "TradingBot": "trading_bot",
    "TravelAPI": "travel_booking",
    "VehicleControlAPI": "vehicle_control",
}
SHARED_MODULES = ("long_context",)
CHILD = "environment_child.py"


@dataclass(frozen=True)
class EnvLimits:
    """Bounds of one environment process; a call over any of them is an environment error."""

    call_s: float = 10.0  # wall clock of one request to the environment
    memory_mb: int = 512  # address space of the process
    total_memory_mb: int = 768  # resident memory of the sandbox's processes together
    cpu_s: int = 300  # CPU of the whole process (many calls)
    result_chars: int = 32_768  # one call's result text
    state_chars: int = 262_144  # the state view of all classes
    start_s: float = 30.0  # interpreter start and BFCL's imports


class EnvironmentFailure(Exception):
    """The environment could not answer: ``kind`` is timeout | result_too_large | memory |
    processes | crash | malformed | sandbox_unavailable | environment | closed."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


@functools.lru_cache(maxsize=16)
def _source(module: str) -> bytes:
    return read_member("bfcl-eval", f"{PACKAGE}/{module}.py")


def bfcl_sources(classes: list[str]) -> tuple[dict[str, str], dict[str, bytes]]:
    """The modules a task's classes need, out of the wheel: (class -> dotted module, relative
    path -> bytes)."""
    unknown = [c for c in classes if c not in CLASS_MODULES]
    if unknown:
        raise ValueError(f"involved_classes: no executable environment for {unknown}")
    dotted = PACKAGE.replace("/", ".")
    modules = {c: f"{dotted}.{CLASS_MODULES[c]}" for c in classes}
    names = {CLASS_MODULES[c] for c in classes} | set(SHARED_MODULES)
    return modules, {f"{PACKAGE}/{name}.py": _source(name) for name in sorted(names)}


def _write_tree(root: Path, sources: dict[str, bytes]) -> None:
    """The modules at their package paths, each package with an empty ``__init__.py`` (the
    wheel's own ``bfcl_eval/__init__.py`` would import its dependencies)."""
    for rel, data in sources.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        for parent in path.relative_to(root).parents:
            if str(parent) != ".":
                (root / parent / "__init__.py").touch()
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


class Environment:
    """One sandboxed environment process for one task (a context manager).

    ``classes`` and ``sources`` default to BFCL's for ``involved_classes`` (tests pass their
    own, e.g. a hostile class). Instance sets (``"model"``, ``"truth"``) start from
    ``initial_config`` on first use.
    """

    def __init__(
        self,
        involved_classes: list[str],
        initial_config: dict[str, Any],
        *,
        long_context: bool = False,
        limits: EnvLimits | None = None,
        classes: dict[str, str] | None = None,
        sources: dict[str, bytes] | None = None,
        mode: str | None = None,
    ) -> None:
        self.limits = limits or EnvLimits()
        if classes is None or sources is None:
            classes, sources = bfcl_sources(involved_classes)
        self._settings = {
            "classes": classes,
            "initial_config": initial_config,
            "long_context": long_context,
            "result_chars": self.limits.result_chars,
            "state_chars": self.limits.state_chars,
        }
        self._sources = sources
        self._mode = mode
        self._proc: subprocess.Popen[bytes] | None = None
        self._watch: Watch | None = None
        self._dir: Path | None = None
        self._failed: EnvironmentFailure | None = None

    def __enter__(self) -> Environment:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start the sandboxed process; a sandbox that cannot run is an EnvironmentFailure."""
        mode = self._mode or sandbox.isolation()
        if mode == sandbox.NONE:
            self._fail("sandbox_unavailable", "no sandbox: bubblewrap does not work here")
        self._dir = Path(tempfile.mkdtemp(prefix=owner_prefix()))
        self._dir.chmod(0o755)
        _write_tree(self._dir, self._sources)
        shutil.copy(Path(__file__).with_name(CHILD), self._dir / CHILD)
        (self._dir / CHILD).chmod(0o644)
        files = (CHILD, *sorted({rel.split("/")[0] for rel in self._sources}))
        args, cwd = sandbox.command(mode, self._dir, files, CHILD)
        # a backstop: the one process is already under RLIMIT_AS; one look a second suffices
        self._watch = Watch(self.limits.total_memory_mb * 2**20, RUNNER_PROCS + 1, 1.0)
        self._proc = subprocess.Popen(
            args,
            cwd=cwd,
            env=dict(sandbox.MIN_ENV),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._watch.watch(self._proc.pid)
        mem = self.limits.memory_mb * 2**20
        rlimits = {
            "RLIMIT_AS": (mem, mem),
            "RLIMIT_CPU": (self.limits.cpu_s, self.limits.cpu_s + 1),
            "RLIMIT_NPROC": (1, 1),  # no process of its own: BFCL's classes never fork
            "RLIMIT_FSIZE": (sandbox.WORKDIR_BYTES, sandbox.WORKDIR_BYTES),
            "RLIMIT_NOFILE": (64, 64),
            "RLIMIT_CORE": (0, 0),
        }
        settings = {**self._settings, "rlimits": rlimits, "drop_to": sandbox.evaluation_uid()}
        self._send(settings)
        # the first state read proves the imports and the initial state load
        self.request({"op": "state", "set": "model"}, self.limits.start_s)

    def call(self, method: str, args: list[Any], kwargs: dict[str, Any], on: str = "model") -> str:
        """One call executed in the environment; its result text as BFCL gives it."""
        request = {"op": "call", "set": on, "method": method, "args": args, "kwargs": kwargs}
        return str(self.request(request)["result"])

    def state(self, on: str = "model") -> dict[str, Any]:
        """The public attributes of each class instance of ``on``, as JSON (for display)."""
        state = self.request({"op": "state", "set": on})["state"]
        return state if isinstance(state, dict) else {}

    def compare(self, a: str = "model", b: str = "truth") -> tuple[bool, dict[str, Any]]:
        """BFCL's state check of set ``a`` against set ``b``: (valid, differences)."""
        reply = self.request({"op": "compare", "a": a, "b": b})
        return bool(reply["valid"]), dict(reply.get("differences") or {})

    def request(self, message: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """Send one request line, read one reply line within ``timeout_s`` (default the call
        limit) and the result cap; any failure closes the environment and raises."""
        if self._failed is not None:
            raise EnvironmentFailure("closed", f"the environment failed earlier ({self._failed})")
        self._send(message)
        reply = self._read(timeout_s or self.limits.call_s)
        if "error" in reply:
            self._fail(str(reply["error"]), str(reply.get("detail", "")))
        return reply

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(message).encode() + b"\n")
            self._proc.stdin.flush()
        except OSError:
            self._died()

    def _read(self, timeout_s: float) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        cap = 16 * self.limits.result_chars + 65_536  # JSON escapes take up to 12 bytes a char
        cap = max(cap, 2 * self.limits.state_chars)
        buffer = bytearray()
        deadline = time.monotonic() + timeout_s
        while not buffer.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                self._fail("timeout", f"the environment did not answer within {timeout_s:g} s")
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65_536)
            if not chunk:
                self._died()
            buffer += chunk
            if len(buffer) > cap:
                self._fail("result_too_large", f"a reply over {cap} bytes")
        try:
            reply = json.loads(buffer.decode("ascii"))
        except (UnicodeDecodeError, ValueError) as exc:
            self._fail("malformed", f"a reply that is not one JSON line: {exc}")
        if not isinstance(reply, dict):
            self._fail("malformed", "a reply that is not a JSON object")
        return dict(reply)

    def _died(self) -> None:
        assert self._proc is not None and self._watch is not None
        try:
            rc = self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            rc = None
        if self._watch.exceeded:
            self._fail(*self._watch.exceeded)
        if rc is not None and -rc in (signal.SIGXCPU, signal.SIGKILL):
            self._fail("timeout", f"the environment was stopped by its CPU limit (rc {rc})")
        self._fail("crash", f"the environment process ended (rc {rc})")

    def _fail(self, kind: str, detail: str) -> None:
        self._failed = EnvironmentFailure(kind, detail)
        self.close()
        raise self._failed

    def close(self) -> None:
        """Stop the process and everything it left; remove the work dir."""
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
            for stream in (self._proc.stdin, self._proc.stdout):
                if stream is not None:
                    stream.close()
        if self._watch is not None:
            self._watch.stop()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._proc, self._watch, self._dir = None, None, None
