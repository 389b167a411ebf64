"""The browser pages: function views, one template per page serving the page and its fragment.

An htmx request (``request.htmx``) gets only the page's live partial, ``"page.html#name"``
(django-template-partials), so polling and buttons swap in place. Views read through
``monitor.selectors`` and format the stored run summaries (the run summary); they never recompute.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from monitor import charts, selectors

TIERS = ("fast", "base")
PERCENTILES = ("p50", "p95")


@dataclass(frozen=True)
class Cell:
    """A formatted value; ``muted`` when it is an absence (no data, n too small)."""

    text: str
    muted: bool = False

    def __str__(self) -> str:
        return self.text


NO_DATA = Cell("—", muted=True)


def _min_n(summary: dict[str, Any]) -> int:
    return int(summary.get("min_n") or settings.TIERWATCH_MIN_N)


def percentile(stat: dict[str, Any] | None, key: str, min_n: int, unit: str = "ms") -> Cell:
    """A percentile with its n, or "n too small (n=3)": none is shown below the minimum n."""
    if not stat:
        return NO_DATA
    n = int(stat.get("n") or 0)
    if n < min_n:
        return Cell(f"n too small (n={n})", muted=True)
    value = stat.get(key)
    if value is None:
        return NO_DATA
    return Cell(f"{value:,.0f} {unit} (n={n})" if value >= 10 else f"{value:.1f} {unit} (n={n})")


def fraction(value: float | None, n: int | None = None) -> Cell:
    """A stored fraction (0–1) as a percentage, with its n when known."""
    if value is None:
        return NO_DATA
    return Cell(f"{100 * value:.1f}%" + (f" (n={n})" if n is not None else ""))


def speedup(value: float | None) -> Cell:
    return NO_DATA if value is None else Cell(f"{value:.2f}×")


def similarity(sim: dict[str, Any] | None) -> Cell:
    if not sim or sim.get("mean_ratio") is None:
        return NO_DATA
    return fraction(sim["mean_ratio"], sim.get("n"))


def similarity_rows(sims: dict[str, Any]) -> list[tuple[str, list[Cell]]]:
    """Fast-vs-base beside base-vs-base, the noise floor it must be judged against."""
    rows = []
    for key, label in (("fast_vs_base", "fast vs base"),
                       ("base_vs_base", "base vs base (noise floor)")):
        sim = sims.get(key) or {}
        div = sim.get("first_div_p50")
        rows.append((label, [
            Cell(str(sim.get("n", 0))),
            similarity(sim),
            fraction(sim.get("median_ratio")),
            fraction(sim.get("exact_rate")),
            NO_DATA if div is None else Cell(f"{div:,.0f} chars"),
        ]))
    return rows


def tier_rows(summary: dict[str, Any]) -> list[tuple[str, list[Cell]]]:
    """The run page's per-tier summary: one row per measure, one column per tier."""
    min_n = _min_n(summary)
    tiers = [(summary.get("tiers") or {}).get(t) or {} for t in TIERS]

    def row(label: str, cell) -> tuple[str, list[Cell]]:
        return label, [cell(t) for t in tiers]

    rows = [row("requests / successful", lambda t: Cell(f"{t.get('n', 0)} / {t.get('n_ok', 0)}"))]
    for metric, label in (("ttft_ms", "TTFT"), ("e2e_ms", "E2E"), ("tpot_ms", "TPOT")):
        for p in PERCENTILES:
            cells = [percentile(t.get(metric), p, min_n) for t in tiers]
            rows.append((f"{label} {p.upper()}", cells))
    rows += [
        row("decode speed P50", lambda t: _number(t.get("decode_tps_p50"), "tok/s")),
        row("availability (429s excluded)", lambda t: fraction(t.get("availability"))),
        row("rate limited (429)", lambda t: Cell(str(t.get("rate_limited", 0)))),
        row("errors by class", lambda t: _errors(t.get("errors"))),
        row("output tokens: server / estimated",
            lambda t: Cell(f"{t.get('tokens_server', 0):,} / {t.get('tokens_estimated', 0):,}")),
        row("samples with >10% token mismatch", lambda t: Cell(str(t.get("token_mismatch", 0)))),
        row("unit-test pass rate", lambda t: fraction(t.get("pass_rate"), t.get("n_tested"))),
        row("model ids returned", lambda t: _listing(t.get("model_ids"))),
        row("system fingerprints", lambda t: _listing(t.get("fingerprints"))),
    ]
    return rows


def _number(value: float | None, unit: str) -> Cell:
    return NO_DATA if value is None else Cell(f"{value:,.1f} {unit}")


def _listing(values: list[str] | None) -> Cell:
    return Cell(", ".join(values)) if values else NO_DATA


def _errors(errors: dict[str, int] | None) -> Cell:
    if not errors:
        return Cell("none", muted=True)
    return Cell(", ".join(f"{k}: {v}" for k, v in sorted(errors.items())))


def scenario_rows(summary: dict[str, Any]) -> list[tuple[str, list[Cell]]]:
    """TTFT and E2E P50 per scenario and tier (the vendor's claim lives in one scenario)."""
    min_n = _min_n(summary)
    rows = []
    for scenario, tiers in sorted((summary.get("by_scenario") or {}).items()):
        cells = []
        for metric in ("ttft_ms", "e2e_ms"):
            for tier in TIERS:
                cells.append(percentile(((tiers or {}).get(tier) or {}).get(metric), "p50", min_n))
        rows.append((scenario, cells))
    return rows


