"""What the sandbox reads from ``/proc`` (psutil is not a dependency), and the watch that
bounds one evaluation as a whole: its processes' total resident memory and their number.

Why from outside: the rlimits the judge sets hold per process (address space, CPU, file size)
or per uid (process count), so N children each under the memory limit hold N times it, and a
uid's process budget is shared with every evaluation of that uid. A cgroup would bound the
whole, but is not always there or writable (a cgroup v1 host, an unprivileged worker); this
works wherever ``/proc`` does.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` split after the command name (which may hold spaces and parens):
    index 0 is field 3 (state), so field N is index N - 3. None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def start_time(pid: int) -> int:
    """The process's start time in clock ticks since boot (field 22), 0 when it is gone: with
    the pid, a name no reused pid can take."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else 0


PAGE = os.sysconf("SC_PAGE_SIZE")
# the runner's own processes in an evaluation's tree (bwrap outside and inside, the judge)
RUNNER_PROCS = 3


@dataclass(frozen=True)
class Proc:
    """One process as ``/proc/<pid>/stat`` shows it."""

    pid: int
    ppid: int
    sid: int
    start: int
    rss: int  # bytes resident


def read_proc(pid: int) -> Proc | None:
    fields = _stat_fields(pid)
    if not fields:
        return None
    try:
        ppid, sid, start, rss = int(fields[1]), int(fields[3]), int(fields[19]), int(fields[21])
    except (IndexError, ValueError):
        return None
    return Proc(pid, ppid, sid, start, rss * PAGE)


def pss(proc: Proc) -> int:
    """Proportional set size in bytes (a page shared by N processes counts 1/N in each), from
    ``smaps_rollup``; the resident size when that is unreadable (a non-dumpable process of
    another uid) or gone. Twice the cost of ``stat``, so read only near the cap."""
    try:
        with open(f"/proc/{proc.pid}/smaps_rollup", encoding="ascii") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return proc.rss


def _pids() -> set[int]:
    try:
        return {int(e) for e in os.listdir("/proc") if e.isdigit()}
    except OSError:
        return set()


class Tree:
    """The processes of one evaluation: the descendants of its root process, and every process
    once seen among them or in one of their sessions (re-parented to PID 1, it is still the
    evaluation's). Reading ``/proc/<pid>/stat`` is the cost (0.2-0.5 ms each in a VM), so a
    pid that was not ours when first read is not read again while it lives: the processes that
    ran before the evaluation started are skipped from the first scan."""

    def __init__(self) -> None:
        """Made before the evaluation's first process starts: what runs now is not ours."""
        self.root = -1  # set once it is started
        self.outside = _pids()
        self.seen: dict[int, int] = {}  # pid -> start time, of every process once in the tree
        self.sids: set[int] = set()

    def scan(self) -> list[Proc]:
        """The evaluation's live processes now."""
        procs = {}
        now = _pids()
        self.outside &= now  # a pid that ended may come back as one of ours
        for pid in now - self.outside:
            proc = read_proc(pid)
            if proc is not None:
                procs[pid] = proc
        members: dict[int, Proc] = {}
        todo = [p for p in procs.values() if self._ours(p)]
        children: dict[int, list[Proc]] = {}
        for proc in procs.values():
            children.setdefault(proc.ppid, []).append(proc)
        while todo:
            proc = todo.pop()
            if proc.pid not in members:
                members[proc.pid] = proc
                todo.extend(children.get(proc.pid, ()))
        for pid, proc in procs.items():
            if pid in members:
                self.seen[pid] = proc.start
                self.sids.add(proc.sid)
            else:
                self.outside.add(pid)
        return list(members.values())

    def _ours(self, proc: Proc) -> bool:
        if proc.pid == self.root or self.seen.get(proc.pid) == proc.start:
            return True
        if proc.sid not in self.sids:
            return False
        # a session of the evaluation only while its leader's pid is not another process's
        # (pids are reused: 32,768 of them on many hosts)
        leader = self.seen.get(proc.sid)
        return leader is not None and start_time(proc.sid) in (0, leader)

    def kill(self) -> int:
        """Stop every process of the evaluation (SIGSTOP: a stopped process cannot fork or
        respawn), scan again until no new one appears, then SIGKILL them all; return how many."""
        stopped: dict[int, int] = {}
        for _ in range(50):
            fresh = [p for p in self.scan() if stopped.get(p.pid) != p.start]
            if not fresh:
                break
            for proc in fresh:
                _signal(proc.pid, signal.SIGSTOP)
                stopped[proc.pid] = proc.start
        for pid, start in stopped.items():
            if start_time(pid) == start:
                _signal(pid, signal.SIGKILL)
        return len(stopped)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Watch(threading.Thread):
    """Bounds one evaluation as a whole: every ``interval_s`` it sums the resident memory of
    the evaluation's processes and counts them; over ``memory_bytes`` or ``max_procs`` it kills
    them all and says why (``exceeded``: the error class and a message). The per-process
    rlimits cannot do this: 8 children under a 256 MB address-space limit each hold 1.6 GB.
    Memory is the resident size, which counts a page shared after a fork once in each process
    that maps it (35 forks of one interpreter: 514 MB); over the cap, the proportional size
    (``pss``) decides. Files in the sandbox's tmpfs are bounded by their mount sizes."""

    def __init__(self, memory_bytes: int, max_procs: int, interval_s: float = 0.05) -> None:
        """Made before the evaluation starts; ``watch(pid)`` once its first process runs."""
        super().__init__(daemon=True)
        self.tree = Tree()
        self.memory_bytes, self.max_procs, self.interval_s = memory_bytes, max_procs, interval_s
        self.peak_rss = self.peak_procs = 0
        self.exceeded: tuple[str, str] | None = None
        self._stop_event = threading.Event()

    def watch(self, root: int) -> None:
        self.tree.root = root
        self.tree.outside.discard(root)
        self.start()

    def run(self) -> None:
        while not self._stop_event.is_set():
            procs = self.tree.scan()
            rss = sum(p.rss for p in procs)
            if rss > self.memory_bytes:  # pages shared after fork count once, in proportion
                rss = sum(pss(p) for p in procs)
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_procs = max(self.peak_procs, len(procs))
            if len(procs) > self.max_procs:  # first: a fork bomb's copies also add up in RSS
                self.exceeded = (
                    "processes",
                    f"the evaluation ran {len(procs)} processes, over its {self.max_procs}",
                )
            elif rss > self.memory_bytes:
                mb = self.memory_bytes // 2**20
                why = f"the evaluation held {rss / 2**20:.0f} MB in {len(procs)} processes"
                self.exceeded = ("memory", f"{why}, over its {mb} MB total")
            if self.exceeded:
                self.tree.kill()
                return
            self._stop_event.wait(self.interval_s)

    def stop(self) -> None:
        """Stop watching; kill whatever of the evaluation is left (setsid'd or re-parented)."""
        self._stop_event.set()
        if self.is_alive():
            self.join(5)
        self.tree.kill()
