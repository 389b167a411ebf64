"""Fixtures the monitor tests share: the SLA report's ``world`` (two endpoints' samples in one
week, for the report and its PDF)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from monitor.derived.rollups import record_run
from monitor.models import Case, Endpoint, Pair, Run, Sample, Suite
from tests.support import IN_WEEK


@pytest.fixture
def world(db, monkeypatch):
    monkeypatch.setenv("VENDOR_SECRET_KEY", "sk-live-do-not-print")
    fast = Endpoint.objects.create(
        name="acme-fast",
        base_url="https://api.acme.test/v1",
        model="acme-1-fast",
        api_key_env="VENDOR_SECRET_KEY",
    )
    base = Endpoint.objects.create(
        name="acme-base",
        base_url="https://api.acme.test/v1",
        model="acme-1",
        api_key_env="VENDOR_SECRET_KEY",
        simulated=True,
    )
    suite = Suite.objects.create(name="smoke")
    case = Case.objects.create(suite=suite, key="hello", messages=[])
    pair = Pair.objects.create(name="acme", fast=fast, base=base, suite=suite)
    run = Run.objects.create(pair=pair, suite=suite, status="done")
    Run.objects.filter(pk=run.pk).update(created_at=IN_WEEK)
    before = Run.objects.create(pair=pair, suite=suite, status="done")  # the week before
    Run.objects.filter(pk=before.pk).update(created_at=IN_WEEK - timedelta(days=7))

    def sample(endpoint, ok=True, ttft=None, error="", at=IN_WEEK, run=run):
        Sample.objects.create(
            run=run,
            case=case,
            endpoint=endpoint,
            tier="fast" if endpoint == fast else "base",
            started_at=at,
            ok=ok,
            ttft_ms=ttft,
            e2e_ms=2 * ttft if ttft else None,
            error_class=error,
        )

    for ttft in range(100, 1001, 100):  # 10 successes on the fast endpoint
        sample(fast, ttft=float(ttft))
    for error in ("rate_limited", "rate_limited", "timeout", "connect", "timeout"):
        sample(fast, ok=False, error=error)
    sample(fast, ttft=99999.0, at=IN_WEEK - timedelta(days=7), run=before)  # left out
    for ttft in (100.0, 200.0, 300.0):  # 3 successes: below the minimum n of 5
        sample(base, ttft=ttft)
    for r in (run, before):  # what execute_run does when the run is summarised
        record_run(run=Run.objects.get(pk=r.pk))
    return {"fast": fast, "base": base, "pair": pair, "run": run}
