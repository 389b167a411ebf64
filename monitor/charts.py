"""Plotly figures of a pair's runs, built server-side from the runs' stored summaries.

The browser only draws: each figure travels as JSON inside ``<script type="application/json">``
and ``static/js/charts.js`` hands it to the plotly.js served from ``static/`` (no CDN). Charts
read ``Run.summary`` and never recompute a percentile; a percentile whose n is
below the run's minimum n is left out (a gap), as docs/measures.md says.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from monitor.models import Run

TIERS = ("base", "fast")
# Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
TIER_COLOURS = {"base": "#0072B2", "fast": "#D55E00"}
TIER_BANDS = {"base": "rgba(0,114,178,0.15)", "fast": "rgba(213,94,0,0.15)"}
SIM_COLOURS = {"fast_vs_base": "#CC79A7", "base_vs_base": "#009E73"}
DEFAULT_MIN_N = 5
HEIGHT_PX = 380

# What a <script> element must not contain verbatim (the escapes of Django's json_script).
_SCRIPT_ESCAPES = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}


@dataclass(frozen=True)
class Chart:
    """One figure for a template: a DOM id, its title (for tests and text) and its JSON."""

    id: str
    title: str
    json: str


def figure_json(fig: go.Figure) -> str:
    """The figure as JSON that is safe verbatim inside ``<script type="application/json">``."""
    return fig.to_json().translate(_SCRIPT_ESCAPES)


def _run_time(run: Run) -> str:
    when = run.finished_at or run.started_at or run.created_at
    return when.isoformat()


def _min_n(run: Run) -> int:
    return int(run.summary.get("min_n") or DEFAULT_MIN_N)


def _n_range(ns: list[int]) -> str:
    if not ns:
        return "no runs"
    lo, hi = min(ns), max(ns)
    return f"n = {lo}" if lo == hi else f"n = {lo}–{hi}"


def _tier(run: Run, tier: str) -> dict[str, Any]:
    return (run.summary.get("tiers") or {}).get(tier) or {}


def titled_layout(
    fig: go.Figure, *, title: str, subtitle: str, x_title: str, y_title: str,
    height: int = HEIGHT_PX, top: int = 70, yaxis: dict[str, Any] | None = None, **extra: Any,
) -> None:
    """The one look of every chart: title with a subtitle (n, method), axis titles with units,
    legend at the right (below the plot it collides with the axis title on narrow charts)."""
    fig.update_layout(
        title={"text": f"{title}<br><sup>{subtitle}</sup>", "x": 0.01, "xanchor": "left"},
        height=height,
        margin={"l": 70, "r": 20, "t": top, "b": 60},
        legend={"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top",
                "traceorder": "grouped"},
        template="plotly_white",
        font={"family": "system-ui, sans-serif", "size": 13},
        xaxis={"title": {"text": x_title}},
        yaxis={"title": {"text": y_title}, **(yaxis or {})},
        **extra,
    )  # fmt: skip


def _layout(fig: go.Figure, title: str, subtitle: str, y_title: str, **yaxis: Any) -> None:
    titled_layout(fig, title=title, subtitle=subtitle, x_title="run time (UTC)", y_title=y_title,
                  yaxis=yaxis, hovermode="x unified")


def latency_figure(runs: Sequence[Run], metric: str, label: str, *, note: str = "") -> go.Figure:
    """P50 line and P50–P95 band per tier of ``metric`` (``ttft_ms`` or ``e2e_ms``) per run."""
    fig = go.Figure()
    ns: list[int] = []
    hidden = 0
    for tier in TIERS:
        xs, p50, p95, n_col = [], [], [], []
        for run in runs:
            stat = _tier(run, tier).get(metric) or {}
            n = int(stat.get("n") or 0)
            enough = n >= _min_n(run)
            hidden += 0 if enough else 1
            if enough:
                ns.append(n)
            xs.append(_run_time(run))
            p50.append(stat.get("p50") if enough else None)
            p95.append(stat.get("p95") if enough else None)
            n_col.append(n)
        colour = TIER_COLOURS[tier]
        fig.add_trace(go.Scatter(
            x=xs, y=p50, name=f"{tier} P50", legendgroup=tier, mode="lines+markers",
            line={"color": colour, "width": 2}, customdata=n_col,
            hovertemplate=f"{tier} P50 %{{y:.0f}} ms (n=%{{customdata}})<extra></extra>",
        ))
        fig.add_trace(go.Scatter(
            x=xs, y=p95, name=f"{tier} P95", legendgroup=tier, mode="lines",
            line={"color": colour, "width": 1, "dash": "dot"}, fill="tonexty",
            fillcolor=TIER_BANDS[tier], customdata=n_col,
            hovertemplate=f"{tier} P95 %{{y:.0f}} ms (n=%{{customdata}})<extra></extra>",
        ))
    subtitle = f"solid P50, dotted P95, band between · {_n_range(ns)} successes per tier per run"
    if hidden:
        subtitle += f" · {hidden} tier-runs below min n left out"
    _layout(fig, f"{label} per run: P50 and P95 per tier{note}", subtitle, f"{label} (ms)",
            rangemode="tozero")
    return fig


def _percent_series(
    runs: Sequence[Run], block: Callable[[Run], dict[str, Any]], value: str, count: str,
    ns: list[int],
) -> tuple[list[str], list[float | None], list[int]]:
    """(run times, value in percent or None, n) per run from a fraction stored in a summary
    block; each non-zero n is also added to ``ns`` for the chart's subtitle."""
    xs, ys, n_col = [], [], []
    for run in runs:
        data = block(run)
        fraction, n = data.get(value), int(data.get(count) or 0)
        xs.append(_run_time(run))
        ys.append(None if fraction is None else 100.0 * fraction)
        n_col.append(n)
        if n:
            ns.append(n)
    return xs, ys, n_col


