"""Every path that ends a run calls the one end-of-run entry point
(``monitor.derived.run_end.record_run_end``): the pipeline (done and failed), the watchdog and a
load probe. Each test records what the registered warmers saw and what the pair's generation
did, so a path that forgets the entry point fails here, whatever else it does."""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from monitor.derived import run_end
from monitor.derived.page_cache import data_version
from monitor.models import Pair, Run, RunRollup
from monitor.runs.load import run_load_probe
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.runs.watchdog import reap_stale_runs
from tests.factories import vendor_pair
from tests.support import parse_source

pytestmark = pytest.mark.django_db

MONITOR = Path(__file__).resolve().parents[2] / "monitor"


@pytest.fixture
def warmed(monkeypatch) -> list[int]:
    """The pair ids the end-of-run entry point warmed, in order (the real warmers still run)."""
    seen: list[int] = []
    monkeypatch.setattr(run_end, "_WARMERS", [*run_end._WARMERS, seen.append])
    return seen


def generation(pair: Pair) -> int:
    return Pair.objects.get(pk=pair.pk).generation


def test_a_done_run_ends_through_the_entry_point(demo_vendor_url, warmed):
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=1)
    before = generation(pair)
    run = execute_run(run_id=create_run(pair=pair, seed=1).id, cases_limit=2)
    assert run.status == "done"
    assert warmed == [pair.pk]
    assert generation(pair) > before
    assert RunRollup.objects.filter(run=run).count() == 2  # one per tier


def test_a_failed_run_ends_through_the_entry_point_with_its_rollups(
    demo_vendor_url, warmed, monkeypatch
):
    from monitor.runs import steps

    def broken(**kwargs):
        raise RuntimeError("the summariser broke")

    monkeypatch.setattr(steps, "summarise_run", broken)
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=1)
    before = generation(pair)
    run = execute_run(run_id=create_run(pair=pair, seed=1).id, cases_limit=2)
    assert run.status == "failed" and "the summariser broke" in run.error
    assert warmed == [pair.pk]
    assert generation(pair) > before
    # its requests still count in availability
    assert RunRollup.objects.filter(run=run).count() == 2


def test_a_run_the_watchdog_fails_ends_through_the_entry_point(demo_vendor_url, warmed, settings):
    settings.TIERWATCH_STALE_AFTER_S = 60
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=1)
    lost = execute_run(run_id=create_run(pair=pair, seed=1).id, cases_limit=2)
    RunRollup.objects.filter(run=lost).delete()
    Run.objects.filter(pk=lost.pk).update(  # as if its worker died before marking it done
        status="running", finished_at=None, heartbeat_at=timezone.now() - timedelta(seconds=90)
    )
    warmed.clear()
    before = generation(pair)
    assert len(reap_stale_runs()) == 1
    assert warmed == [pair.pk]
    assert generation(pair) > before
    assert RunRollup.objects.filter(run=lost).count() == 2


def test_a_load_probe_ends_through_the_entry_point(demo_vendor_url, warmed):
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=1)
    before = generation(pair)
    run = run_load_probe(pair=pair, concurrency_levels=[1], requests_per_level=2)
    assert run.status == "done"
    assert warmed == [pair.pk]
    assert generation(pair) > before


def test_a_summary_write_and_a_run_end_each_give_the_pair_a_new_data_version(demo_vendor_url):
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=1)
    run = create_run(pair=pair, seed=1)
    versions = [data_version(Pair.objects.get(pk=pair.pk))]
    Run.objects.merge_summary(run.id, load={"1": {}})
    versions.append(data_version(Pair.objects.get(pk=pair.pk)))
    assert Run.objects.filter(pk=run.pk).end("failed", error="x") == 1
    versions.append(data_version(Pair.objects.get(pk=pair.pk)))
    Run.objects.filter(pk=run.pk).delete()
    versions.append(data_version(Pair.objects.get(pk=pair.pk)))
    assert len(set(versions)) == 4


def test_a_new_pair_under_a_used_id_does_not_share_the_old_pairs_version(demo_vendor_url):
    """SQLite reuses the highest id after a delete; a test database restarts its ids."""
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=1)
    old = data_version(pair)
    fields = {f.attname: getattr(pair, f.attname) for f in Pair._meta.concrete_fields}
    Pair.objects.filter(pk=pair.pk).delete()
    fields.pop("generation")
    again = Pair.objects.create(**fields)  # same id, same name, same endpoints
    assert again.pk == pair.pk and data_version(again) != old


def calls_in(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(parse_source(path)):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


def test_every_module_that_ends_a_run_also_records_its_end():
    """A new path that ends runs (``RunQuerySet.end``, or ``mark_done``/``mark_failed``) must
    call ``record_run_end`` too; the one definition lives in ``monitor.derived.run_end``."""
    enders, definitions = [], []
    for path in sorted(MONITOR.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        text = path.read_text()
        if "def record_run_end" in text:
            definitions.append(path.relative_to(MONITOR).as_posix())
        calls = calls_in(path)
        if path.name != "models.py" and calls & {"end", "mark_done", "mark_failed"}:
            if "def mark_done" in text:  # the step functions themselves, called by the pipeline
                continue
            enders.append((path.relative_to(MONITOR).as_posix(), "record_run_end" in calls))
    assert definitions == ["derived/run_end.py"]
    assert enders and all(records for _, records in enders), enders
