"""The overview page: every pair with its newest run and the numbers of its newest comparable
finished run (TTFT P95, speed-ups, similarity beside its noise floor, pass rates), and the
"outputs differ" flag from e-BH over every pair's evidence across audits (false discovery
rate ≤ 5% over the flags shown)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from monitor import selectors
from monitor.run_summary import RunSummary
from monitor.services import monitoring
from monitor.web.cells import NO_DATA, fraction, percentile, similarity, speedup
from monitor.web.htmx import render_page

TIERS = ("fast", "base")


def overview_row(item: selectors.PairOverview, differs: bool = False) -> dict[str, Any]:
    summary = item.last_done.summary_obj if item.last_done else RunSummary()
    tiers = [summary.tiers.get(t) for t in TIERS]
    return {
        "item": item,
        "differs": differs,
        "ttft_p95": [percentile(t.ttft_ms, "p95", summary.min_n) if t else NO_DATA
                     for t in tiers],
        "speedup_ttft": speedup(summary.speedup.ttft),
        "speedup_e2e": speedup(summary.speedup.e2e),
        "sim_fast_base": similarity(summary.similar("fast_vs_base")),
        "sim_base_base": similarity(summary.similar("base_vs_base")),
        "pass_rate": [fraction(t.pass_rate, t.n_tested) if t else NO_DATA for t in tiers],
    }


@login_required
@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    items = selectors.pairs_overview()
    differs = monitoring.differs_across_pairs([item.pair for item in items])
    rows = [overview_row(item, differs.get(item.pair.id, False)) for item in items]
    return render_page(request, "monitor/overview.html", "table", {"rows": rows})