def overview_row(item: selectors.PairOverview) -> dict[str, Any]:
    summary = item.last_done.summary if item.last_done else {}
    min_n = _min_n(summary)
    tiers = summary.get("tiers") or {}
    sims = summary.get("similarity") or {}
    speed = summary.get("speedup") or {}
    return {
        "item": item,
        "ttft_p95": [percentile((tiers.get(t) or {}).get("ttft_ms"), "p95", min_n) for t in TIERS],
        "speedup_ttft": speedup(speed.get("ttft")),
        "speedup_e2e": speedup(speed.get("e2e")),
        "sim_fast_base": similarity(sims.get("fast_vs_base")),
        "sim_base_base": similarity(sims.get("base_vs_base")),
        "pass_rate": [fraction((tiers.get(t) or {}).get("pass_rate"),
                               (tiers.get(t) or {}).get("n_tested")) for t in TIERS],
    }


def _page(request: HttpRequest, template: str, partial: str, context: dict[str, Any]):
    """The full page, or only its partial for htmx (one template serves both)."""
    # A history-restore request wants the whole page back, not the fragment.
    fragment = request.htmx and not request.htmx.history_restore_request
    name = f"{template}#{partial}" if fragment else template
    return render(request, name, context)


@login_required
@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    rows = [overview_row(item) for item in selectors.pairs_overview()]
    return _page(request, "monitor/overview.html", "table", {"rows": rows})


def _pair_context(pair, **extra: Any) -> dict[str, Any]:
    runs = selectors.pair_runs(pair)
    simulated = pair.fast.simulated or pair.base.simulated
    return {
        "pair": pair,
        "simulated": simulated,
        "runs": runs,
        "charts": charts.pair_charts(selectors.pair_trend_runs(pair), simulated=simulated),
        "alerts": selectors.open_alerts(pair),
        "polling": selectors.has_active_run(runs),
        **extra,
    }


@login_required
@require_GET
def pair_detail(request: HttpRequest, name: str) -> HttpResponse:
    pair = selectors.get_pair_for_user(request.user, name)
    return _page(request, "monitor/pair.html", "charts", _pair_context(pair))


@login_required
@require_POST
def run_probe(request: HttpRequest, name: str) -> HttpResponse:
    """Queue a manual probe run of the pair; htmx gets the refreshed live part of the page."""
    from monitor.services.runs import enqueue_run  # the service module imports Celery tasks

    pair = selectors.get_pair_for_user(request.user, name)
    run = enqueue_run(pair=pair, trigger="manual")
    if not request.htmx:
        return redirect("monitor:run", run_id=run.pk)
    return render(request, "monitor/pair.html#charts", _pair_context(pair, queued=run))


@login_required
@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run, samples = selectors.run_with_samples(run_id)
    summary = run.summary or {}
    sims = summary.get("similarity") or {}
    context = {
        "run": run,
        "pair": run.pair,
        "simulated": run.pair.fast.simulated or run.pair.base.simulated,
        "samples": samples,
        "samples_capped": len(samples) >= selectors.MAX_SAMPLES_SHOWN,
        "tier_rows": tier_rows(summary) if summary.get("tiers") else [],
        "scenario_rows": scenario_rows(summary),
        "sim_rows": similarity_rows(sims),
        "speed": {k: speedup(v) for k, v in (summary.get("speedup") or {}).items()},
        "polling": run.status in ("queued", "running"),
        "tiers": TIERS,
    }
    return _page(request, "monitor/run.html", "live", context)


@login_required
@require_GET
def sample_detail(request: HttpRequest, sample_id: int) -> HttpResponse:
    sample = selectors.get_sample(sample_id)
    context = {"sample": sample, "run": sample.run, "simulated": sample.endpoint.simulated}
    return _page(request, "monitor/sample.html", "row", context)


@login_required
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    return render(request, "monitor/metrics.html", {"min_n": settings.TIERWATCH_MIN_N})



@login_required
@require_GET
def benchmarks_doc(request: HttpRequest) -> HttpResponse:
    """docs/benchmarks.md as sections of plain text, so the metrics page can link its figures."""
    path = settings.BASE_DIR / "docs" / "benchmarks.md"
    if not path.is_file():
        raise Http404("docs/benchmarks.md has not been written yet")
    sections = markdown_sections(path.read_text(encoding="utf-8"))
    return render(request, "monitor/benchmarks.html", {"sections": sections})


def markdown_sections(text: str) -> list[dict[str, Any]]:
    """Split markdown at its headings: (level, title, anchor slug, body). No markdown library:
    the body is shown as written."""
    sections: list[dict[str, Any]] = [{"level": 1, "title": "", "slug": "", "body": []}]
    for line in text.splitlines():
        heading = re.match(r"^(#{1,4})\s+(.*)$", line)
        if heading:
            title = heading.group(2).strip()
            slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
            level = len(heading.group(1))
            sections.append({"level": level, "title": title, "slug": slug, "body": []})
        else:
            sections[-1]["body"].append(line)
    for s in sections:
        s["body"] = "\n".join(s["body"]).strip("\n")
    return [s for s in sections if s["title"] or s["body"]]
