"""The Redis per-vendor limit across processes, Retry-After pauses, and the task routes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest

from monitor.celery import app
from tests.support import ROOT

REDIS_URL = os.environ.get("REDIS_URL", "")
needs_redis = pytest.mark.skipif(not REDIS_URL, reason="needs REDIS_URL (a real Redis)")


async def _hold_leases(url: str, vendor: str, limit: int, n: int, hold_s: float) -> None:
    """n concurrent requests through the limiter; each counts itself in flight in Redis and
    records the highest count it saw."""
    from redis.asyncio import Redis

    from monitor.runs.ratelimit import VendorLimiter

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
    code = (
        "import asyncio, sys; from tests.monitor.test_ratelimit import _hold_leases; "
        "asyncio.run(_hold_leases(sys.argv[1], sys.argv[2], 3, 12, 0.05))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, REDIS_URL, vendor], cwd=ROOT)
        for _ in range(2)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    redis = Redis.from_url(REDIS_URL)
    assert int(redis.get(f"{vendor}:done")) == 24
    assert redis.zscore(f"{vendor}:peak", "peak") == limit  # reached, never passed
    redis.delete(*[f"{vendor}:{k}" for k in ("now", "peak", "done")])


@needs_redis
@pytest.mark.xdist_group("serial")  # a wait measured against a 1 s pause
def test_a_pause_from_one_client_holds_back_another_for_retry_after():
    from redis.asyncio import Redis

    from monitor.runs.ratelimit import VendorLimiter

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
@pytest.mark.xdist_group("serial")  # the pause is watched within its 2 s
@pytest.mark.django_db(transaction=True)  # the run executes in a thread, on its own connection
def test_a_429_with_retry_after_pauses_the_vendor_for_every_worker(demo_vendor_url):
    from redis import Redis

    from monitor.models import Run  # here: the module is imported by plain processes too
    from monitor.runs.pipeline import execute_run
    from monitor.runs.ratelimit import VendorLimiter, vendor_of
    from monitor.runs.steps import create_run
    from tests.factories import vendor_pair

    pair = vendor_pair(demo_vendor_url, fast_model="demo-ratelimit", suite="smoke", repeat=1)
    run_id = create_run(pair=pair).id
    key = VendorLimiter(None, vendor_of(demo_vendor_url), limit=1).pause_key  # type: ignore[arg-type]
    redis, seen = Redis.from_url(REDIS_URL), []
    # The pause lives 2 s (the vendor's Retry-After): watch for it while the run goes on, since
    # under load the run may finish after it has expired again.
    thread = threading.Thread(target=execute_run, kwargs={"run_id": run_id, "cases_limit": 1})
    thread.start()
    while thread.is_alive():
        seen.append(redis.pttl(key))
        time.sleep(0.02)
    thread.join()
    assert Run.objects.get(id=run_id).samples.get(tier="fast").retry_after_s == 2.0
    assert any(0 < ms <= 2000 for ms in seen)


@needs_redis
@pytest.mark.django_db
def test_a_load_probe_takes_its_leases_from_the_shared_vendor_limit(demo_vendor_url, settings):
    """Another worker holds one of the vendor's two leases: a load probe asking for 4 in flight
    reaches 1 (without the limiter, all 4 would enter at once), and gives every lease back."""
    from redis import Redis
    from redis.asyncio import Redis as AsyncRedis

    from monitor.runs.load import run_load_probe
    from monitor.runs.ratelimit import VendorLimiter, vendor_of
    from tests.factories import vendor_pair

    settings.TIERWATCH_VENDOR_CONCURRENCY = 2
    vendor = vendor_of(demo_vendor_url)
    leases = VendorLimiter(None, vendor, limit=2).leases  # type: ignore[arg-type]
    Redis.from_url(REDIS_URL).delete(leases)

    async def other_worker(action, token=None):
        redis = AsyncRedis.from_url(REDIS_URL)
        limiter = VendorLimiter(redis, vendor, limit=2)
        try:
            return await (limiter.acquire(5) if action == "hold" else limiter.release(token))
        finally:
            await redis.aclose()

    held = asyncio.run(other_worker("hold"))
    try:
        pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=1)
        run = run_load_probe(pair=pair, concurrency_levels=(4,), requests_per_level=4)
    finally:
        asyncio.run(other_worker("release", held))
    assert run.status == "done", run.error
    for tier in ("fast", "base"):
        block = run.summary["load"]["4"][tier]
        assert block["n_ok"] == 4 and block["in_flight_max"] == 1
    assert Redis.from_url(REDIS_URL).zcard(leases) == 0


@pytest.mark.parametrize(
    "name,args,kwargs,queue",
    [
        ("monitor.tasks.probe_pair_task", ["p"], {}, "probes"),
        ("monitor.tasks.probe_pair_task", ["p", "audit"], {}, "audits"),
        ("monitor.tasks.execute_run_task", [1], {"kind": "probe"}, "probes"),
        ("monitor.tasks.execute_run_task", [1], {"kind": "audit"}, "audits"),
        ("monitor.tasks.evaluate_run_task", [1], {}, "sandbox"),
        ("monitor.tasks.notify_task", [1], {}, "reports"),
        ("monitor.tasks.weekly_report_task", [], {}, "reports"),
        ("monitor.tasks.prune_payloads_task", [], {}, "reports"),
    ],
)
def test_each_task_goes_to_its_queue(name, args, kwargs, queue):
    route = app.amqp.router.route({}, name, args, kwargs)
    assert route["queue"].name == queue
