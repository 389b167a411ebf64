"""The Redis per-vendor limit across processes, Retry-After pauses, and the task routes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid

import pytest

from monitor.celery import app
from tests.conftest import ROOT

REDIS_URL = os.environ.get("REDIS_URL", "")
needs_redis = pytest.mark.skipif(not REDIS_URL, reason="needs REDIS_URL (a real Redis)")


async def _hold_leases(url: str, vendor: str, limit: int, n: int, hold_s: float) -> None:
    """n concurrent requests through the limiter; each counts itself in flight in Redis and
    records the highest count it saw."""
    from redis.asyncio import Redis

    from monitor.ratelimit import VendorLimiter

    redis = Redis.from_url(url)
    limiter = VendorLimiter(redis, vendor, limit=limit, poll_s=0.005)

    async def one() -> None:
        async with limiter.lease(timeout_s=60):
            now = await redis.incr(f"{vendor}:now")
            await redis.zadd(f"{vendor}:peak", {"peak": now}, gt=True)  # atomic max
            await asyncio.sleep(hold_s)
            await redis.decr(f"{vendor}:now")
            await redis.incr(f"{vendor}:done")

    await asyncio.gather(*(one() for _ in range(n)))
    await redis.aclose()


@needs_redis
def test_the_limit_holds_across_two_processes():
    from redis import Redis

    vendor, limit = f"test-{uuid.uuid4().hex[:8]}", 3
    code = ("import asyncio, sys; from tests.test_ratelimit import _hold_leases; "
            "asyncio.run(_hold_leases(sys.argv[1], sys.argv[2], 3, 12, 0.05))")
    procs = [subprocess.Popen([sys.executable, "-c", code, REDIS_URL, vendor], cwd=ROOT)
             for _ in range(2)]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    redis = Redis.from_url(REDIS_URL)
    assert int(redis.get(f"{vendor}:done")) == 24
    assert redis.zscore(f"{vendor}:peak", "peak") == limit  # reached, never passed
    redis.delete(*[f"{vendor}:{k}" for k in ("now", "peak", "done")])


@needs_redis
def test_a_pause_from_one_client_holds_back_another_for_retry_after():
    from redis.asyncio import Redis

    from monitor.ratelimit import VendorLimiter

    vendor = f"test-{uuid.uuid4().hex[:8]}"

    async def scenario() -> float:
        a, b = Redis.from_url(REDIS_URL), Redis.from_url(REDIS_URL)
        await VendorLimiter(a, vendor, limit=5).pause(1.0)
        await VendorLimiter(a, vendor, limit=5).pause(0.2)  # a shorter pause never shortens
        t0 = time.monotonic()
        async with VendorLimiter(b, vendor, limit=5).lease():
            waited = time.monotonic() - t0
        await a.aclose()
        await b.aclose()
        return waited

    assert 0.85 <= asyncio.run(scenario()) < 2.0


@needs_redis
@pytest.mark.django_db
def test_a_429_with_retry_after_pauses_the_vendor_for_every_worker(demo_vendor_url):
    from redis import Redis

    from monitor.ratelimit import VendorLimiter, vendor_of
    from monitor.services.runs import create_run, execute_run
    from tests.test_runs import make_pair

    pair = make_pair(demo_vendor_url, fast_model="demo-ratelimit", suite="smoke", repeat=1)
    run = execute_run(run_id=create_run(pair=pair).id, cases_limit=1)
    assert run.samples.get(tier="fast").retry_after_s == 2.0
    key = VendorLimiter(None, vendor_of(demo_vendor_url), limit=1).pause_key  # type: ignore[arg-type]
    assert 0 < Redis.from_url(REDIS_URL).pttl(key) <= 2000


@pytest.mark.parametrize("name,args,kwargs,queue", [
    ("monitor.tasks.probe_pair_task", ["p"], {}, "probes"),
    ("monitor.tasks.probe_pair_task", ["p", "audit"], {}, "audits"),
    ("monitor.tasks.execute_run_task", [1], {"kind": "probe"}, "probes"),
    ("monitor.tasks.execute_run_task", [1], {"kind": "audit"}, "audits"),
    ("monitor.tasks.notify_task", [1], {}, "reports"),
    ("monitor.tasks.weekly_report_task", [], {}, "reports"),
    ("monitor.tasks.prune_payloads_task", [], {}, "reports"),
])
def test_each_task_goes_to_its_queue(name, args, kwargs, queue):
    route = app.amqp.router.route({}, name, args, kwargs)
    assert route["queue"].name == queue
