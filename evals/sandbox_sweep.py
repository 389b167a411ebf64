"""Sandbox work dirs a killed worker left behind, swept.

Each evaluation writes the generated code to a work dir ``<tmp>/tierwatch-sandbox-<pid>.<start>-
<random>`` and removes it when it ends. A worker killed during an evaluation (SIGKILL, OOM)
cannot, and the code stayed on the disk. The name carries the worker's pid and that process's
start time (``/proc/<pid>/stat`` field 22), so a sweep can tell a dir whose owner still runs
from one whose owner is gone, even once the pid is reused. The sweep runs when a worker starts
(``monitor.celery``) and on each watchdog pass (``monitor.runs.watchdog``).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from evals.sandbox_watch import start_time

log = logging.getLogger(__name__)

PREFIX = "tierwatch-sandbox-"
# a dir in the old form (no owner in its name), or being created, is left this long
UNOWNED_GRACE_S = 3600.0
_OWNED = re.compile(rf"^{PREFIX}(\d+)\.(\d+)-")


def owner_prefix() -> str:
    """The work-dir prefix naming this process as the owner."""
    return f"{PREFIX}{os.getpid()}.{start_time(os.getpid())}-"


def _alive(pid: int, started: int) -> bool:
    return start_time(pid) == started


def stale_dirs(tmp: str | None = None, now: float | None = None) -> list[Path]:
    """The work dirs under ``tmp`` (default the temp dir) whose owner no longer runs."""
    now = time.time() if now is None else now
    found = []
    for path in Path(tmp or tempfile.gettempdir()).glob(f"{PREFIX}*"):
        match = _OWNED.match(path.name)
        if match:
            if not _alive(int(match.group(1)), int(match.group(2))):
                found.append(path)
            continue
        try:
            old = now - path.lstat().st_mtime > UNOWNED_GRACE_S
        except OSError:
            continue
        if old:
            found.append(path)
    return found


def sweep(tmp: str | None = None, now: float | None = None) -> list[Path]:
    """Remove the stale work dirs (with the generated code in them); return what was removed."""
    removed = []
    for path in stale_dirs(tmp, now):
        if path.is_symlink() or not path.is_dir():
            path.unlink(missing_ok=True)  # not ours to follow
        else:
            shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path)
    if removed:
        log.warning("sandbox: removed %d work dir(s) left by a dead worker", len(removed))
    return removed
