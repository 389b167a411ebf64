"""What a pair's pages compute from its finished runs (plotly figure JSON, the speed page's
bootstrap report), kept in Django's cache until the pair's data changes.

Why: building the figures and the bootstrap is 100–250 ms of CPU per view while the data behind
them changes once per run (docs/benchmarks.md, "Scale"). Why the cache and not a table: the
entries are derived, rebuilt on a miss in one view, and never need a migration or a backup;
Redis (or files, without REDIS_URL) is shared by the web and worker processes.

A key holds the pair's **data version**, read fresh on every view, so a new run invalidates by
itself and no figure older than the newest run is ever served:

- the pair's finished runs: newest id, count and newest ``finished_at`` (one indexed aggregate
  query) — a run that finishes, fails, is reaped or deleted changes it;
- a per-pair generation token that ``touch`` replaces after every ``Run.summary`` write
  (``RunQuerySet.merge_summary``, on commit): a verdict or drift block written after the run
  finished. A lost token (eviction, restart) is replaced by a new random one, never reused;
- a digest of the pair's and its endpoints' fields (a changed claim, SLO or name);
- the database name and ``CODE_VERSION`` (bump it when a cached builder's output changes).

Every viewer who may open a page sees the same page (``monitor.selectors.get_pair_for_user``:
no per-user filtering; the permission check runs before the cache is read), so nothing about
a user is in the key or the value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from uuid import uuid4

from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Count, Max, Model

CODE_VERSION = 4
T = TypeVar("T")


def _token_key(pair_id: int) -> str:
    return f"pairgen:{connection.settings_dict['NAME']}:{pair_id}"


def touch(pair_id: int) -> None:
    """A new generation for the pair's cached pages, once the current transaction commits."""
    transaction.on_commit(lambda: cache.set(_token_key(pair_id), uuid4().hex, timeout=None))


def generations(pair_ids: Iterable[int]) -> dict[int, str]:
    """Pair id → its current generation token (one cache round trip for all of them); a lost
    one is replaced by a new random token (set, not added: a ``touch`` racing with it leaves
    some new token either way, never an old one)."""
    keys = {_token_key(pair_id): pair_id for pair_id in pair_ids}
    found = cache.get_many(list(keys))
    lost = {key: uuid4().hex for key in keys if key not in found}
    if lost:
        cache.set_many(lost, timeout=None)
    return {keys[key]: token for key, token in {**found, **lost}.items()}


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
    """The pair's data version (module docstring): one query and one cache read, once per pair
    object (a view reads its pair once per request, so every entry of the request shares it)."""
    known = getattr(pair, "_data_version", None)
    if known is not None:
        return known
    runs = pair.runs.filter(finished_at__isnull=False).aggregate(
        newest=Max("id"), n=Count("id"), finished=Max("finished_at")
    )
    token = generations([pair.pk])[pair.pk]
    pair._data_version = f"{runs['newest']}:{runs['n']}:{runs['finished']}:{token}:{digest(pair)}"
    return pair._data_version


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
