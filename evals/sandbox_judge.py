"""The judge: runs inside the sandbox, never runs generated code, and alone writes the verdict.

Why a separate process from the code under test: code running in the process that also
counts the tests can rewrite the count (walk the frames, patch ``==``, print a fake verdict).
So this process (standard library only, started as ``python -I sandbox_judge.py``):

1. reads the case's tests and limits from stdin (the tests are never a file the code could
   read), makes itself non-dumpable (no ``/proc/<pid>/mem``, ``environ`` or ``fd`` for a
   same-uid process) and a child subreaper (an orphan of the code is re-parented here, so it
   can be killed);
2. splits each top-level ``assert <expr> == <literal>`` (also ``!=``, literal on either side)
   and ``assert <expr>`` / ``assert not <expr>``: the child evaluates only ``<expr>`` and sends
   back its value in a typed encoding; the literal never leaves this process, and the
   comparison happens here with exact types (``True`` is not ``1``, an object whose ``__eq__``
   always answers True encodes as "other" and equals nothing). Any other statement (setup,
   other asserts, ``test_*`` functions) runs in the child, which reports pass or fail: those
   checks are as trustworthy as the child, and the verdict counts them as ``n_in_child``;
3. starts the child (``sandbox_child.py``) with an empty environment, its own session, the
   rlimits, as ``nobody`` when this process is root, and with the verdict channel (this
   process's stdout) closed to it: the child's stdout and stderr both go to our stderr;
4. kills the child and every process it left at the deadline or when it ends, then prints one
   JSON verdict line on stdout.
"""

import ast
import ctypes
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


def _prctl(option, value):
    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def decode(enc):
    """The value of the child's typed encoding (see sandbox_child.encode); None-safe."""
    tag = enc[0]
    if tag in ("none",):
        return None
    if tag in ("bool", "int", "str"):
        return enc[1]
    if tag == "float":
        return float(enc[1])
    if tag == "bytes":
        return bytes.fromhex(enc[1])
    if tag in ("list", "tuple", "set", "frozenset"):
        items = [decode(e) for e in enc[1]]
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "dict":
        return {decode(k): decode(v) for k, v in enc[1]}
    raise ValueError(f"unsupported result type {enc[1]!r}")


def same(a, b):
    """Equal with exact types all the way down (int and float compare by value, bool does not)."""
    number = (int, float)
    if type(a) in number and type(b) in number:
        return a == b
    if type(a) is not type(b):
        return False
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def plan(tests):
    """Items for the child, and for each checked here: (expected literal, negate) or None."""
    items, checks = [], []
    for node in ast.parse(tests).body:
        line = node.lineno
        if isinstance(node, ast.Assert):
            test, negate = node.test, False
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
                test, negate = test.operand, True
            split = _split(test)
            if split is not None:
                expr, expected, op = split
                items.append({"kind": "value", "src": ast.unparse(expr), "line": line})
                checks.append((expected, op, negate))
                continue
        kind = "assert" if isinstance(node, ast.Assert) else "stmt"
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test_"
        ):
            kind = "test_fn"
        items.append(
            {
                "kind": kind,
                "src": ast.unparse(node),
                "line": line,
                "name": getattr(node, "name", None),
            }
        )
        checks.append(None)
    return items, checks