def similarity_figure(runs: Sequence[Run], *, note: str = "") -> go.Figure:
    """Mean Indel similarity per run, fast-vs-base beside the base-vs-base noise floor.

    Ratios are stored as fractions (0–1, rapidfuzz's normalized Indel similarity) and shown in
    percent. A fast-vs-base line well under the base-vs-base line is the signal; the floor says
    how much two batches of the same tier already differ.
    """
    fig = go.Figure()
    ns: list[int] = []
    labels = {"fast_vs_base": "fast vs base", "base_vs_base": "base vs base<br>(noise floor)"}
    for key, name in labels.items():
        xs, ys, n_col = _percent_series(
            runs, lambda run, key=key: (run.summary.get("similarity") or {}).get(key) or {},
            "mean_ratio", "n", ns,
        )
        fig.add_trace(go.Scatter(
            x=xs, y=ys, name=name, mode="lines+markers", customdata=n_col,
            line={"color": SIM_COLOURS[key], "width": 2,
                  "dash": "dash" if key == "base_vs_base" else "solid"},
            hovertemplate=f"{name.replace('<br>', ' ')} %{{y:.1f}}%"
                          " (n=%{customdata} text pairs)<extra></extra>",
        ))
    _layout(fig, f"Text similarity per run (temperature 0){note}",
            f"mean over {_n_range(ns)} text pairs per run · 100% = identical",
            "mean Indel similarity (%)", range=[0, 102])
    return fig


def pass_rate_figure(runs: Sequence[Run], *, note: str = "") -> go.Figure:
    """Unit-test pass rate per tier per run (coding cases only), in percent."""
    fig = go.Figure()
    ns: list[int] = []
    for tier in TIERS:
        xs, ys, n_col = _percent_series(
            runs, lambda run, tier=tier: _tier(run, tier), "pass_rate", "n_tested", ns
        )
        fig.add_trace(go.Scatter(
            x=xs, y=ys, name=f"{tier}", mode="lines+markers", customdata=n_col,
            line={"color": TIER_COLOURS[tier], "width": 2},
            hovertemplate=f"{tier} %{{y:.0f}}% passed (n=%{{customdata}} tested)<extra></extra>",
        ))
    _layout(fig, f"Unit-test pass rate per run{note}",
            f"generated code against the case's tests · {_n_range(ns)} tested per tier per run",
            "pass rate (%)", range=[0, 105])
    return fig


def downgrade_figure(runs: Sequence[Run], *, note: str = "") -> go.Figure | None:
    """Served-tier downgrade rate per run of the fast tier (``evals.latency.downgrades``), in
    percent; None when no run's fast endpoint expects a tier."""
    ns: list[int] = []
    xs, ys, n_col = _percent_series(
        runs, lambda run: _tier(run, "fast").get("served_tier") or {}, "downgrade_rate",
        "n_reported", ns,
    )
    if all(y is None for y in ys):
        return None
    fig = go.Figure(go.Scatter(
        x=xs, y=ys, name="fast", mode="lines+markers", customdata=n_col,
        line={"color": TIER_COLOURS["fast"], "width": 2},
        hovertemplate="fast %{y:.1f}% downgraded (n=%{customdata} reported)<extra></extra>",
    ))
    _layout(fig, f"Served-tier downgrade rate per run{note}",
            f"requests reporting another tier than the expected one · {_n_range(ns)} reported "
            "per run", "downgraded (%)", range=[0, 105])
    return fig


def pair_charts(runs: Sequence[Run], *, simulated: bool = False) -> list[Chart]:
    """The pair page's four charts over the finished probe runs among ``runs`` (any order).

    Probe runs only: they share temperature 0, so their similarity and pass rates compare.
    """
    done = sorted(
        (r for r in runs if r.status == "done" and r.kind == "probe" and r.summary.get("tiers")),
        key=_run_time,
    )
    if not done:
        return []
    note = " · simulated" if simulated else ""
    figures = [
        ("chart-ttft", "Time to first token (TTFT)",
         latency_figure(done, "ttft_ms", "TTFT", note=note)),
        ("chart-e2e", "End-to-end latency (E2E)",
         latency_figure(done, "e2e_ms", "E2E", note=note)),
        ("chart-similarity", "Text similarity", similarity_figure(done, note=note)),
        ("chart-pass-rate", "Unit-test pass rate", pass_rate_figure(done, note=note)),
    ]
    downgraded = downgrade_figure(done, note=note)
    if downgraded is not None:
        figures.append(("chart-downgrade", "Served-tier downgrades", downgraded))
    return [Chart(id=cid, title=title, json=figure_json(fig)) for cid, title, fig in figures]
