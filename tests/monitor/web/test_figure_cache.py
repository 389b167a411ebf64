"""The pages' figure cache (``monitor.derived.page_cache``) and the overview's cells
(``monitor.web.overview_cells``) never serve anything older than the pair's newest run or
summary write, and the overview's TTFT P95 over the last 24 h merged from rollups."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from monitor.derived.rollups import record_run
from monitor.models import Run
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.runs.watchdog import reap_stale_runs
from monitor.tasks import warm_pages_task
from monitor.web import overview_cells, page_figures
from tests import factories
from tests.factories import vendor_pair
from tests.monitor.web.pages import make_run, summary
from tests.monitor.web.test_views import figures

pytestmark = pytest.mark.django_db


def fast_p50s(html: str) -> list[float | None]:
    ttft = figures(html)["chart-ttft"]
    return next(t["y"] for t in ttft["data"] if t["name"] == "fast P50")


def counting_builders(monkeypatch) -> list[str]:
    """The pages built (cache misses) from now on; "overview:<pair id>" for an overview row."""
    built: list[str] = []
    for page, build in dict(page_figures.BUILDERS).items():
        monkeypatch.setitem(
            page_figures.BUILDERS,
            page,
            lambda pair, page=page, build=build: built.append(page) or build(pair),
        )
    build_cells = overview_cells.build

    def cells(newest, now):
        built.extend(f"overview:{pair_id}" for pair_id in newest)
        return build_cells(newest, now)

    monkeypatch.setattr(overview_cells, "build", cells)
    return built


def test_a_run_that_finishes_shows_on_the_pages_at_once(admin_client, demo_vendor_url, monkeypatch):
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=1)
    first = execute_run(run_id=create_run(pair=pair, seed=1).id, cases_limit=2)
    assert len(fast_p50s(admin_client.get("/pairs/p/").content.decode())) == 1
    assert f"#{first.id}</a>" in admin_client.get("/pairs/p/speed/").content.decode()
    second = execute_run(run_id=create_run(pair=pair, seed=2).id, cases_limit=2)
    assert second.status == "done"
    built = counting_builders(monkeypatch)
    assert len(fast_p50s(admin_client.get("/pairs/p/").content.decode())) == 2
    assert f"#{second.id}</a>" in admin_client.get("/pairs/p/speed/").content.decode()
    assert admin_client.get("/pairs/p/verdict/").status_code == 200
    assert f"#{second.id}</a>" in admin_client.get("/").content.decode()
    assert built == []  # the pipeline warmed all three and the overview row: no view built one


def test_a_run_the_watchdog_fails_leaves_the_pages_warm(
    admin_client, demo_vendor_url, monkeypatch, settings
):
    settings.TIERWATCH_STALE_AFTER_S = 60
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=1)
    execute_run(run_id=create_run(pair=pair, seed=1).id, cases_limit=2)
    lost = execute_run(run_id=create_run(pair=pair, seed=2).id, cases_limit=2)
    Run.objects.filter(pk=lost.pk).update(  # as if its worker died before marking it done
        status="running", finished_at=None, heartbeat_at=timezone.now() - timedelta(seconds=90)
    )
    for page in ("/pairs/p/", "/pairs/p/speed/", "/pairs/p/verdict/", "/"):
        admin_client.get(page)  # cached while the run was still "running"
    assert len(reap_stale_runs()) == 1
    built = counting_builders(monkeypatch)
    assert f"#{lost.id}</a>" in admin_client.get("/pairs/p/").content.decode()
    for page in ("/pairs/p/speed/", "/pairs/p/verdict/", "/"):
        assert admin_client.get(page).status_code == 200
    assert built == []  # the watchdog warmed them when it failed the run


def test_the_overview_builds_a_pairs_cells_once_until_one_of_its_runs_ends(
    admin_client, monkeypatch, django_capture_on_commit_callbacks
):
    pair = factories.pair()
    other = factories.pair("other", fast="o-fast", base="o-base", suite_row=pair.suite)
    make_run(pair, minutes_ago=60, summary=summary(fast_ttft=111.0))
    make_run(other, minutes_ago=60)
    audit = make_run(pair, minutes_ago=30, status="running", kind="audit")
    built = counting_builders(monkeypatch)
    for _ in range(3):
        assert "no audit yet" in admin_client.get("/").content.decode()
    assert sorted(built) == sorted([f"overview:{pair.pk}", f"overview:{other.pk}"])
    Run.objects.merge_summary(
        audit.id,
        verdict={  # the audit's verdict, then its end
            "label": "same_model",
            "sentence": "No evidence the tiers differ (p = 0.41).",
            "p_value": 0.41,
            "n": 48,
        },
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert Run.objects.filter(pk=audit.pk).end("done") == 1
    html = admin_client.get("/").content.decode()
    assert "No evidence the tiers differ (p = 0.41)." in html
    assert built[2:] == [f"overview:{pair.pk}"]  # only the pair whose run ended


def test_a_summary_written_after_the_run_finished_replaces_the_cached_figure(
    admin_client, django_capture_on_commit_callbacks
):
    pair = factories.pair()
    run = make_run(pair, minutes_ago=5, summary=summary(fast_ttft=111.0))
    assert fast_p50s(admin_client.get("/pairs/demo/").content.decode()) == [111.0]
    with django_capture_on_commit_callbacks(execute=True):  # the worker's commit
        Run.objects.merge_summary(run.id, tiers=summary(fast_ttft=222.0)["tiers"])
    assert fast_p50s(admin_client.get("/pairs/demo/").content.decode()) == [222.0]


def test_an_unchanged_pair_is_served_from_the_cache(admin_client, monkeypatch):
    pair = factories.pair()
    make_run(pair, minutes_ago=5)
    built = counting_builders(monkeypatch)
    for _ in range(3):
        assert admin_client.get("/pairs/demo/").status_code == 200
    assert len(built) == 1
    make_run(pair, minutes_ago=1)
    admin_client.get("/pairs/demo/")
    assert len(built) == 2


def rollup_run(pair, *, hours_ago: float, fast_ms: float, base_ms: float) -> Run:
    """A finished probe with 20 samples per tier, its rollups written as a worker does."""
    run = make_run(pair, minutes_ago=int(60 * hours_ago))
    record_run(run=run, samples=factories.rollup_rows(run, fast_ms=fast_ms, base_ms=base_ms))
    return run


def test_the_overview_shows_p95_over_24_hours_once_it_has_59_samples(admin_client):
    pair = factories.pair()
    rollup_run(pair, hours_ago=30, fast_ms=5000.0, base_ms=9000.0)  # outside the window
    rollup_run(pair, hours_ago=3, fast_ms=100.0, base_ms=500.0)
    rollup_run(pair, hours_ago=2, fast_ms=100.0, base_ms=500.0)
    html = admin_client.get("/").content.decode()
    assert "n = 40 &lt; 59" in html  # 2 runs × 20: P95 still withheld, with its n
    rollup_run(pair, hours_ago=1, fast_ms=100.0, base_ms=500.0)
    html = admin_client.get("/").content.decode()
    # 60 values per tier, 100–119 ms (fast) and 500–519 ms (base): P95 ≈ 118 / 518 (±1%)
    assert "119 ms (n=60)" in html or "118 ms (n=60)" in html
    assert "518 ms (n=60)" in html or "519 ms (n=60)" in html or "517 ms (n=60)" in html
    assert "(n=80)" not in html  # the 30-hour-old run is left out


def test_the_overview_falls_back_to_the_newest_run_without_runs_in_the_window(admin_client):
    pair = factories.pair()
    make_run(pair, minutes_ago=int(timedelta(hours=30) / timedelta(minutes=1)))
    html = admin_client.get("/").content.decode()
    assert "222 ms (n=20)" in html  # the newest run's stored P95 (factories' summary)


def test_a_cached_window_p95_is_rebuilt_when_its_oldest_run_leaves_the_window(monkeypatch):
    pair = factories.pair()
    rollup_run(pair, hours_ago=23.5, fast_ms=5000.0, base_ms=9000.0)
    newest = rollup_run(pair, hours_ago=1, fast_ms=100.0, base_ms=500.0)
    built = counting_builders(monkeypatch)
    now = timezone.now()
    cells = overview_cells.measured([(pair, newest)], now)[pair.pk]
    assert cells.numbers_html.count("n = 40 &lt; 59") == 2  # both tiers' P95 over 2 runs
    assert overview_cells.measured([(pair, newest)], now + timedelta(minutes=20)) == {
        pair.pk: cells
    }  # the oldest run is still inside 24 h
    later = overview_cells.measured([(pair, newest)], now + timedelta(hours=1))[pair.pk]
    assert later.numbers_html.count("n = 20 &lt; 59") == 2  # it aged out: rebuilt without it
    assert built == [f"overview:{pair.pk}"] * 2


def test_the_refill_task_warms_every_pair_after_the_cache_was_emptied(admin_client, monkeypatch):
    pair = factories.pair()
    other = factories.pair("other", fast="o-fast", base="o-base", suite_row=pair.suite)
    for p in (pair, other):
        make_run(p, minutes_ago=5)
    cache.clear()  # a Redis restart
    assert warm_pages_task() == 2
    built = counting_builders(monkeypatch)
    for page in ("/", "/pairs/demo/", "/pairs/other/speed/", "/pairs/demo/verdict/"):
        assert admin_client.get(page).status_code == 200
    assert built == []
    assert settings.CELERY_BEAT_SCHEDULE["warm-pages"]["task"] == warm_pages_task.name
