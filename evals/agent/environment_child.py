"""An agent task's environment, inside the sandbox: BFCL's classes, driven one JSON line at a time.

Standard library only; started as ``python -I environment_child.py`` in the sandbox's work dir
(:mod:`evals.agent.environment` copies it there beside BFCL's ``func_source_code`` modules, read
from the wheel). It reads its settings (the classes, the task's initial state, the limits) as
the first line of stdin, puts the limits on itself, imports BFCL's modules (definitions only),
and drops to its own uid when it is root before any instance is made or any call runs. Then,
per request line, one reply line on the protocol channel:

- ``{"op": "call", "set": s, "method": m, "args": [...], "kwargs": {...}}`` → ``{"result": text}``
  executed as BFCL's ``execute_multi_turn_func_call`` does (method name → the instance of the
  last involved class that has it; the same refused names; an exception becomes
  ``"Error during execution: ..."``; a dict result JSON, anything else ``str``), but called with
  the parsed arguments, never ``eval`` of a string;
- ``{"op": "state", "set": s}`` → ``{"state": {class: public attributes as JSON}}``;
- ``{"op": "compare", "a": s1, "b": s2}`` → ``{"valid": bool, "differences": {...}}``, BFCL's
  ``state_checker``: every public attribute of each ``b`` instance equal (``==``) to ``a``'s.

A *set* is one group of instances (``"model"``, ``"truth"``) made from the initial state on first
use, so the score plays the model's calls and the ground truth's side by side as BFCL's checker
does. A result over ``result_chars``, a MemoryError, or a reply that cannot be built is
``{"error": kind, "detail": ...}``: the caller records an environment error. Whatever BFCL's code
prints goes to stderr (our stdout is the protocol channel alone).
"""

import copy
import ctypes
import datetime
import inspect
import json
import os
import resource
import signal
import sys
import types
from typing import Any

PR_SET_PDEATHSIG = 1
# BFCL refuses these method names before it evaluates a call (multi_turn_utils)
REFUSED = ("kill", "exit", "quit", "remove", "unlink", "popen", "Popen", "run")
STATELESS = ("MathAPI",)  # BFCL's STATELESS_CLASSES: no initial state loaded
REPR_CHARS = 2000


def _mpmath_stand_in() -> types.ModuleType:
    """``mpmath`` is not in the sandbox's interpreter; MathAPI uses only ``mp.dps`` and ``log``.
    The stand-in computes the logarithm with ``decimal`` at the precision asked, and prints as
    mpmath does (``mpf('2.0')``); the model's calls and the ground truth's both use it."""
    import decimal

    class Mpf:
        def __init__(self, value: Any) -> None:
            self.value = value

        def __truediv__(self, other: Any) -> Any:
            with decimal.localcontext() as ctx:
                ctx.prec = module.mp.dps
                return Mpf(self.value / other.value)

        def __repr__(self) -> str:
            return f"mpf('{self.value}')"

        __str__ = __repr__

    def log(value: Any) -> Any:
        with decimal.localcontext() as ctx:
            ctx.prec = module.mp.dps
            return Mpf(decimal.Decimal(str(value)).ln())

    module = types.ModuleType("mpmath")
    module.__dict__.update(mp=types.SimpleNamespace(dps=15), log=log)
    return module


