"""Rollups and provenance events written when a run is summarised; the latency sketch."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from evals import sketch
from monitor.derived import rollups
from monitor.derived.rollups import record_run
from monitor.models import Case, ProvenanceEvent, Run, RunRollup, Sample
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.selectors import endpoint_events
from tests import factories
from tests.factories import vendor_pair

QS = (1, 5, 25, 50, 75, 90, 95, 99, 99.9)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sketch_percentiles_are_within_one_percent_of_numpy(seed):
    rng = np.random.default_rng(seed)
    values = rng.lognormal(6.0, 0.8, size=5000)
    got = sketch.quantiles(sketch.sketch(values), qs=QS, min_n=5)
    want = np.percentile(values, QS, method="linear")
    assert got["n"] == 5000
    for q, w in zip(QS, want, strict=True):
        assert abs(got[f"p{q:g}"] - w) <= sketch.ALPHA * w, q


def test_merged_sketches_equal_the_sketch_of_all_values():
    rng = np.random.default_rng(7)
    parts = [rng.lognormal(5.0, 0.5, size=n) for n in (3, 50, 400)]
    merged = sketch.merge(sketch.sketch(p) for p in parts)
    assert merged == sketch.sketch(np.concatenate(parts))
    assert sketch.quantiles(merged, qs=(50,), min_n=500)["p50"] is None  # 453 < min n


@pytest.mark.django_db
def test_the_rollup_written_at_run_end_equals_a_recount_of_the_samples(demo_vendor_url):
    pair = vendor_pair(demo_vendor_url, fast_model="demo-ratelimit", suite="smoke", repeat=2)
    pair.slo_ttft_ms, pair.slo_e2e_ms = 10_000, 60_000
    pair.save()
    run = execute_run(run_id=create_run(pair=pair, seed=3).id, cases_limit=3)
    # every fast request got a 429: failed by its vendor, its rollups written all the same
    assert run.status == "failed" and run.error.startswith("fast tier: HTTP 429"), run.error
    rollups = {r.tier: r for r in RunRollup.objects.filter(run=run)}
    assert set(rollups) == {"fast", "base"}
    for tier, rollup in rollups.items():
        samples = list(Sample.objects.filter(run=run, tier=tier))
        ok = [s for s in samples if s.ok]
        assert rollup.endpoint_id == {"fast": pair.fast_id, "base": pair.base_id}[tier]
        assert (rollup.n, rollup.n_ok) == (len(samples), len(ok))
        assert rollup.errors == {
            c: sum(1 for s in samples if s.error_class == c)
            for c in {s.error_class for s in samples if not s.ok}
        }
        assert rollup.rate_limited == sum(s.error_class == "rate_limited" for s in samples)
        assert rollup.goodput_met == sum(
            s.ok and s.ttft_ms <= 10_000 and s.e2e_ms <= 60_000 for s in samples
        )
        assert sketch.count(rollup.ttft_sketch) == len(ok)
        p50 = sketch.quantiles(rollup.e2e_sketch, qs=(50,), min_n=1)["p50"]
        if ok:
            assert p50 == pytest.approx(np.percentile([s.e2e_ms for s in ok], 50), rel=0.01)
    assert rollups["fast"].rate_limited == 6 and rollups["base"].n_ok == 6


@pytest.fixture
def two_runs(db):
    from monitor.models import Endpoint, Pair, Suite

    suite = Suite.objects.create(name="smoke")
    case = Case.objects.create(suite=suite, key="hello", messages=[])
    fast = Endpoint.objects.create(name="f", base_url="http://127.0.0.1:9/v1", model="m")
    base = Endpoint.objects.create(name="b", base_url="http://127.0.0.1:9/v1", model="m")
    pair = Pair.objects.create(name="p", fast=fast, base=base, suite=suite)
    t0 = datetime(2026, 11, 2, tzinfo=UTC)
    runs = []
    for day, model_ids in ((0, ["m-1", "m-1"]), (1, ["m-1", "m-2"])):
        run = Run.objects.create(pair=pair, suite=suite, status="done")
        for i, model_id in enumerate(model_ids):
            Sample.objects.create(
                run=run,
                case=case,
                endpoint=fast,
                tier="fast",
                ok=True,
                started_at=t0 + timedelta(days=day, minutes=i),
                model_id=model_id,
                system_fingerprint="fp_a",
            )
        runs.append(run)
    return fast, runs, t0


def test_factory_rollup_rows_carry_every_rollup_field_a_new_one_too(db, monkeypatch):
    """``factories.rollup_rows`` stands in for the samples ``record_run`` reads: a field added
    to ``ROLLUP_FIELDS`` must reach it (here ``pruned_at``, at the model's default)."""
    monkeypatch.setattr(rollups, "ROLLUP_FIELDS", (*rollups.ROLLUP_FIELDS, "pruned_at"))
    run = factories.run(factories.pair())
    rows = factories.rollup_rows(run, fast_ms=100.0, base_ms=400.0, n=3)
    assert [list(r) for r in rows] == [list(rollups.ROLLUP_FIELDS)] * 6
    assert {r["pruned_at"] for r in rows} == {None}
    assert [(r["tier"], r["ttft_ms"], r["case__key"]) for r in rows[:4]] == [
        ("fast", 100.0, "c0"),
        ("fast", 101.0, "c1"),
        ("fast", 102.0, "c2"),
        ("base", 400.0, "c0"),
    ]
    written = {r.tier: (r.n, r.n_ok) for r in record_run(run=run, samples=rows)}
    assert written == {"fast": (3, 3), "base": (3, 3)}


def test_provenance_events_are_upserted_once_per_run(two_runs):
    fast, (first, second), t0 = two_runs
    record_run(run=first)
    record_run(run=second)
    record_run(run=second)  # summarised again: rollups replaced, events not counted twice
    rows = {(r.kind, r.value): r for r in ProvenanceEvent.objects.all()}
    assert set(rows) == {("model_id", "m-1"), ("model_id", "m-2"), ("fingerprint", "fp_a")}
    m1 = rows[("model_id", "m-1")]
    assert (m1.count, m1.first_seen, m1.run_id) == (3, t0, first.id)
    assert m1.last_seen == t0 + timedelta(days=1)
    assert (rows[("model_id", "m-2")].run_id, rows[("fingerprint", "fp_a")].count) == (second.id, 4)
    assert RunRollup.objects.filter(run=second).count() == 1
    events = endpoint_events(endpoints=[fast])
    assert [(e["what"], e["value"], e["change"]) for e in events] == [
        ("model id", "m-1", False),
        ("fingerprint", "fp_a", False),
        ("model id", "m-2", True),
    ]
