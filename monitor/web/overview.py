"""The overview page: every pair with its newest run and the numbers of its newest comparable
finished run (TTFT P95, speed-ups, similarity beside its noise floor, pass rates)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from monitor import selectors
from monitor.run_summary import RunSummary
from monitor.web.access import VIEW_PAIR, requires
from monitor.web.cells import NO_DATA, fraction, percentile, similarity, speedup
from monitor.web.htmx import render_page

TIERS = ("fast", "base")


def overview_row(item: selectors.PairOverview) -> dict[str, Any]:
    summary = item.last_done.summary_obj if item.last_done else RunSummary()
    tiers = [summary.tiers.get(t) for t in TIERS]
    return {
        "item": item,
        "ttft_p95": [percentile(t.ttft_ms, "p95", summary.min_n) if t else NO_DATA
                     for t in tiers],
        "speedup_ttft": speedup(summary.speedup.ttft),
        "speedup_e2e": speedup(summary.speedup.e2e),
        "sim_fast_base": similarity(summary.similar("fast_vs_base")),
        "sim_base_base": similarity(summary.similar("base_vs_base")),
        "pass_rate": [fraction(t.pass_rate, t.n_tested) if t else NO_DATA for t in tiers],
    }


@requires(VIEW_PAIR)
@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    rows = [overview_row(item) for item in selectors.pairs_overview()]
    return render_page(request, "monitor/overview.html", "table", {"rows": rows})
