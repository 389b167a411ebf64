"""Start, health-check and stop one ``llama-server`` process on 127.0.0.1.

Why process groups: each server is started in its own session (``start_new_session``), so its
pid is also its process-group id and stopping it by that id leaves no orphans, while nothing
else on the machine is touched (no kill by name). Why the log file: when a server refuses to
start or dies, its own last lines are the explanation, so errors quote them.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from evals.vendors.llamacpp import EngineError, log_tail

HOST = "127.0.0.1"
# Children started by this process, kept so they are waited for (no zombies, no warnings).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class PortInUseError(EngineError):
    """The port asked for is taken by another process."""


class ServerDiedError(EngineError):
    """The server process exited (or never became healthy); the message quotes its log."""


@dataclass(frozen=True)
class ServerSpec:
    """What one server serves and how: one model, one port, a few flags."""

    name: str
    model: Path
    port: int
    alias: str  # the model id the server reports and accepts
    ctx: int = 4096
    threads: int = 1
    parallel: int = 1  # slots; the context is shared between them
    args: tuple[str, ...] = ()  # extra flags: speculative decoding, chat template, caching
    cache_ram_mib: int = 0  # host-memory prompt cache; 0 = none


@dataclass(frozen=True)
class ServerProcess:
    name: str
    pid: int  # also the process-group id (own session)
    port: int
    log: Path
    cmd: list[str] = field(default_factory=list)
    started_at: float = 0.0  # wall clock
    ready_s: float = 0.0  # from spawn to the first healthy /health

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL (``.../v1``)."""
        return f"http://{HOST}:{self.port}/v1"


def free_port() -> int:
    """An ephemeral port that is free now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def port_in_use(port: int) -> bool:
    """Whether binding the port fails the way the server's own bind would (SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return True
            raise
    return False


def command(binary: Path, spec: ServerSpec) -> list[str]:
    # --cache-ram: host-memory prompt cache across requests (llama.cpp's default is a few GB; we
    # set it per target, 0 for all but the cached tier, so the behaviour is explicit).
    return [
        str(binary),
        "-m",
        str(spec.model),
        "--host",
        HOST,
        "--port",
        str(spec.port),
        "-a",
        spec.alias,
        "-c",
        str(spec.ctx),
        "-t",
        str(spec.threads),
        "-tb",
        str(spec.threads),
        "-np",
        str(spec.parallel),
        "--cache-ram",
        str(spec.cache_ram_mib),
        "--no-webui",
        *spec.args,
    ]


def start(binary: Path, spec: ServerSpec, *, log: Path, timeout_s: float = 120.0) -> ServerProcess:
    """Spawn the server and return once ``/health`` answers 200.

    Raises ``PortInUseError`` before spawning when the port is taken, ``ServerDiedError`` with
    the log tail when the process exits or stays unhealthy past ``timeout_s`` (it is then
    stopped, so a failed start leaves nothing behind).
    """
    if port_in_use(spec.port):
        raise PortInUseError(
            f"{spec.name}: port {HOST}:{spec.port} is already in use by another process. "
            f"Fix: stop it (`ss -ltnp 'sport = :{spec.port}'` shows which) or choose another "
            "port (port=0 picks a free one)."
        )
    if not spec.model.is_file():
        raise EngineError(f"{spec.name}: model file {spec.model} is missing; prepare it first.")
    cmd = command(binary, spec)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}  # flags only
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(log, "w") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(
            cmd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    _CHILDREN[proc.pid] = proc
    server = ServerProcess(spec.name, proc.pid, spec.port, log, cmd, time.time())
    deadline = t0 + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise _died(server, f"exited with code {proc.returncode} while starting")
        if health(server.url):
            ready = round(time.monotonic() - t0, 3)
            return ServerProcess(spec.name, proc.pid, spec.port, log, cmd, server.started_at, ready)
        time.sleep(0.1)
    stop(proc.pid)
    raise _died(server, f"was not healthy after {timeout_s:.0f} s (stopped)")


def _died(server: ServerProcess, what: str) -> ServerDiedError:
    tail = log_tail(server.log)
    cls: type[ServerDiedError] = ServerDiedError
    hint = "Fix: read the log above (a corrupt model file: delete it and prepare it again)."
    if "bind" in tail.lower():
        hint = f"Fix: port {server.port} was taken after the check; retry with port=0."
    return cls(
        f"llama-server {server.name} (pid {server.pid}) {what}.\n"
        f"--- last lines of {server.log} ---\n{tail}\n---\n{hint}"
    )


def health(url: str, timeout_s: float = 2.0) -> bool:
    """``GET /health`` is 200 only once the model is loaded (503 while loading)."""
    root = url.removesuffix("/v1")
    try:
        return httpx.get(f"{root}/health", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running (not zombie) llama-server: guards against reused pids."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X") and b"llama-server" in cmdline


def stop(pid: int, timeout_s: float = 10.0) -> bool:
    """Stop the server's process group: SIGTERM, then SIGKILL after ``timeout_s``.

    Returns whether a live llama-server was found. Reaps the child when we are its parent.
    """
    if not alive(pid):
        _reap(pid)
        return False
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and alive(pid):
            _reap(pid)
            time.sleep(0.05)
        if not alive(pid):
            break
    _reap(pid)
    return True


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:
            del _CHILDREN[pid]
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: init (or the starter) reaps it
