"""The judge: runs inside the sandbox, never runs generated code, and alone writes the verdict.

Why a separate process from the code under test: code running in the process that also
counts the tests can rewrite the count (walk the frames, patch ``==``, print a fake verdict).
So this process (standard library only, started as ``python -I -S sandbox_judge.py``):

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
   checks are as trustworthy as the child, and the verdict counts them as ``n_in_child``.
   But when the solution's names appear in the tests only as calls (``f(x)``) or as arguments
   of a test-defined function (HumanEval's ``check(candidate)``), the whole test file runs
   *here* instead (``judge_here``): each solution name is a proxy that sends the call's
   arguments to the child and takes back the result in the typed encoding, so every
   comparison, and every ``assert`` inside ``check``, happens in this process. Fake reply
   lines, an always-equal object or an early exit then fail the tests they touch;
3. starts the child (``sandbox_child.py``) with an empty environment, its own session, the
   rlimits, as ``nobody`` when this process is root, and with the verdict channel (this
   process's stdout) closed to it: the child's stdout and stderr both go to our stderr;
4. kills the child and every process it left at the deadline or when it ends, then prints one
   JSON verdict line on stdout.
"""

import ast
import builtins
import collections.abc
import ctypes
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time
import types

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 1, 4, 36
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
COROUTINES = (types.CoroutineType, types.GeneratorType, collections.abc.Coroutine)


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


def encode(value, depth=0):
    """The test's arguments in the child's typed encoding (see sandbox_child.encode)."""
    kind = type(value)
    simple = {type(None): "none", bool: "bool", int: "int", str: "str"}
    if depth > 50:
        raise TypeError("argument nested too deep")
    if kind in simple:
        return [simple[kind], value]
    if kind is float:
        return ["float", repr(value)]
    if kind is bytes:
        return ["bytes", value.hex()]
    if kind in (list, tuple, set, frozenset):
        items = sorted(value, key=repr) if kind in (set, frozenset) else list(value)
        return [kind.__name__, [encode(v, depth + 1) for v in items]]
    if kind is dict:
        return ["dict", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]]
    raise TypeError(f"an argument of type {kind.__name__} cannot be sent to the candidate")


def remote_names(tests):
    """The solution's names if the tests use them only as calls or as arguments of a call to a
    test-defined function (then the tests can run here), else None (also when they use none:
    such tests check the child's own world, its uid or files, and must run there)."""
    tree = ast.parse(tests)
    bound, loads, parents = set(), [], {}
    for node in ast.walk(tree):
        for sub in ast.iter_child_nodes(node):
            parents[sub] = node
        if isinstance(node, ast.Name):
            (loads.append(node) if isinstance(node.ctx, ast.Load) else bound.add(node.id))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            if node.name.split(".")[0] == "solution":  # tests that reach into the module itself
                return None
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.Global | ast.Nonlocal | ast.ImportFrom) and (
            not isinstance(node, ast.ImportFrom) or node.module == "solution"
        ):
            return None
    free = {n.id for n in loads} - bound - set(dir(builtins))
    for name in loads:
        if name.id not in free:
            continue
        up = parents.get(name)
        if isinstance(up, ast.Call) and up.func is name:
            continue
        if isinstance(up, ast.Call) and name in up.args:
            if isinstance(up.func, ast.Name) and up.func.id in bound:
                continue
        return None
    return free or None  # tests that use no solution name look at the child itself


class _Deadline(BaseException):
    """The evaluation's time is up (a BaseException: no test's ``except`` swallows it)."""


class RemoteError(Exception):
    pass


class Channel:
    """Calls into the child: one request line on its stdin, one typed reply per request."""

    def __init__(self, child, reply_r, deadline):
        self.child, self.reply_r, self.deadline = child, reply_r, deadline
        self.buf, self.n, self.gone, self.memory = b"", 0, False, False
        self.unsupported = False  # a value that cannot cross in the typed encoding

    def line(self):
        while b"\n" not in self.buf:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise _Deadline()
            ready, _, _ = select.select([self.reply_r], [], [], left)
            if not ready:
                raise _Deadline()
            chunk = os.read(self.reply_r, 65536)
            if not chunk or len(self.buf) > 4_000_000:
                self.gone = True
                raise RemoteError("the candidate's process has exited")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except (ValueError, RecursionError):
            return {}
        return reply if type(reply) is dict else {}

    def setup(self):
        while True:
            reply = self.line()
            if reply.get("kind") == "setup":
                return reply.get("error")

    def call(self, name, args, kwargs):
        if self.gone:
            raise RemoteError("the candidate's process has exited")
        self.n += 1
        try:
            args_kwargs = encode(list(args)), encode(kwargs)
        except TypeError:
            self.unsupported = True
            raise
        request = {"n": self.n, "name": name, "args": args_kwargs[0], "kwargs": args_kwargs[1]}
        try:
            self.child.stdin.write(json.dumps(request).encode() + b"\n")
            self.child.stdin.flush()
        except OSError:
            self.gone = True
            raise RemoteError("the candidate's process has exited") from None
        while True:  # lines for another request (written ahead by the code) are skipped
            reply = self.line()
            if reply.get("n") == self.n and type(reply.get("n")) is int:
                break
        if not reply.get("ok"):
            self.memory = self.memory or reply.get("memory") is True
            # the candidate's own exception, as a built-in of that name (tests expect
            # ``ValueError`` for bad input): nothing but its name and message crosses
            cls = getattr(builtins, str(reply.get("exc_type")), None)
            if isinstance(cls, type) and issubclass(cls, Exception):
                raise cls(str(reply.get("exc_message"))[:1000])
            raise RemoteError(str(reply.get("error"))[:200])
        try:
            return decode(reply["value"])
        except (ValueError, KeyError, TypeError, IndexError, AttributeError, RecursionError):
            self.unsupported = True
            raise


