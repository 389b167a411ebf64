"""The evaluation's process tree as the watch sees it in /proc: a grandchild that left its
session and lost its parent is still the evaluation's and is killed with it; a process that
is not the evaluation's, started before or during it, is never touched."""

from __future__ import annotations

import os
import subprocess
import time

from evals.sandbox_watch import Tree, start_time


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_an_orphan_that_left_its_session_is_killed_and_a_stranger_is_not():
    before = subprocess.Popen(["sleep", "30"])  # running before the evaluation
    tree = Tree()
    root = subprocess.Popen(
        ["sh", "-c", "setsid sleep 31 & echo $!; exec sleep 32"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    tree.root = root.pid
    orphan = int(root.stdout.readline())
    stranger = subprocess.Popen(["sleep", "33"])  # started during it, not by it
    try:
        deadline = time.monotonic() + 5
        while {root.pid, orphan} - {p.pid for p in tree.scan()} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert {root.pid, orphan} <= {p.pid for p in tree.scan()}
        root.kill()
        root.wait()  # the orphan is re-parented away from the tree's root now
        members = {p.pid for p in tree.scan()}
        assert orphan in members and stranger.pid not in members and before.pid not in members
        assert tree.kill() >= 1
        deadline = time.monotonic() + 5
        while _alive(orphan) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(orphan)
        assert stranger.poll() is None and before.poll() is None  # untouched
        assert start_time(stranger.pid) > 0
    finally:
        for proc in (before, stranger):
            proc.kill()
            proc.wait()
        try:
            os.kill(orphan, 9)
        except ProcessLookupError:
            pass
