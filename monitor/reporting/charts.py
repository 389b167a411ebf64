"""The SLA report's charts as SVG, drawn server-side with matplotlib (no browser, no network).

plotly's static export needs kaleido and a Chrome; matplotlib's SVG backend needs neither and
WeasyPrint embeds its output as is. ``Figure`` is used without pyplot: no global state, so two
workers rendering at once cannot draw into each other's chart. Colours are the pages' own.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from matplotlib.figure import Figure

from monitor.reporting.sla import SlaReport

PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#7a4cc2")


def _svg(figure: Figure) -> str:
    out = io.StringIO()
    figure.savefig(out, format="svg", bbox_inches="tight")
    return out.getvalue()


def _daily_chart(
    report: SlaReport,
    key: str,
    title: str,
    ylabel: str,
    scale: Callable[[float], float] = lambda v: v,
) -> str | None:
    """One line per endpoint over the period's days; None when no endpoint has a value."""
    figure = Figure(figsize=(7.2, 2.3))
    ax = figure.add_subplot()
    drawn = False
    for i, row in enumerate(report.endpoints):
        points = [(d["day"], scale(d[key])) for d in row.daily if d[key] is not None]
        if not points:
            continue
        drawn = True
        days, values = zip(*points, strict=True)
        label = row.name + (" (simulated)" if row.simulated else "")
        ax.plot(
            days,
            values,
            marker="o",
            markersize=3,
            linewidth=1.5,
            color=PALETTE[i % len(PALETTE)],
            label=label,
        )
    if not drawn:
        return None
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_ylabel(ylabel, fontsize=8)
    first, last = report.start.date(), (report.end - timedelta(days=1)).date()
    ax.set_xlim(first - timedelta(hours=6), last + timedelta(hours=6))  # type: ignore[arg-type]
    ax.tick_params(labelsize=7)
    ax.grid(True, color="#e3e6eb", linewidth=0.6)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(fontsize=7, frameon=False, loc="best")
    figure.autofmt_xdate(rotation=30)
    return _svg(figure)


def report_charts(report: SlaReport) -> dict[str, Any]:
    """{name: SVG text} of the charts that have data: daily availability (429s apart), daily
    TTFT P95 (days below the minimum n left out), daily served-tier downgrade rate."""
    charts = {
        "availability": _daily_chart(
            report, "availability", "Availability per day (429s apart)", "%", lambda v: 100 * v
        ),
        "ttft_p95": _daily_chart(
            report, "ttft_p95", f"TTFT P95 per day, ms (days with n ≥ {report.min_n})", "ms"
        ),
        "downgrade": _daily_chart(
            report, "downgrade_rate", "Served-tier downgrade rate per day", "%", lambda v: 100 * v
        ),
    }
    return {name: svg for name, svg in charts.items() if svg}