def _split(test):
    """(expression for the child, expected literal, op) or None when not of a checked form."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op = test.ops[0]
        if isinstance(op, ast.Eq | ast.NotEq):
            for expr, lit in ((test.left, test.comparators[0]), (test.comparators[0], test.left)):
                try:
                    expected = ast.literal_eval(lit)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue
                return expr, expected, "eq" if isinstance(op, ast.Eq) else "ne"
        return None
    if isinstance(test, ast.Call | ast.Name | ast.Attribute | ast.Subscript):
        return test, None, "truth"
    return None


def judge(item_check, reply):
    """(counts as a test, failed, message) for one reply."""
    kind = reply.get("kind")
    if not reply.get("ok"):  # a failing setup statement counts as a failed test too
        return True, True, str(reply.get("error"))[:200]
    if item_check is None:
        return kind in ("assert", "test_fn"), False, ""
    expected, op, negate = item_check
    try:
        value = decode(reply["value"])
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError) as exc:
        return True, True, f"line {reply.get('line')}: {exc}"[:200]
    held = bool(value) if op == "truth" else same(value, expected) == (op == "eq")
    held = held != negate
    return True, not held, "" if held else f"line {reply.get('line')}: AssertionError"


def _descendants_killed(child):
    """SIGKILL the child's group, then every process re-parented to us, until none is left.

    The child is waited for first, by Popen: reaped by ``waitpid(-1)`` below, its status would
    be lost (Popen then reports 0)."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    child_rc = child.wait()
    for _ in range(200):
        mine = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                if ppid == os.getpid():
                    mine.append(int(entry))
        for pid in mine:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            if not mine:
                return child_rc
        time.sleep(0.01)
    return child_rc


def main():
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # die with the worker that started us
    _prctl(PR_SET_DUMPABLE, 0)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    settings = json.loads(sys.stdin.readline())
    items, checks = plan(settings["tests"])
    root = os.geteuid() == 0
    drop_to = settings["drop_to"] if root else None

    def limits():  # runs in the child between fork and exec: this process is single-threaded
        for name, (soft, hard) in settings["rlimits"].items():
            resource.setrlimit(getattr(resource, name), (soft, hard))
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    reply_r, reply_w = os.pipe()
    child = subprocess.Popen(
        [settings["python"], "-I", "sandbox_child.py", str(reply_w)],
        stdin=subprocess.PIPE,
        stdout=2,
        stderr=2,
        env=ENV,
        pass_fds=(reply_w,),
        start_new_session=True,
        preexec_fn=limits,
        user=drop_to,
        group=drop_to,
        extra_groups=[] if drop_to is not None else None,
    )
    os.close(reply_w)
    try:
        child.stdin.write(json.dumps(items).encode() + b"\n")
        child.stdin.close()
    except OSError:
        pass
    deadline = time.monotonic() + settings["timeout_s"]
    buf, replies, timed_out = b"", [], False
    # Read until the child exits (processes it left may hold the pipe open), the pipe closes,
    # or the deadline passes.
    exited = False
    while len(buf) <= 4_000_000:  # beyond that it is a flood, not replies
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([reply_r], [], [], 0.0 if exited else min(left, 0.05))
        if ready:
            chunk = os.read(reply_r, 65536)
            if not chunk:
                break
            buf += chunk
        elif exited:
            break
        else:
            exited = child.poll() is not None
    child_rc = None
    if not timed_out:  # the pipe closed: let the child finish exiting before the kill
        try:
            child_rc = child.wait(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            pass
    killed_rc = _descendants_killed(child)
    child_rc = killed_rc if child_rc is None else child_rc
    for line in buf.split(b"\n"):  # written by the child: anything may be here
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if type(reply) is dict:
            replies.append(reply)
    result = {
        "n_tests": 0,
        "n_failed": 0,
        "n_in_child": 0,
        "error": None,
        "failures": [],
        "timed_out": timed_out,
        "child_rc": child_rc,
    }
    setup = next((r for r in replies if r.get("kind") == "setup"), None)
    by_index = {r.get("i"): r for r in replies if type(r.get("i")) is int}
    if setup is None or setup.get("error"):
        result["error"] = (setup or {}).get("error") or "crash"
    else:
        for i, item in enumerate(items):
            reply = by_index.get(i)
            if reply is None:  # the child died or stopped before this item
                result["error"] = "crash"
                result["n_tests"] += item["kind"] != "stmt"
                result["n_failed"] += item["kind"] != "stmt"
                continue
            reply["kind"], reply["line"] = item["kind"], item["line"]
            counts, failed, message = judge(checks[i], reply)
            result["n_tests"] += counts
            result["n_failed"] += failed and counts
            result["n_in_child"] += counts and checks[i] is None
            if failed and reply.get("memory"):
                result["error"] = "memory"
            if failed and message and len(result["failures"]) < 20:
                result["failures"].append(message)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


main()
