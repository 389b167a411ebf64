"""What the pair, speed and verdict pages compute from a pair's runs (plotly figures, the speed
page's bootstrap report), built from the pair alone and cached per data version of the pair
(``monitor.derived.page_cache``).

The views read them through ``figures``. ``warm`` is registered with
``monitor.derived.run_end`` (``MonitorConfig.ready``), which calls it after every run's end and
from the 5-minute refill task, so the first view after a run is served from the cache
(docs/benchmarks.md, "Scale").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils import timezone

from monitor import selectors
from monitor.derived import page_cache
from monitor.judging.speed import default_runs, speed_report
from monitor.models import Pair, RunStatus
from monitor.web import overview_cells
from monitor.web.chart_kit import Chart
from monitor.web.pair_charts import pair_charts
from monitor.web.speed_charts import speed_charts, thin_scenarios
from monitor.web.verdict_charts import verdict_charts


def pair_page(pair: Pair) -> list[Chart]:
    """The pair page's trend charts over its newest comparable runs."""
    runs = selectors.pair_trend_runs(pair)
    return pair_charts(
        runs,
        simulated=pair.simulated,
        sketches=selectors.run_sketches(r.id for r in runs),
    )


def speed_page(pair: Pair) -> dict[str, Any]:
    """The speed report (its bootstrap intervals), the runs it pooled, its figures."""
    runs = default_runs(pair)
    report = speed_report(pair=pair, runs=runs)
    return {
        "report": report,
        "run_ids": [run.pk for run in runs],
        "charts": speed_charts(report, runs),
        "thin": {
            label: thin_scenarios(runs, report["scenarios"], metric)
            for metric, label in (("ttft_ms", "TTFT"), ("e2e_ms", "E2E"))
        },
    }


def verdict_page(pair: Pair) -> list[Chart]:
    """The verdict page's figures: the newest verdict, the verdict history, the endpoints'
    model id and fingerprint events."""
    runs = selectors.audit_runs(pair)
    latest = next((r for r in runs if r.status == RunStatus.DONE and r.summary_obj.verdict), None)
    return verdict_charts(
        latest.summary_obj.verdict if latest else None,
        selectors.verdict_history(runs),
        None,
        selectors.endpoint_events(endpoints=[pair.fast, pair.base]),
        simulated=pair.simulated,
    )


BUILDERS: dict[str, Callable[[Pair], Any]] = {
    "pair": pair_page,
    "speed": speed_page,
    "verdict": verdict_page,
}


def figures(page: str, pair: Pair) -> Any:
    """The page's computed part for this pair, from the cache when its data is unchanged."""
    return page_cache.cached(page, pair, lambda: BUILDERS[page](pair))


def warm(pair_id: int) -> None:
    """Fill the cache for every page of the pair and its overview cells (a pair deleted
    meanwhile has none)."""
    pair = Pair.objects.select_related("fast", "base", "suite").filter(pk=pair_id).first()
    if pair is None:
        return
    for page in BUILDERS:
        figures(page, pair)
    overview_cells.warm(pair, timezone.now())
