"""The chart kit every page's charts share: one look, colours, and figures as safe JSON.

Figures are built server-side with plotly; the browser only draws: each figure travels as JSON
inside ``<script type="application/json">`` and ``static/js/charts.js`` hands it to the
plotly.js served from ``static/`` (no CDN).

A figure is a plain dict (``{"data": [...], "layout": {...}}``, the JSON plotly.js reads), not a
``plotly.graph_objects.Figure``: building and validating plotly objects (``update_layout``,
``make_subplots``, ``add_trace``) was most of a cold page's CPU (at 10 M samples a cold pair
page 175 → 60 ms, speed 150 → 85 ms; docs/benchmarks.md, "At 10 M samples"), for the same JSON.
``tests/monitor/web/test_chart_json.py`` holds the builders to that JSON.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import plotly.io as pio
from plotly.io.json import to_json_plotly

from monitor.models import Run

# The one look of every chart: plotly's "plotly_white" template, read once, in every layout.
TEMPLATE: dict[str, Any] = pio.templates["plotly_white"].to_plotly_json()
Figure = dict[str, Any]

TIERS = ("base", "fast")
# Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
TIER_COLOURS = {"base": "#0072B2", "fast": "#D55E00"}
TIER_BANDS = {"base": "rgba(0,114,178,0.15)", "fast": "rgba(213,94,0,0.15)"}
SIM_COLOURS = {"fast_vs_base": "#CC79A7", "base_vs_base": "#009E73"}
HEIGHT_PX = 380

# What a <script> element must not contain verbatim (the escapes of Django's json_script).
_SCRIPT_ESCAPES = {ord(">"): "\\u003E", ord("<"): "\\u003C", ord("&"): "\\u0026"}


@dataclass(frozen=True)
class Chart:
    """One figure for a template: a DOM id, its title (for tests and text) and its JSON."""

    id: str
    title: str
    json: str


def charts_of(figures: list[tuple[str, str, Figure]]) -> list[Chart]:
    """(DOM id, title, figure) triples as template-ready charts."""
    return [Chart(id=cid, title=title, json=figure_json(fig)) for cid, title, fig in figures]


def figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> Figure:
    """Traces (each with its ``type``) and a layout as a figure in the one look."""
    return {"data": data, "layout": {**layout, "template": TEMPLATE}}


def figure_json(fig: Figure) -> str:
    """The figure as JSON that is safe verbatim inside ``<script type="application/json">``
    (plotly's encoder, as ``Figure.to_json`` uses: NaN and dates as plotly.js reads them)."""
    return to_json_plotly(fig).translate(_SCRIPT_ESCAPES)


def merged(base: dict[str, Any], **updates: Any) -> dict[str, Any]:
    """``base`` with ``updates`` merged in, nested dicts key by key (as ``update_layout``)."""
    out = dict(base)
    for key, value in updates.items():
        old = out.get(key)
        out[key] = (
            merged(old, **value) if isinstance(old, dict) and isinstance(value, dict) else value
        )
    return out


def log_ticks(low: float, high: float) -> dict[str, Any]:
    """Ticks at 1, 2 and 5 × 10^k from ``low`` to ``high`` (> 0), each labelled in full:
    plotly's own log ticks label 20 and 50 as "2" and "5", so "5" stood above "10"."""
    values = [
        m * 10.0**k
        for k in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
        for m in (1, 2, 5)
    ]
    shown = [round(v, 12) for v in values if low <= v <= high]
    return {"tickvals": shown, "ticktext": [f"{v:g}" for v in shown]}


def run_time(run: Run) -> str:
    when = run.finished_at or run.started_at or run.created_at
    return when.isoformat()


def n_range(ns: list[int]) -> str:
    if not ns:
        return "no runs"
    lo, hi = min(ns), max(ns)
    return f"n = {lo}" if lo == hi else f"n = {lo}–{hi}"


def titled_layout(
    *,
    title: str,
    subtitle: str,
    x_title: str,
    y_title: str,
    height: int = HEIGHT_PX,
    top: int = 70,
    yaxis: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The one look of every chart: title with a subtitle (n, method), axis titles with units,
    legend at the right (below the plot it collides with the axis title on narrow charts)."""
    return dict(
        title={"text": f"{title}<br><sup>{subtitle}</sup>", "x": 0.01, "xanchor": "left"},
        height=height,
        margin={"l": 70, "r": 20, "t": top, "b": 60},
        legend={"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top",
                "traceorder": "grouped"},
        font={"family": "system-ui, sans-serif", "size": 13},
        xaxis={"title": {"text": x_title}},
        yaxis={"title": {"text": y_title}, **(yaxis or {})},
        **extra,
    )  # fmt: skip