def judge_here(tests, names, channel, result):
    """Run the whole test file in this process, ``names`` answered by the child."""

    def proxy(name):
        def call(*args, **kwargs):
            return channel.call(name, args, kwargs)

        call.__name__ = name
        return call

    namespace = {"__name__": "tests", **{name: proxy(name) for name in names}}
    outcomes, test_fns = [], []

    def attempt(run, line):
        try:
            run()
        except _Deadline:
            raise
        except BaseException as exc:  # noqa: BLE001 - a failing test, whatever it raised
            return f"line {line}: {type(exc).__name__}: {exc}"[:200]
        return None

    for node in ast.parse(tests).body:
        code = compile(ast.Module([node], []), "tests.py", "exec")
        error = attempt(lambda code=code: exec(code, namespace), node.lineno)
        is_fn = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        if is_fn and node.name.startswith("test_") and error is None:
            test_fns.append(node)
        elif error is not None or isinstance(node, ast.Assert):
            outcomes.append(error)

    def call_test(name):
        value = namespace[name]()
        if isinstance(value, COROUTINES):  # asyncio.iscoroutine's types, without its import
            import asyncio  # at use: it is a third of this process's start-up

            asyncio.run(value)

    for node in test_fns:
        outcomes.append(attempt(lambda name=node.name: call_test(name), node.lineno))
    result["n_tests"] = len(outcomes)
    result["n_failed"] = sum(o is not None for o in outcomes)
    result["failures"] = [o for o in outcomes if o is not None][:20]
    if channel.memory:
        result["error"] = "memory"


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

    def start():
        reply_r, reply_w = os.pipe()
        child = subprocess.Popen(
            [settings["python"], "-I", "-S", "sandbox_child.py", str(reply_w)],
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
        return child, reply_r

    child, reply_r = start()
    deadline = time.monotonic() + settings["timeout_s"]
    # Only HumanEval's check(candidate) form is judged here: other test files may mutate
    # arguments in place or catch the solution's own exception types, which do not cross the
    # process boundary; they run in the child and are counted as n_in_child.
    names = remote_names(settings["tests"]) if _humaneval_form(settings["tests"]) else None
    if names is not None:
        strict = True
        if _judged_here(settings["tests"], names, child, reply_r, deadline, strict):
            return None
        os.close(reply_r)  # a value that cannot cross: the file runs in a fresh child
        child, reply_r = start()
    try:
        child.stdin.write(json.dumps(items).encode() + b"\n")
        child.stdin.close()
    except OSError:
        pass
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


def _humaneval_form(tests):
    """HumanEval's ``def check(candidate)``: its values are plain, so it is always judged
    here, and a result that cannot cross (an always-equal object) is a failure."""
    return any(
        isinstance(n, ast.FunctionDef) and [a.arg for a in n.args.args] == ["candidate"]
        for n in ast.parse(tests).body
    )


def _judged_here(tests, names, child, reply_r, deadline, strict):
    """Print the verdict of the test file run in this process (``judge_here``; nothing in it
    came from the child but the typed results of calls) and say True; False, with nothing
    printed, when a value could not cross between the two (a class instance, a date) and
    ``strict`` is off: the caller then runs the file in a child as before."""
    result = {"n_tests": 0, "n_failed": 0, "n_in_child": 0, "error": None, "failures": []}
    result.update(timed_out=False, child_rc=None, judged_here=True)
    verdict_out, sys.stdout = sys.stdout, sys.stderr  # the tests' prints stay off the verdict
    channel = Channel(child, reply_r, deadline)
    try:
        child.stdin.write(b'{"serve": true}\n')
        child.stdin.flush()
        error = channel.setup()
        if error:
            result["error"] = error
        else:
            judge_here(tests, names, channel, result)
            if channel.unsupported and not strict:
                sys.stdout = verdict_out
                child.stdin.close()
                _descendants_killed(child)
                return False
    except _Deadline:
        result["timed_out"] = True
    except (RemoteError, OSError):
        result["error"] = "crash"
    try:
        child.stdin.close()
    except OSError:
        pass
    try:  # closed stdin ends the child's serve loop: let it exit before the kill
        rc = child.wait(timeout=max(0.1, min(1.0, deadline - time.monotonic())))
    except subprocess.TimeoutExpired:
        rc = None
    killed_rc = _descendants_killed(child)
    result["child_rc"] = killed_rc if rc is None else rc
    verdict_out.write(json.dumps(result) + "\n")
    verdict_out.flush()
    sys.stdout = verdict_out
    return True


main()
