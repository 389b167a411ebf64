"""Builders for test rows: endpoints, a pair with its suite, runs with typed summaries, samples,
and one ``free_port``. Summaries are built from ``monitor.derived.run_summary``'s dataclasses, so a
test
summary has the stored shape by construction."""

from __future__ import annotations

import socket
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from monitor.derived import rollups
from monitor.derived.run_summary import (
    Percentiles,
    RunSummary,
    ScenarioStats,
    Similarity,
    SpeedUp,
    TierStats,
)
from monitor.models import Case, Endpoint, Pair, Run, Sample, Suite
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.setup import roles
from monitor.setup.suites import sync_builtin_suite

LOCAL_URL = "http://127.0.0.1:9/v1"  # nothing listens: rows only, never a request


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (aiosmtpd cannot start on port 0, so pick one first)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def endpoint(
    name: str,
    *,
    url: str = LOCAL_URL,
    model: str | None = None,
    simulated: bool = True,
    **fields: Any,
) -> Endpoint:
    return Endpoint.objects.create(
        name=name, base_url=url, model=model or name, simulated=simulated, **fields
    )


def suite(name: str = "smoke", cases: dict[str, list[dict[str, str]]] | None = None) -> Suite:
    """A suite with the given cases (key → messages); one "hello" case by default."""
    row = Suite.objects.create(name=name)
    for key, messages in (cases or {"hello": [{"role": "user", "content": "hi"}]}).items():
        Case.objects.create(suite=row, key=key, messages=messages)
    return row


def pair(
    name: str = "demo",
    *,
    url: str = LOCAL_URL,
    fast: str = "demo-fast",
    base: str = "demo-base",
    suite_row: Suite | None = None,
    simulated: bool = True,
    **fields: Any,
) -> Pair:
    return Pair.objects.create(
        name=name,
        fast=endpoint(fast, url=url, simulated=simulated),
        base=endpoint(base, url=url, simulated=simulated),
        suite=suite_row or suite(),
        **fields,
    )


def vendor_pair(
    vendor_url: str,
    *,
    fast_model: str = "demo-fast",
    fast_url: str | None = None,
    suite: str = "coding",
    repeat: int = 2,
    fast_fields: dict[str, Any] | None = None,
    **fields: Any,
) -> Pair:
    """A pair ("fast", "base") on a real vendor with a built-in suite, for tests that run it;
    ``fast_fields`` go on the fast endpoint, other keywords on the pair."""
    base_row = Endpoint.objects.create(
        name="base", base_url=vendor_url, model="demo-base", simulated=True
    )
    fast_row = Endpoint.objects.create(
        name="fast",
        base_url=fast_url or vendor_url,
        model=fast_model,
        simulated=True,
        **{"timeout_s": 10, **(fast_fields or {})},
    )
    return Pair.objects.create(
        name="p",
        fast=fast_row,
        base=base_row,
        suite=sync_builtin_suite(name=suite),
        repeat=repeat,
        **fields,
    )


def measured_pair(vendor_url: str, *, suite: str, probe_cases: int, **fields: Any) -> Pair:
    """The demo pair ("demo-fast-vs-base", E2E claim 2x, SLO 60 s) on a real vendor after one
    probe of ``probe_cases`` cases and one audit of 5: a pair with every figure a page or a
    report shows. Other keywords go on the pair."""
    sync_builtin_suite(name="audit")
    row = Pair.objects.create(
        name="demo-fast-vs-base",
        fast=Endpoint.objects.create(
            name="demo-fast",
            base_url=vendor_url,
            model="demo-fast",
            simulated=True,
            max_concurrency=8,
        ),
        base=Endpoint.objects.create(
            name="demo-base",
            base_url=vendor_url,
            model="demo-base",
            simulated=True,
            max_concurrency=8,
        ),
        suite=sync_builtin_suite(name=suite),
        repeat=2,
        claim_value=2.0,  # an E2E factor: the default metric and form
        slo_e2e_ms=60000,
        **fields,
    )
    probe = execute_run(run_id=create_run(pair=row, seed=1).id, cases_limit=probe_cases)
    audit = execute_run(
        run_id=create_run(pair=row, kind="audit", repeat=3, seed=2).id, cases_limit=5
    )
    assert probe.status == audit.status == "done", (probe.status, audit.status)
    return row


def stat(n: int, p50: float | None = None, p95: float | None = None) -> Percentiles:
    """Percentiles as the summariser stores them: none below the minimum n of 5."""
    if n < 5:
        return Percentiles(n=n, too_small=True)
    return Percentiles(n=n, too_small=False, p50=p50, p90=p95, p95=p95, p99=p95)


