"""The audit log of configuration changes: who changed which row, when, from where, and the
fields that changed (old and new), as ``ConfigChange`` rows.

Written by the admin (``monitor.admin.AuditedAdmin``), by ``apply_config`` and by the pair
page's maintenance form. Django's own admin ``LogEntry`` keeps only a message; a dispute over
an SLA needs the values. Values are what the row stores: endpoints and channels store the
NAMES of environment variables, never a key or a URL with a token, and any field whose name
says secret, password, token or key is recorded as changed without its values all the same.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from monitor.models import ConfigChange

REDACT = ("secret", "password", "token", "api_key")  # ``api_key_env`` holds a name: kept
NAME_FIELDS = ("api_key_env", "secret_env")
# Kept up to date by the system, not by a person: not configuration.
OPERATIONAL = {
    "date_changed",
    "last_run_at",
    "total_run_count",
    "last_error",
    "consecutive_failures",
    "disabled_by_failures",
}


def snapshot(obj: models.Model | None) -> dict[str, Any]:
    """The row's concrete fields and many-to-many names as plain JSON values ({} for None)."""
    if obj is None or obj.pk is None:
        return {}
    out: dict[str, Any] = {}
    for f in obj._meta.concrete_fields:
        if f.name in OPERATIONAL:
            continue
        if f.is_relation:  # by name, as a person reads it (ids say nothing in a dispute)
            related = getattr(obj, f.name)
            out[f.name] = str(related) if related is not None else None
            continue
        value = getattr(obj, f.attname)
        out[f.name] = (
            value
            if isinstance(value, (str, int, float, bool, type(None), list, dict))
            else str(value)
        )
    for f in obj._meta.many_to_many:
        out[f.name] = sorted(str(x) for x in getattr(obj, f.name).all())
    return out


def _redacted(field: str) -> bool:
    return field not in NAME_FIELDS and any(word in field.lower() for word in REDACT)


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """field → [old, new] for every field whose value differs (secret-like ones as "***")."""
    out = {}
    for field in sorted(set(before) | set(after)):
        old, new = before.get(field), after.get(field)
        if old != new:
            out[field] = ["***", "***"] if _redacted(field) else [old, new]
    return out


def record(
    *,
    obj: models.Model,
    before: dict[str, Any],
    after: dict[str, Any],
    source: str,
    user=None,
    action: str | None = None,
) -> ConfigChange | None:
    """Store one change (nothing when an update changed no field)."""
    changes = diff(before, after)
    action = action or ("added" if not before else "deleted" if not after else "changed")
    if action == "changed" and not changes:
        return None
    who = user if user is not None and getattr(user, "is_authenticated", False) else None
    return ConfigChange.objects.create(
        user=who,
        username=who.get_username() if who else "",
        source=source[:200],
        action=action,
        model=obj._meta.model_name,
        object_id=str(before.get("id") or obj.pk),
        object_repr=str(obj)[:200],
        diff=changes,
    )
