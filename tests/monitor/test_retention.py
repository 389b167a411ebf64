"""Retention empties only old payloads, in batches, and keeps rollups, summaries and exempt
audits."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from monitor.derived.retention import prune_payloads
from monitor.derived.rollups import record_run
from monitor.models import Case, Endpoint, Pair, Run, RunRollup, Sample, Suite

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


@pytest.fixture
def history(db):
    suite = Suite.objects.create(name="smoke")
    case = Case.objects.create(suite=suite, key="hello", messages=[])
    fast = Endpoint.objects.create(name="f", base_url="http://127.0.0.1:9/v1", model="m")
    base = Endpoint.objects.create(name="b", base_url="http://127.0.0.1:9/v1", model="m")
    pair = Pair.objects.create(name="p", fast=fast, base=base, suite=suite)
    runs = {}
    for name, kind, age_days in (
        ("old_probe", "probe", 40),
        ("old_audit", "audit", 45),
        ("older_audit", "audit", 50),
        ("new_probe", "probe", 5),
    ):
        run = Run.objects.create(
            pair=pair, suite=suite, kind=kind, status="done", summary={"tiers": {"fast": {"n": 7}}}
        )
        Run.objects.filter(pk=run.pk).update(created_at=NOW - timedelta(days=age_days))
        for i in range(7):
            Sample.objects.create(
                run=run,
                case=case,
                endpoint=fast,
                tier="fast",
                ok=True,
                seq=i,
                started_at=NOW - timedelta(days=age_days, seconds=-i),
                ttft_ms=100.0 + i,
                e2e_ms=900.0,
                text="x" * 300,
                chunk_gaps_ms=[1.5] * 60,
                chunk_tokens=[1] * 60,
                headers={"x-request-id": "abc"},
                logprobs=[{"t": "a"}],
                model_id="m-1",
            )
        record_run(run=Run.objects.get(pk=run.pk))
        runs[name] = run
    return runs


def test_it_empties_old_payloads_in_batches_and_keeps_the_rest(history):
    rollups_before = list(RunRollup.objects.order_by("id").values())
    result = prune_payloads(now=NOW, days=30, keep_audits=1, batch_size=3)
    # old probe (7) and the older audit (7); the newest audit is exempt, the new probe is young
    assert (result.rows, result.batches, result.done) == (14, 5, True)
    pruned = Sample.objects.filter(pruned_at__isnull=False)
    assert set(pruned.values_list("run_id", flat=True)) == {
        history["old_probe"].id,
        history["older_audit"].id,
    }
    for s in pruned:
        assert (s.text, s.chunk_gaps_ms, s.chunk_tokens, s.headers, s.logprobs) == (
            "",
            [],
            [],
            {},
            None,
        )
        assert s.ttft_ms is not None and s.model_id == "m-1"  # timings and provenance stay
    kept = Sample.objects.filter(run__in=[history["old_audit"], history["new_probe"]])
    assert all(s.text == "x" * 300 and len(s.chunk_gaps_ms) == 60 for s in kept)
    assert list(RunRollup.objects.order_by("id").values()) == rollups_before
    assert Run.objects.get(pk=history["old_probe"].pk).summary == {"tiers": {"fast": {"n": 7}}}
    again = prune_payloads(now=NOW, days=30, keep_audits=1, batch_size=3)
    assert (again.rows, again.batches) == (0, 0)  # pruned rows are not visited twice


def test_it_stops_at_its_time_budget_and_says_rows_are_left(history):
    result = prune_payloads(now=NOW, days=30, keep_audits=0, batch_size=2, max_seconds=0)
    assert (result.rows, result.done) == (0, False)
