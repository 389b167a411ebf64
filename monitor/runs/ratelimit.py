"""A per-vendor concurrency limit shared by every worker process on every machine, in Redis.

Leases in a sorted set (no Lua): a member per request in flight, scored by the time its lease
expires. To acquire, a client drops expired leases and, if fewer than ``limit`` remain, adds its
own, all inside one optimistic transaction (WATCH/MULTI/EXEC): when another client changed the
set in between, EXEC fails and the client tries again. A worker that dies mid-request leaks its
lease only until the lease expires (``lease_s``), never forever.

A 429 with ``Retry-After`` pauses the whole vendor: ``pause`` sets a key that expires after the
given seconds (only ever lengthened), and ``acquire`` waits while it exists, in every worker.

The vendor is the endpoint's host (``vendor_of``): two endpoints on one API share its limit.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

from redis import WatchError
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

log = logging.getLogger(__name__)
PREFIX = "tierwatch:vendor"
REDIS_DOWN = (RedisConnectionError, RedisTimeoutError, OSError)


def vendor_of(base_url: str) -> str:
    return urlsplit(base_url).netloc.lower() or base_url


class VendorLimiter:
    def __init__(
        self, redis: Redis, vendor: str, *, limit: int, lease_s: float = 300.0, poll_s: float = 0.02
    ) -> None:
        if limit < 1:
            raise ValueError(f"vendor {vendor!r}: limit must be ≥ 1, got {limit}")
        self.redis, self.vendor, self.limit = redis, vendor, limit
        self.lease_s, self.poll_s = lease_s, poll_s
        self.leases = f"{PREFIX}:{vendor}:leases"
        self.pause_key = f"{PREFIX}:{vendor}:pause"

    async def _try_acquire(self, token: str) -> bool:
        now = time.time()
        async with self.redis.pipeline(transaction=True) as pipe:
            try:
                await pipe.watch(self.leases)
                await pipe.zremrangebyscore(self.leases, "-inf", now)
                if await pipe.zcard(self.leases) >= self.limit:
                    await pipe.unwatch()
                    return False
                pipe.multi()
                pipe.zadd(self.leases, {token: now + self.lease_s})
                pipe.expire(self.leases, int(self.lease_s) + 1)
                await pipe.execute()
                return True
            except WatchError:
                return False

    async def paused_for(self) -> float:
        ms = await self.redis.pttl(self.pause_key)
        return ms / 1000 if ms and ms > 0 else 0.0

    async def acquire(self, timeout_s: float = 600.0) -> str:
        """A lease token; waits while the vendor is paused or at its limit."""
        token, deadline = uuid.uuid4().hex, time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pause = await self.paused_for()
            if pause:
                await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                continue
            if await self._try_acquire(token):
                return token
            await asyncio.sleep(self.poll_s)
        raise TimeoutError(
            f"vendor {self.vendor}: no lease within {timeout_s:.0f} s (limit {self.limit})"
        )

    async def release(self, token: str) -> None:
        await self.redis.zrem(self.leases, token)

    @asynccontextmanager
    async def lease(self, timeout_s: float = 600.0):
        """A lease for one request. Fails open: with Redis unreachable (restarting, down) the
        request goes without a lease and the limit is not enforced until Redis is back: a
        monitor that stops measuring because its limiter is down would be silent in the worst
        way, and the vendor's own 429s still count."""
        try:
            token: str | None = await self.acquire(timeout_s)
        except REDIS_DOWN as exc:
            log.warning(
                "vendor limit for %s not enforced: Redis unreachable (%s)",
                self.vendor,
                type(exc).__name__,
            )
            token = None
        try:
            yield token
        finally:
            if token is not None:
                try:
                    await self.release(token)
                except REDIS_DOWN:  # the lease expires by itself (lease_s)
                    pass

    async def pause(self, seconds: float) -> None:
        """Honour a Retry-After: no new request to this vendor for ``seconds`` from any worker
        (an existing longer pause is kept)."""
        ms = int(seconds * 1000)
        if ms <= 0:
            return
        if not await self.redis.set(self.pause_key, "1", px=ms, nx=True):
            await self.redis.pexpire(self.pause_key, ms, gt=True)

    async def in_flight(self) -> int:
        await self.redis.zremrangebyscore(self.leases, "-inf", time.time())
        return int(await self.redis.zcard(self.leases))


DEFAULT_PAUSE_S = 5.0  # a 429 without Retry-After


class RunGate:
    """The limiters of one run's endpoints, made inside the run's event loop: ``gate(tier)``
    for ``evals.plan.execute_plan`` and ``after(tier, record)`` to honour a 429. Every kind of
    run takes its leases here (probes, audits and load probes alike), so the vendor limit is
    one budget for all of them."""

    @classmethod
    def from_settings(cls, base_urls: dict[str, str]) -> RunGate | None:
        """The gate with ``REDIS_URL`` set, limited to ``TIERWATCH_VENDOR_CONCURRENCY``;
        None without Redis (one process, nothing to share)."""
        from django.conf import settings  # here: plain processes import this module too

        if not settings.REDIS_URL:
            return None
        return cls(settings.REDIS_URL, base_urls, limit=settings.TIERWATCH_VENDOR_CONCURRENCY)

    def __init__(self, redis_url: str, base_urls: dict[str, str], *, limit: int) -> None:
        self.redis = Redis.from_url(redis_url)
        self.limiters = {
            tier: VendorLimiter(self.redis, vendor_of(url), limit=limit)
            for tier, url in base_urls.items()
        }

    def gate(self, tier: str):
        return self.limiters[tier].lease()

    async def after(self, tier: str, record) -> None:
        if record.error_class == "rate_limited":
            try:
                await self.limiters[tier].pause(record.retry_after_s or DEFAULT_PAUSE_S)
            except REDIS_DOWN:  # fails open, as ``lease`` does
                log.warning("vendor pause not stored: Redis unreachable")

    async def close(self) -> None:
        await self.redis.aclose()