def tier(
    n: int = 20,
    *,
    ttft: tuple[float, float] = (300.0, 300.0),
    e2e: tuple[float, float] = (900.0, 900.0),
    **fields: Any,
) -> TierStats:
    """One tier's block with every success counted; override any field."""
    return TierStats(
        **{
            "n": n,
            "n_ok": n,
            "availability": 1.0,
            "ttft_ms": stat(n, *ttft),
            "e2e_ms": stat(n, *e2e),
            "tpot_ms": stat(n, 12.5, 20.0),
            **fields,
        }
    )


def summary(
    *,
    fast: TierStats | None = None,
    base: TierStats | None = None,
    similarity: Similarity | float | None = None,
    noise_floor: Similarity | float | None = None,
    n_sim: int = 20,
    speedup: SpeedUp | None = None,
    by_scenario: dict[str, ScenarioStats] | None = None,
    **blocks: Any,
) -> dict[str, Any]:
    """A run summary as stored JSON; ``similarity``/``noise_floor`` are fast-vs-base and
    base-vs-base (a bare number is the mean Indel ratio over ``n_sim`` pairs)."""
    sims = {}
    for key, sim in (("fast_vs_base", similarity), ("base_vs_base", noise_floor)):
        if sim is not None:
            sims[key] = sim if isinstance(sim, Similarity) else Similarity(n_sim, sim)
    typed = RunSummary(
        min_n=5,
        tiers={"fast": fast or tier(), "base": base or tier()},
        similarity=sims,
        speedup=speedup or SpeedUp(),
        by_scenario=by_scenario or {},
    )
    return typed.replace(**blocks).to_json() if blocks else typed.to_json()


def run(
    pair_row: Pair, *, status: str = "done", minutes_ago: float | None = None, **fields: Any
) -> Run:
    """A run row of the pair; ``minutes_ago`` sets its creation and finish times."""
    row = Run.objects.create(pair=pair_row, suite=pair_row.suite, status=status, **fields)
    if minutes_ago is not None:
        when = timezone.now() - timedelta(minutes=minutes_ago)
        Run.objects.filter(pk=row.pk).update(created_at=when, finished_at=when)
        row.refresh_from_db()
    return row


def sample_default(name: str) -> Any:
    """The model default of a ``Sample`` field, following ``case__key`` to the case's field."""
    model, *path = Sample, *name.split("__")
    for part in path[:-1]:
        model = model._meta.get_field(part).related_model
    return model._meta.get_field(path[-1]).get_default()


def rollup_rows(run_row: Run, *, fast_ms: float, base_ms: float, n: int = 20) -> list[dict]:
    """Sample rows (every field of ``monitor.derived.rollups.ROLLUP_FIELDS``, at the model's default
    unless set here) of a finished run: ``n`` successes per tier with TTFT ``ms``, ``ms`` + 1,
    …; for ``record_run(run=…, samples=…)``. Read from the module at each call, so a field
    added there is in every row."""
    pair_row = run_row.pair
    defaults = {name: sample_default(name) for name in rollups.ROLLUP_FIELDS}
    return [
        {
            **defaults,
            "tier": tier,
            "endpoint_id": endpoint,
            "ok": True,
            "ttft_ms": ms + i,
            "e2e_ms": 10 * ms,
            "started_at": run_row.created_at,
            "case__key": f"c{i}",
        }
        for tier, endpoint, ms in (
            ("fast", pair_row.fast_id, fast_ms),
            ("base", pair_row.base_id, base_ms),
        )
        for i in range(n)
    ]


def sample(
    run_row: Run,
    case: Case,
    tier_name: str,
    *,
    text: str = "",
    ok: bool = True,
    repetition: int = 0,
    batch: int = 0,
    seq: int = 0,
    **fields: Any,
) -> Sample:
    pair_row = run_row.pair
    return Sample.objects.create(
        run=run_row,
        case=case,
        endpoint=pair_row.fast if tier_name == "fast" else pair_row.base,
        tier=tier_name,
        text=text,
        ok=ok,
        repetition=repetition,
        batch=batch,
        seq=seq,
        started_at=fields.pop("started_at", timezone.now()),
        **fields,
    )


def user(username: str, role: str | None = None, password: str = "pw-test-123"):
    """A user with one role of ``monitor.setup.roles`` (viewer, operator, admin), or none."""
    row = get_user_model().objects.create_user(username, password=password)
    if role is not None:
        roles.grant(row, role)
    return row
