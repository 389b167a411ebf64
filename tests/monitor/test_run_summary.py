"""The typed run summary reads stored rows as they are, writes the same shape, and its one
writer keeps the blocks other steps wrote; stored load probes become runs of kind "load"."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.apps import apps

from monitor.derived.run_summary import RunSummary
from monitor.models import Run
from monitor.runs.steps import summarise_run
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def summarised() -> Run:
    pair = factories.pair()
    run = factories.run(pair)
    case = pair.suite.cases.get()
    for rep in range(6):
        for tier, ttft in (("fast", 100.0 + rep), ("base", 400.0 + rep)):
            factories.sample(
                run,
                case,
                tier,
                text="hello there",
                repetition=rep,
                seq=rep,
                ttft_ms=ttft,
                e2e_ms=3 * ttft,
                tpot_ms=10.0,
                model_id="m",
            )
    summarise_run(run_id=run.id)
    run.refresh_from_db()
    return run


def test_a_stored_summary_reads_and_writes_back_unchanged(summarised):
    stored = summarised.summary
    assert RunSummary.from_json(stored).to_json() == stored
    typed = summarised.summary_obj
    assert typed.tier("fast").ttft_ms.p50 == pytest.approx(102.5) and typed.tier("fast").n == 6
    assert typed.speedup.ttft == pytest.approx(402.5 / 102.5)
    assert typed.similar("fast_vs_base").n == 6 and typed.similar("base_vs_base").n == 1


def test_an_old_or_empty_row_reads_as_empty_blocks():
    old = RunSummary.from_json({"tiers": {"fast": {"n": 3}}, "similarity": {}})
    assert old.min_n == 5 and old.tier("fast").n == 3 and old.tier("base").n == 0
    assert old.verdict is None and old.drift is None and old.load is None
    assert RunSummary.from_json({}).to_json() == {}


def test_the_writer_replaces_one_block_and_keeps_the_others(summarised):
    Run.objects.merge_summary(summarised.id, skipped=[{"case": "long", "reason": "too long"}])
    Run.objects.merge_summary(summarised.id, drift={"state": "ok", "series": {}, "runs": 0})
    summarise_run(run_id=summarised.id)  # a re-summarise keeps skipped and drift
    summarised.refresh_from_db()
    typed = summarised.summary_obj
    assert [s.case for s in typed.skipped] == ["long"] and typed.drift.runs == 0
    assert typed.tier("base").n == 6


def test_the_migration_moves_load_probes_from_trigger_to_kind():
    migration = import_module("monitor.migrations.0004_run_kind_load")
    pair = factories.pair()
    old_load = factories.run(pair, trigger="load")  # how load probes were stored before
    probe = factories.run(pair, trigger="scheduled")
    migration.load_trigger_to_kind(apps, None)
    old_load.refresh_from_db()
    probe.refresh_from_db()
    assert (old_load.kind, old_load.trigger) == ("load", "manual")
    assert (probe.kind, probe.trigger) == ("probe", "scheduled")
    assert list(Run.objects.trend()) == [probe]
