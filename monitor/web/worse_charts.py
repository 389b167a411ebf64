"""Plotly figures of the "Is it worse?" page, from a capability window report
(``monitor.judging.capability.WindowReport``), never from samples directly.

Pass rates are shares of answers that passed their check (unit tests, tool-call answer, JSON
format, constraints), in percent, with Wilson 95% intervals; differences are in percentage
points, fast minus base, with the drop the window could detect at 80% power beside them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from monitor.judging.capability import WindowReport
from monitor.web.chart_kit import (
    TIER_COLOURS,
    Chart,
    Figure,
    charts_of,
    figure,
    merged,
    titled_layout,
)

DIFF, DETECTABLE = "#D55E00", "#555555"
ROW_PX = 34
LEFT_PX = 240  # room for category names such as "long_tail/multi_step_debugging"
# below the plot: at the right the legend squeezes a half-width chart's plot area
LEGEND_BELOW = {"orientation": "h", "x": 0, "xanchor": "left", "y": -0.32, "yanchor": "top"}


def _height(rows: int) -> int:
    return max(300, 150 + ROW_PX * rows)


def pass_rate_figure(report: WindowReport) -> Figure:
    cats = list(report.rates)
    data = []
    for tier in ("base", "fast"):
        rates = [report.rates[c][tier] for c in cats]
        x = [100 * r.rate if r.rate is not None else None for r in rates]
        data.append(
            dict(
                type="bar",
                y=cats,
                x=x,
                orientation="h",
                name=f"{tier} tier",
                marker={"color": TIER_COLOURS[tier]},
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": [100 * ((r.high or 0) - (r.rate or 0)) for r in rates],
                    "arrayminus": [100 * ((r.rate or 0) - (r.low or 0)) for r in rates],
                },
                customdata=[[r.passed, r.n] for r in rates],
                hovertemplate="%{y}: %{x:.0f}% (%{customdata[0]} of %{customdata[1]} answers)"
                f"<extra>{tier}</extra>",
            )
        )
    n = sum(r.n for c in cats for r in report.rates[c].values())
    layout = titled_layout(
        title="Pass rate per category and tier",
        subtitle=f"{n} checked answers over {report.runs} runs · bars: Wilson 95% interval",
        x_title="answers that pass their check (%)",
        y_title="category",
        height=_height(2 * len(cats)) + 40,
        top=90,
        barmode="group",
        yaxis={"autorange": "reversed"},
    )
    return figure(
        data,
        merged(
            layout, xaxis={"range": [0, 105]}, margin={"l": LEFT_PX, "b": 110}, legend=LEGEND_BELOW
        ),
    )


def difference_figure(report: WindowReport) -> Figure:
    rows = [r for r in report.results if r.diff_points is not None]
    cats = [r.category for r in rows]
    bar = dict(
        type="bar",
        y=cats,
        x=[r.diff_points for r in rows],
        orientation="h",
        name="fast − base",
        marker={"color": DIFF},
        customdata=[
            [r.n_cases, "—" if r.p_adjusted is None else f"{r.p_adjusted:.3g}"] for r in rows
        ],
        hovertemplate="%{y}: %{x:+.1f} points over %{customdata[0]} paired cases, "
        "p (Holm) %{customdata[1]}<extra></extra>",
    )
    detectable = dict(
        type="scatter",
        y=cats,
        x=[-r.mde_points if r.mde_points is not None else None for r in rows],
        mode="markers",
        name="drop detectable at 80% power",
        marker={
            "color": DETECTABLE,
            "symbol": "line-ns",
            "size": 18,
            "line": {"width": 3, "color": DETECTABLE},
        },
        hovertemplate="%{y}: would detect a drop of %{x:.0f} points<extra></extra>",
    )
    n = sum(r.n_cases for r in rows)
    layout = titled_layout(
        title="Paired difference per category, fast minus base",
        subtitle=f"{n} paired cases over {report.runs} runs · stratified permutation test, "
        "Holm across categories",
        x_title="fast − base (percentage points; < 0: fast worse)",
        y_title="category",
        height=_height(2 * len(cats)) + 40,
        top=90,
        yaxis={"autorange": "reversed"},
    )
    lows = [v for r in rows for v in (r.diff_points or 0.0, -(r.mde_points or 0.0))]
    highs = [r.diff_points or 0.0 for r in rows]
    xaxis = {
        "zeroline": True,
        "zerolinewidth": 2,
        "zerolinecolor": "#333333",
        "range": [min(lows, default=-10) - 8, max(max(highs, default=0), 0) + 8],
    }
    return figure(
        [bar, detectable],
        merged(layout, xaxis=xaxis, margin={"l": LEFT_PX, "b": 110}, legend=LEGEND_BELOW),
    )


@dataclass(frozen=True)
class SizedChart(Chart):
    """A chart whose div is as tall as its figure: the rows grow with the categories, and a
    div of the default CSS height (380 px) let the figure spill over the table below it."""

    height: int = 0


def worse_charts(report: WindowReport) -> list[Chart]:
    if report.empty:
        return []
    figures = [
        ("chart-pass-rate", "Pass rate per category and tier", pass_rate_figure(report)),
        ("chart-difference", "Paired difference per category", difference_figure(report)),
    ]
    return [
        SizedChart(**asdict(chart), height=int(fig["layout"]["height"]))
        for chart, (_, _, fig) in zip(charts_of(figures), figures, strict=True)
    ]
