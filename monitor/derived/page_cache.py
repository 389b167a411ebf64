"""What a pair's pages compute from its finished runs (plotly figure JSON, the speed page's
bootstrap report, the overview's cells), kept in Django's cache until the pair's data changes.

Why: building the figures and the bootstrap costs far more CPU per view than reading a cached
entry, while the data behind them changes once per run (docs/benchmarks.md, "Scale"). Why the
cache and not a table: the entries are derived, rebuilt on a miss in one view, and never need a
migration or a backup; Redis (or files, without REDIS_URL) is shared by the web and worker
processes.

A key holds the pair's **data version**: a digest of the pair's and its endpoints' fields. One
of the pair's fields is ``Pair.generation``, bumped in the same transaction as every
``Run.summary`` write (``RunQuerySet.merge_summary``), every run's end (``RunQuerySet.end``),
every derived-data write (``monitor.derived.run_end``) and every run deletion; the other fields
cover a changed claim, SLO or name, and a new pair under an id used before (SQLite reuses the
highest id after a delete). So a version is read with the pair row itself — no query, no
token held in the cache — and a reader that sees new data sees a new version. The database
name and ``CODE_VERSION`` (bump it when a cached builder's output or an entry's shape changes)
complete the key.

Every viewer who may open a page sees the same page (``monitor.selectors.get_pair_for_user``:
no per-user filtering; the permission check runs before the cache is read), so nothing about
a user is in the key or the value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache import cache
from django.db import connection
from django.db.models import Model

CODE_VERSION = 6  # 6: overview cells carry the three answers (overview_cells.Measured)
T = TypeVar("T")


def _fields(obj: Model | None) -> list[tuple[str, Any]]:
    if obj is None:
        return []
    return [(f.attname, getattr(obj, f.attname)) for f in obj._meta.concrete_fields]


def digest(pair: Model) -> str:
    """The pair's and its endpoints' fields, hashed: a changed claim, SLO or name, or another
    pair under an id used before (SQLite reuses the highest id after a delete)."""
    endpoints = [getattr(pair, name, None) for name in ("fast", "base")]
    fields = repr([_fields(pair), *map(_fields, endpoints)])
    return hashlib.sha1(fields.encode()).hexdigest()[:16]


def data_version(pair: Model) -> str:
    """The pair's data version (module docstring), from the pair row as it was read: a view
    reads its pair once per request, so every entry of the request shares one version."""
    return digest(pair)


def _key(page: str, pair_id: int, version: str, params: Any = ()) -> str:
    raw = f"{CODE_VERSION}|{connection.settings_dict['NAME']}|{page}|{pair_id}|{version}|{params!r}"
    return f"page:{page}:{pair_id}:{hashlib.sha1(raw.encode()).hexdigest()}"


def cached_many(
    page: str,
    versions: dict[int, str],
    build: Callable[[list[int]], dict[int, T]],
    fresh: Callable[[T], bool] = lambda value: True,
) -> dict[int, T]:
    """``build(pair_ids)`` for the pairs whose entry is missing, under a version the caller
    gives per pair, or no longer ``fresh``; one cache read and at most one write for all."""
    keys = {pair_id: _key(page, pair_id, version) for pair_id, version in versions.items()}
    found = cache.get_many(list(keys.values()))
    values = {
        pair_id: found[key] for pair_id, key in keys.items() if key in found and fresh(found[key])
    }
    missing = [pair_id for pair_id in keys if pair_id not in values]
    if missing:
        built = build(missing)
        cache.set_many({keys[pair_id]: built[pair_id] for pair_id in missing})
        values.update(built)
    return values


def cached(page: str, pair: Model, build: Callable[[], T], **params: Any) -> T:
    """``build()`` for this page of this pair and these parameters, from the cache when the
    pair's data version is unchanged. The version is read before ``build`` reads any data, so
    a run finishing meanwhile leaves at worst a newer value under an older key."""
    key = _key(page, pair.pk, data_version(pair), sorted(params.items()))
    value = cache.get(key)
    if value is None:
        value = build()
        cache.set(key, value)
    return value
