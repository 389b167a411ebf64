"""Typed readers of environment variables that fail loudly on a bad value.

A typo in a deployment's environment should stop the process at start-up with the variable's
name, not surface later as a strange default (healthchecks' settings do the same).
"""

from __future__ import annotations

import os


class EnvError(ValueError):
    pass


def env_str(name: str, default: str = "") -> str:
    """An empty value counts as unset, like in the other readers."""
    return os.environ.get(name) or default


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise EnvError(f"{name}={raw!r} is not a boolean (use true/false, 1/0, yes/no, on/off)")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not an integer") from None


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r} is not a number") from None


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default or [])
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_secret(name: str) -> str | None:
    """An API key: surrounding whitespace stripped (a pasted key often ends in a newline);
    ``None`` when unset or blank. A key with a control character inside (CR, LF, NUL or any
    other C0, or DEL) would split or smuggle an HTTP header, so it is refused with the
    variable's name and never its value."""
    raw = (os.environ.get(name) or "").strip()
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in raw):
        raise EnvError(f"{name} contains a control character (CR, LF, NUL or another); "
                       "set it to the key alone")
    return raw or None
