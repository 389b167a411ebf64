"""The run page (its summary as tables, its samples) and the sample page (one request whole).

Tables format the run's typed summary (``Run.summary_obj``); nothing is recomputed here.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from evals.records import TIERS
from monitor import selectors
from monitor.derived.run_summary import RunSummary, Similarity, TierStats
from monitor.runs import budget
from monitor.web.access import VIEW_RUN, VIEW_SAMPLE, requires
from monitor.web.cells import NO_DATA, Cell, fraction, number, percentile, similarity, speedup
from monitor.web.episode import run_agent_rows
from monitor.web.htmx import render_page
from monitor.web.worse import usd

PERCENTILES = ("p50", "p95")
FILTERS = ("tier", "case", "error")  # the samples' filters (query parameters)


def similarity_rows(summary: RunSummary) -> list[tuple[str, list[Cell]]]:
    """Fast-vs-base beside base-vs-base, the noise floor it must be judged against."""
    rows = []
    for key, label in (
        ("fast_vs_base", "fast vs base"),
        ("base_vs_base", "base vs base (noise floor)"),
    ):
        sim = summary.similar(key) or Similarity()
        div = sim.first_div_p50
        rows.append(
            (
                label,
                [
                    Cell(str(sim.n)),
                    similarity(sim),
                    fraction(sim.median_ratio),
                    fraction(sim.exact_rate),
                    NO_DATA if div is None else Cell(f"{div:,.0f} chars"),
                ],
            )
        )
    return rows


def tier_rows(summary: RunSummary) -> list[tuple[str, list[Cell]]]:
    """The run page's per-tier summary: one row per measure, one column per tier."""
    min_n = summary.min_n
    tiers = [summary.tiers.get(t) for t in TIERS]

    def row(label: str, cell) -> tuple[str, list[Cell]]:
        return label, [cell(t or TierStats()) for t in tiers]

    rows = [row("requests / successful", lambda t: Cell(f"{t.n} / {t.n_ok}"))]
    for metric, label in (("ttft_ms", "TTFT"), ("e2e_ms", "E2E"), ("tpot_ms", "TPOT")):
        for p in PERCENTILES:
            cells = [percentile(t.metric(metric) if t else None, p, min_n) for t in tiers]
            rows.append((f"{label} {p.upper()}", cells))
    rows += [
        row("decode speed P50", lambda t: number(t.decode_tps_p50, "tok/s")),
        row("availability (429s excluded)", lambda t: fraction(t.availability)),
        row("rate limited (429)", lambda t: Cell(str(t.rate_limited))),
        row("errors (status and message)", _errors),
        row(
            "output tokens: server / estimated",
            lambda t: Cell(f"{t.tokens_server:,} / {t.tokens_estimated:,}"),
        ),
        row("samples with >10% token mismatch", lambda t: Cell(str(t.token_mismatch))),
        row("unit-test pass rate (answered requests)", _pass_rate),
        row("model ids returned", lambda t: _listing(t.model_ids)),
        row("system fingerprints", lambda t: _listing(t.fingerprints)),
    ]
    return rows


def _listing(values: tuple[str, ...]) -> Cell:
    return Cell(", ".join(values)) if values else NO_DATA


def _errors(tier: TierStats) -> Cell:
    """The top errors with their status and the vendor's message ("20 × HTTP 401: You didn't
    provide an API key"); by class alone for a run summarised before messages were kept."""
    if not tier.errors:
        return Cell("none", muted=True)
    if tier.top_errors:
        return Cell("; ".join(f"{e['n']} × {e['message']}" for e in tier.top_errors))
    return Cell(", ".join(f"{k}: {v}" for k, v in sorted(tier.errors.items())))


def _pass_rate(tier: TierStats) -> Cell:
    """Over the requests that were answered: a failed request is not a failed test, so the
    failures are counted beside the rate rather than in it."""
    rate = fraction(tier.pass_rate, tier.n_tested)
    failed = tier.n - tier.n_ok
    if not failed:
        return rate
    return Cell(f"{rate} · {failed} failed request{'s' * (failed != 1)} not counted", rate.muted)


def scenario_rows(summary: RunSummary) -> list[tuple[str, list[Cell]]]:
    """TTFT and E2E P50 per scenario and tier (the vendor's claim lives in one scenario)."""
    rows = []
    for scenario, stats in sorted(summary.by_scenario.items()):
        cells = []
        for metric in ("ttft_ms", "e2e_ms"):
            for tier in TIERS:
                cells.append(percentile(stats.tier(tier).metric(metric), "p50", summary.min_n))
        rows.append((scenario, cells))
    return rows


@requires(VIEW_RUN)
@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.get_run(run_id)
    chosen = {k: request.GET.get(k, "").strip()[:200] for k in FILTERS}
    try:
        number = int(request.GET.get("page") or 1)
    except ValueError:
        number = 1
    samples = selectors.run_samples_page(run, page=number, **chosen)
    summary = run.summary_obj
    speed = summary.speedup
    context = {
        "run": run,
        "pair": run.pair,
        "simulated": run.pair.simulated,
        "samples": samples,
        "chosen": chosen,
        "query": urlencode({k: v for k, v in chosen.items() if v}),
        "tier_rows": tier_rows(summary) if summary.has_tiers else [],
        "scenario_rows": scenario_rows(summary),
        "sim_rows": similarity_rows(summary),
        "speed": {k: speedup(getattr(speed, k)) for k in ("ttft", "e2e", "decode")}
        if summary.has_tiers
        else {},
        "polling": run.active,
        "tiers": TIERS,
        "cost": {k: usd(v) for k, v in budget.run_cost(run).items()},
        "agent_rows": run_agent_rows(run),
        "budget": summary.budget,
    }
    return render_page(request, "monitor/run.html", "live", context)


@requires(VIEW_SAMPLE)
@require_GET
def sample_detail(request: HttpRequest, sample_id: int) -> HttpResponse:
    sample = selectors.get_sample(sample_id)
    context = {"sample": sample, "run": sample.run, "simulated": sample.endpoint.simulated}
    return render_page(request, "monitor/sample.html", "row", context)