def _limit(settings: dict[str, Any]) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    for name, (soft, hard) in settings["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))


def _drop(settings: dict[str, Any]) -> None:
    if os.geteuid() == 0 and settings.get("drop_to") is not None:
        os.setgroups([])
        os.setgid(settings["drop_to"])
        os.setuid(settings["drop_to"])


def _encode(value: Any, depth: int = 0, ancestors: tuple[int, ...] = ()) -> Any:
    """A value as JSON for the state view: objects by their public attributes, cycles cut."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else repr(value)
    if depth > 12 or id(value) in ancestors:
        return f"<{type(value).__name__}>"
    inner = (*ancestors, id(value))
    if isinstance(value, dict):
        return {str(k): _encode(v, depth + 1, inner) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_encode(v, depth + 1, inner) for v in value]
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    attrs = getattr(value, "__dict__", None)
    if isinstance(attrs, dict):
        out: dict[str, Any] = {"__class__": type(value).__name__}
        out.update(
            {k: _encode(v, depth + 1, inner) for k, v in attrs.items() if not k.startswith("_")}
        )
        return out
    return repr(value)[:REPR_CHARS]


def _public(instance: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(instance).items() if not k.startswith("_")}


class Environment:
    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.sets: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}

    def instances(self, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        if name not in self.sets:
            instances: dict[str, Any] = {}
            methods: dict[str, Any] = {}
            for class_name, module_name in self.settings["classes"].items():
                module = __import__(module_name, fromlist=[class_name])
                instance = getattr(module, class_name)()
                if class_name not in STATELESS:
                    config = self.settings["initial_config"].get(class_name, {})
                    long_context = self.settings["long_context"]
                    instance._load_scenario(copy.deepcopy(config), long_context=long_context)
                instances[class_name] = instance
                for method_name, _ in inspect.getmembers(instance, predicate=inspect.ismethod):
                    if not method_name.startswith("_"):
                        methods[method_name] = instance
            self.sets[name] = (instances, methods)
        return self.sets[name]

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        _, methods = self.instances(request["set"])
        name = request["method"]
        try:
            if name in REFUSED:
                raise Exception(f"Function call {name} is not allowed.")
            if name not in methods:
                raise NameError(f"name '{name}' is not defined")
            result = getattr(methods[name], name)(*request["args"], **request["kwargs"])
            if isinstance(result, dict):
                try:
                    result = json.dumps(result)
                except Exception:
                    result = str(result)
            elif not isinstance(result, str):
                result = str(result)
        except MemoryError:
            raise
        except Exception as exc:
            result = f"Error during execution: {exc}"
        if len(result) > self.settings["result_chars"]:
            cap = self.settings["result_chars"]
            return {"error": "result_too_large", "detail": f"{len(result)} characters, over {cap}"}
        return {"result": result}

    def state(self, request: dict[str, Any]) -> dict[str, Any]:
        instances, _ = self.instances(request["set"])
        state = {
            name: _encode(_public(instance))
            for name, instance in instances.items()
            if name not in STATELESS
        }
        text = json.dumps(state)
        if len(text) > self.settings["state_chars"]:
            return {"state": {"truncated": True, "chars": len(text)}}
        return {"state": state}

    def compare(self, request: dict[str, Any]) -> dict[str, Any]:
        model, _ = self.instances(request["a"])
        truth, _ = self.instances(request["b"])
        differences: dict[str, dict[str, Any]] = {}
        for class_name, expected in truth.items():
            for attr, want in _public(expected).items():
                got = getattr(model[class_name], attr, None)
                if got != want:
                    differences.setdefault(class_name, {})[attr] = {
                        "model": repr(got)[:REPR_CHARS],
                        "ground_truth": repr(want)[:REPR_CHARS],
                    }
        return {"valid": not differences, "differences": differences}


def main() -> None:
    channel = os.fdopen(os.dup(1), "w", encoding="ascii")
    os.dup2(2, 1)  # BFCL's prints go to stderr, never onto the protocol channel
    sys.stdout = sys.stderr
    settings = json.loads(sys.stdin.readline())
    _limit(settings)
    sys.path.insert(0, os.getcwd())
    try:
        import mpmath  # noqa: F401
    except ImportError:
        sys.modules["mpmath"] = _mpmath_stand_in()
    # BFCL's modules hold definitions only: imported before the uid is dropped (the interpreter's
    # files may not be readable by it outside bubblewrap); every call runs after
    for module_name in settings["classes"].values():
        __import__(module_name)
    _drop(settings)
    env = Environment(settings)
    ops = {"call": env.call, "state": env.state, "compare": env.compare}
    for line in sys.stdin:
        try:
            request = json.loads(line)
            reply = ops[request["op"]](request)
        except MemoryError:
            reply = {"error": "memory", "detail": "the call ran out of its memory limit"}
        except Exception as exc:
            reply = {"error": "environment", "detail": f"{type(exc).__name__}: {exc}"[:500]}
        try:
            text = json.dumps(reply)  # ensure_ascii: every reply is one ASCII line
        except (TypeError, ValueError, MemoryError) as exc:
            text = json.dumps({"error": "environment", "detail": f"reply: {exc}"[:500]})
        channel.write(text + "\n")
        channel.flush()


if __name__ == "__main__":
    main()
