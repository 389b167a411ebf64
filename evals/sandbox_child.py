"""The child: imports the generated code and evaluates what the judge asks, nothing more.

Started by ``sandbox_judge.py`` (read its docstring) as ``python -I -S sandbox_child.py <fd>``:
the items come on stdin, one JSON reply per item goes to fd ``<fd>``. The code sees the standard
library only: ``-S`` keeps the interpreter's ``site-packages`` and the ``.pth`` files there out
of the child (an installation's ``.pth`` may import packages at every start: a tenth of a
second per evaluation was seen), and the builtins ``site`` adds (``exit``, ``quit``, ``help``,
``copyright``) are added here instead. Everything here can be
tampered with by the code it imports, which is why values travel in a typed encoding made by
functions bound before the import, and the judge compares them, not this process.
"""

import json
import os
import site
import sys
import traceback
import types

site.setquit()
site.setcopyright()
site.sethelper()

_type, _len, _list, _sorted, _repr = type, len, list, sorted, repr
_SIMPLE = {_type(None): "none", bool: "bool", int: "int", str: "str"}
MAX_ITEMS = 100_000


def encode(value, depth=0):
    """A JSON-able ``[tag, payload]``; exact types only, anything else is ``["other", name]``."""
    kind = _type(value)
    if depth > 50:
        return ["other", "too deep"]
    if kind in _SIMPLE:
        return [_SIMPLE[kind], None if value is None else value]
    if kind is float:
        return ["float", _repr(value)]
    if kind is bytes:
        return ["bytes", value.hex()]
    if kind in (list, tuple, set, frozenset):
        if _len(value) > MAX_ITEMS:
            return ["other", "too long"]
        items = _list(value)
        if kind in (set, frozenset):
            items = _sorted(items, key=_repr)
        return [kind.__name__, [encode(v, depth + 1) for v in items]]
    if kind is dict:
        return ["dict", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]]
    return ["other", f"{kind.__module__}.{kind.__qualname__}"[:100]]


def decode(enc):
    """An argument from the judge (its ``encode``); the judge is trusted, the tags plain."""
    tag, payload = enc
    if tag == "float":
        return float(payload)
    if tag == "bytes":
        return bytes.fromhex(payload)
    if tag in ("list", "tuple", "set", "frozenset"):
        return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](
            decode(e) for e in payload
        )
    if tag == "dict":
        return {decode(k): decode(v) for k, v in payload}
    return payload


def serve(namespace, stdin, reply):
    """Answer the judge's calls until it closes our stdin: the judge runs the tests."""
    for line in stdin:
        request = json.loads(line)
        n = request["n"]
        try:
            value = namespace[request["name"]](
                *decode(request["args"]), **decode(request["kwargs"])
            )
            reply(n=n, ok=True, value=encode(value))
        except BaseException as exc:
            traceback.print_exception(exc, limit=3, file=sys.stderr)
            reply(
                n=n,
                ok=False,
                error=f"{_type(exc).__name__}: {exc}"[:200],
                exc_type=_type(exc).__name__,
                exc_message=str(exc)[:1000],
                memory=isinstance(exc, MemoryError),
            )


def main():
    fd = int(sys.argv[1])
    stdin = sys.stdin
    items = json.loads(stdin.readline())
    if _type(items) is not dict:
        stdin.close()
    write, dumps = os.write, json.dumps

    def reply(**fields):
        write(fd, (dumps(fields) + "\n").encode())

    def failed(i, exc, line):
        traceback.print_exception(exc, limit=3, file=sys.stderr)
        message = f"line {line}: {_type(exc).__name__}: {exc}"[:200]
        reply(i=i, n=i, ok=False, error=message, memory=isinstance(exc, MemoryError))

    with open("solution.py", encoding="utf-8") as f:
        source = f.read()
    try:
        code = compile(source, "solution.py", "exec")
    except (SyntaxError, ValueError) as exc:
        print(f"{_type(exc).__name__}: {exc}", file=sys.stderr)
        return reply(kind="setup", error="syntax")
    module = types.ModuleType("solution")
    module.__file__ = "solution.py"
    sys.modules["solution"] = module
    try:
        exec(code, module.__dict__)
    except BaseException as exc:
        traceback.print_exception(exc, limit=5, file=sys.stderr)
        return reply(kind="setup", error="memory" if isinstance(exc, MemoryError) else "crash")
    reply(kind="setup", error=None)
    if _type(items) is dict:
        return serve(module.__dict__, stdin, reply)

    namespace = dict(module.__dict__)
    namespace["__name__"] = "tests"
    test_fns = []
    for i, item in enumerate(items):
        try:
            if item["kind"] == "value":
                value = eval(compile(item["src"], "tests.py", "eval"), namespace)
                reply(i=i, ok=True, value=encode(value))
                continue
            exec(compile(item["src"], "tests.py", "exec"), namespace)
        except BaseException as exc:
            failed(i, exc, item["line"])
            continue
        if item["kind"] == "test_fn":
            test_fns.append((i, item))
        else:
            reply(i=i, ok=True)
    for i, item in test_fns:
        try:
            value = namespace[item["name"]]()
            if isinstance(value, types.CoroutineType):
                import asyncio  # at use: most files have no coroutine, and it is slow to import

                asyncio.run(value)
        except BaseException as exc:
            failed(i, exc, item["line"])
        else:
            reply(i=i, ok=True)


main()
