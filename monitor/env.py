"""Typed readers of environment variables that fail loudly on a bad value.

A typo in a deployment's environment should stop the process at start-up with the variable's
name, not surface later as a strange default (healthchecks' settings do the same).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


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
        raise EnvError(
            f"{name} contains a control character (CR, LF, NUL or another); set it to the key alone"
        )
    return raw or None


def env_pair(name: str) -> tuple[str, str] | None:
    """Two comma-separated values (``HTTP_X_FORWARDED_PROTO,https``), or ``None`` if unset."""
    parts = env_list(name)
    if not parts:
        return None
    if len(parts) != 2:
        raise EnvError(
            f"{name} must be two values separated by a comma, e.g. HTTP_X_FORWARDED_PROTO,https"
        )
    return parts[0], parts[1]


MIN_SECRET_KEY_CHARS = 50  # Django's own check (security.W009) asks for this much
_PUBLIC_KEYS = ("change-me", "insecure-dev-key-set-TIERWATCH_SECRET_KEY-in-production")


def secret_key(name: str, keep: Path, *, debug: bool) -> str:
    """Django's SECRET_KEY from the variable ``name``; refused (naming it, never showing it)
    when DEBUG is off and it is short or a value once published as a default.

    Unset, a random key is made once and kept in ``keep`` (mode 0600, created atomically so
    concurrent processes agree). That keeps ``./run demo`` and the tests working with no
    set-up and no public key, while a deployment that shares sessions across hosts sets the
    variable (docker-compose.yml requires it)."""
    value = env_str(name).strip()
    if value:
        if not debug and (
            len(value) < MIN_SECRET_KEY_CHARS
            or value in _PUBLIC_KEYS
            or value.startswith("django-insecure-")
        ):
            raise EnvError(
                f"{name} is too weak for DEBUG off: use a random value of at least "
                f'{MIN_SECRET_KEY_CHARS} characters (python -c "import secrets; '
                'print(secrets.token_urlsafe(64))")'
            )
        return value
    try:
        fd = os.open(keep, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return keep.read_text().strip()
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(64))
    return keep.read_text().strip()
