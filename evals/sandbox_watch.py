"""What the sandbox reads from ``/proc`` (psutil is not a dependency)."""

from __future__ import annotations


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
