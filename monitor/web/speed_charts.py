"""Plotly figures of the speed page, built server-side from a ``speed_report`` and the runs'
stored summaries (``by_scenario`` percentiles are never recomputed here).

Every figure has a title, axis titles with units, a legend and its n; values whose n is below
the minimum n are left out (a gap). Colours and JSON embedding come from
``monitor.web.chart_kit`` so every page looks alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monitor.derived.run_summary import LoadLevel
from monitor.judging.speed import BREAKDOWN, METRICS
from monitor.models import Run, RunStatus
from monitor.web.chart_kit import (
    TIER_BANDS,
    TIER_COLOURS,
    TIERS,
    Chart,
    Figure,
    figure,
    figure_json,
    log_ticks,
    merged,
    titled_layout,
)

PART_COLOURS = {
    "connect": "#999999",
    "headers": "#E69F00",
    "prefill": "#56B4E9",
    "decode": "#009E73",
}
METRIC_COLOURS = {"ttft": "#0072B2", "decode": "#009E73", "e2e": "#D55E00"}
HEIGHT_PX = 400


@dataclass(frozen=True)
class SpeedChart(Chart):
    """A chart with the height its div needs (the panels of a per-scenario figure stack)."""

    height: int = HEIGHT_PX


def _layout(
    title: str, subtitle: str, x_title: str, y_title: str, height: int = HEIGHT_PX, **yaxis: Any
) -> dict[str, Any]:
    return titled_layout(
        title=title,
        subtitle=subtitle,
        x_title=x_title,
        y_title=y_title,
        height=height,
        top=80,
        yaxis=yaxis,
    )


def speedup_figure(report: dict[str, Any], note: str) -> Figure:
    """Times faster per scenario and metric, with its interval where it has one (20 pairs or
    more), beside the claim; an estimate without an interval is drawn hollow."""
    data, shapes = [], []
    scenarios = report["scenarios"]
    for key, _field, label in METRICS:
        ys, lo, hi, ns = [], [], [], []
        for scn in scenarios:
            ci = report["speedup"].get(scn, {}).get(key) or {}
            shown = ci.get("low") is not None
            ys.append(ci.get("estimate"))
            lo.append(ci["estimate"] - ci["low"] if shown else None)
            hi.append(ci["high"] - ci["estimate"] if shown else None)
            ns.append(ci.get("n", 0))
        hollow = [lo_ is None for lo_ in lo]
        data.append(
            dict(
                type="scatter",
                x=scenarios,
                y=ys,
                name=label,
                mode="markers",
                marker={
                    "color": METRIC_COLOURS[key],
                    "size": 10,
                    "symbol": ["circle-open" if h else "circle" for h in hollow],
                },
                error_y={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
                customdata=ns,
                hovertemplate=f"{label} %{{y:.2f}}x (n=%{{customdata}} pairs)<extra></extra>",
            )
        )
    # Reference lines as shapes across the plot, named by legend-only traces: add_hline's own
    # annotation text lands at 10^y on a log axis, and grouped traces would be offset.
    claimed = report.get("claimed")
    for y, name, line in (
        (claimed, f"claimed {claimed or 0:g}x", {"color": "#CC79A7", "dash": "dash"}),
        (1.0, "1x (no faster)", {"color": "#999999", "width": 1}),
    ):
        if y:
            shapes.append(
                {
                    "type": "line",
                    "xref": "x domain",
                    "x0": 0,
                    "x1": 1,
                    "yref": "y",
                    "y0": y,
                    "y1": y,
                    "line": line,
                }
            )
            data.append(
                dict(type="scatter", x=[None], y=[None], mode="lines", line=line, name=name)
            )
    n = sum(report["n_pairs"].values())
    layout = _layout(
        f"Speed-up of the fast tier per scenario{note}",
        f"base/fast, 95% cluster-bootstrap interval over runs · n = {n} pairs in "
        f"all · hollow: no interval below {report.get('min_pairs', 20)} pairs · "
        "failed probes count as slowest",
        "scenario",
        "times faster (×, log scale)",
        type="log",
        **log_ticks(0.1, 100),
    )
    return figure(data, {**layout, "shapes": shapes, "scattermode": "group"})


def _runs_with_scenarios(runs: Sequence[Run]) -> list[Run]:
    done = [r for r in runs if r.status == RunStatus.DONE and r.summary_obj.by_scenario]
    return sorted(done, key=lambda r: r.finished_at or r.created_at)


def thin_scenarios(runs: Sequence[Run], scenarios: Sequence[str], metric: str) -> dict[str, str]:
    """Scenarios where no run has the minimum n of ``metric`` on both tiers, with why
    ("n = 3 < 5: not enough samples"): a panel of them would be an empty 0–4 ms axis."""
    runs = _runs_with_scenarios(runs)
    out = {}
    for scn in scenarios:
        best, need = 0, None
        for run in runs:
            summary = run.summary_obj
            scenario = summary.by_scenario.get(scn)
            n = min(scenario.tier(t).metric(metric).n for t in TIERS) if scenario else 0
            if n >= summary.min_n:
                break
            best, need = max(best, n), summary.min_n
        else:
            out[scn] = f"n = {best} < {need or '?'}: not enough samples"
    return out


def _panels(titles: Sequence[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The axes (``xaxis``, ``yaxis2``, …) and panel titles of one column of panels with a
    shared x axis, top to bottom, as ``plotly.subplots.make_subplots(rows, 1, shared_xaxes=True,
    vertical_spacing=0.35 / rows)`` lays them out (its arithmetic, float for float), without
    building its ~50 ms of plotly objects a figure."""
    rows = len(titles)
    spacing = 0.35 / rows
    height = (1.0 - spacing * (rows - 1)) / rows
    axes: dict[str, Any] = {}
    notes: list[dict[str, Any]] = []
    for row, title in enumerate(titles, start=1):
        below = rows - row  # panels under this one
        start = sum([height] * below) + below * spacing
        top, bottom = min(start + height, 1.0), max(start, 0.0)
        n = "" if row == 1 else str(row)
        axes[f"xaxis{n}"] = {"anchor": f"y{n}", "domain": [0.0, 1.0]}
        if row < rows:
            axes[f"xaxis{n}"] |= {"matches": f"x{rows}", "showticklabels": False}
        axes[f"yaxis{n}"] = {"anchor": f"x{n}", "domain": [bottom, top]}
        notes.append(
            {
                "text": title,
                "font": {"size": 16},
                "showarrow": False,
                "x": 0.5,
                "xanchor": "center",
                "xref": "paper",
                "y": top,
                "yanchor": "bottom",
                "yref": "paper",
            }
        )
    return axes, notes


def bands_figure(
    runs: Sequence[Run], scenarios: Sequence[str], metric: str, label: str, note: str
) -> Figure | None:
    """Per scenario (one panel each) and tier: P50 line and P50–P95 band per run, read from
    each run's summary (its ``by_scenario`` block). Scenarios without a run at the minimum n
    get no panel (:func:`thin_scenarios`; the page says why); a P95 withheld below its own
    minimum n leaves the band out."""
    thin = thin_scenarios(runs, scenarios, metric)
    scenarios = [s for s in scenarios if s not in thin]
    runs = _runs_with_scenarios(runs)
    if not runs or not scenarios:
        return None
    axes, notes = _panels(scenarios)
    data, ns = [], []
    for row, scn in enumerate(scenarios, start=1):
        ax = "" if row == 1 else str(row)  # the panel's axes: x, y, x2, y2, …
        panel = {"xaxis": f"x{ax}", "yaxis": f"y{ax}"}
        for tier in TIERS:
            xs, p50, p95, n_col = [], [], [], []
            for run in runs:
                summary = run.summary_obj
                scenario = summary.by_scenario.get(scn)
                stat = scenario.tier(tier).metric(metric) if scenario else None
                n = stat.n if stat else 0
                enough = n >= summary.min_n
                ns += [n] if enough else []
                xs.append((run.finished_at or run.created_at).isoformat())
                p50.append(stat.p50 if enough and stat else None)
                p95.append(stat.p95 if enough and stat else None)
                n_col.append(n)
            colour = TIER_COLOURS[tier]
            data.append(
                dict(
                    type="scatter",
                    x=xs,
                    y=p50,
                    name=f"{tier} P50",
                    legendgroup=tier,
                    showlegend=row == 1,
                    mode="lines+markers",
                    line={"color": colour, "width": 2},
                    customdata=n_col,
                    **panel,
                    hovertemplate=(
                        f"{scn} {tier} P50 %{{y:.0f}} ms (n=%{{customdata}})<extra></extra>"
                    ),
                )
            )
            data.append(
                dict(
                    type="scatter",
                    x=xs,
                    y=p95,
                    name=f"{tier} P95 (band from P50)",
                    legendgroup=tier,
                    showlegend=row == 1,
                    mode="lines",
                    fill="tonexty",
                    fillcolor=TIER_BANDS[tier],
                    line={"color": colour, "width": 1, "dash": "dot"},
                    customdata=n_col,
                    **panel,
                    hovertemplate=(
                        f"{scn} {tier} P95 %{{y:.0f}} ms (n=%{{customdata}})<extra></extra>"
                    ),
                )
            )
        axes[f"yaxis{ax}"] |= {"title": {"text": f"{label} (ms)"}, "rangemode": "tozero"}
    axes[f"xaxis{ax}"]["title"] = {"text": "run time (UTC)"}
    n_text = f"n = {min(ns)}–{max(ns)}" if ns else "no tier-run reached min n"
    layout = _layout(
        f"{label} per scenario over time: P50 and P95 per tier{note}",
        f"one point per probe run · {n_text} successes per tier, scenario and run · "
        "below min n left out · P95 band only from n ≥ 59",
        "run time (UTC)",
        f"{label} (ms)",
        height=140 + 190 * len(scenarios),
    )
    # only the bottom panel's x axis has a title (with one panel, the top one is the bottom)
    layout = merged(layout, **axes, annotations=notes)
    if len(scenarios) > 1:
        layout["xaxis"]["title"] = {}
    return figure(data, layout)


def breakdown_figure(report: dict[str, Any], note: str) -> Figure:
    """Where the time goes: stacked medians per scenario and tier (ms)."""
    data = []
    cats = [(scn, tier) for scn in report["scenarios"] for tier in ("fast", "base")]
    x = [[scn for scn, _ in cats], [tier for _, tier in cats]]
    ns = [report["breakdown"][scn][tier]["n"] for scn, tier in cats]
    for part, label in BREAKDOWN:
        ys = [report["breakdown"][scn][tier][part] for scn, tier in cats]
        data.append(
            dict(
                type="bar",
                x=x,
                y=ys,
                name=label,
                marker={"color": PART_COLOURS[part]},
                customdata=ns,
                hovertemplate=f"{label}: %{{y:.1f}} ms (n=%{{customdata}})<extra></extra>",
            )
        )
    n_text = f"n = {min(ns)}–{max(ns)}" if ns else "no samples"
    return figure(
        data,
        _layout(
            f"Where the time goes, per scenario and tier{note}",
            f"medians of each part over successful samples · {n_text} per bar · medians do not "
            "add up exactly to the E2E median",
            "scenario / tier",
            "time (ms, median)",
        )
        | {"barmode": "stack"},
    )


def load_figure(load: dict[str, Any], note: str) -> Figure:
    """P95 TTFT and E2E against concurrency per tier (the newest load probe)."""
    data = []
    levels = sorted(load["levels"], key=int)
    ns: list[int] = []
    for tier in TIERS:
        for metric, label, dash in (("ttft_ms", "TTFT", "solid"), ("e2e_ms", "E2E", "dash")):
            ys, n_col = [], []
            for level in levels:
                stat = getattr(LoadLevel.from_json(load["levels"][level].get(tier)), metric)
                ys.append(stat.p95)
                n_col.append(stat.n)
            ns += n_col
            data.append(
                dict(
                    type="scatter",
                    x=[int(lv) for lv in levels],
                    y=ys,
                    name=f"{tier} {label} P95",
                    mode="lines+markers",
                    customdata=n_col,
                    line={"color": TIER_COLOURS[tier], "dash": dash, "width": 2},
                    hovertemplate=f"{tier} {label} P95 %{{y:.0f}} ms at concurrency %{{x}} "
                    "(n=%{customdata})<extra></extra>",
                )
            )
    n_text = f"n = {min(ns)}–{max(ns)}" if ns else "no requests"
    layout = _layout(
        f"Latency under load: P95 against concurrency{note}",
        f"load probe run #{load['run']} · each tier probed alone · {n_text} "
        "successes per point · below min n left out",
        "concurrent requests per tier (log scale)",
        "P95 latency (ms)",
        rangemode="tozero",
    )
    return figure(
        data, merged(layout, xaxis={"type": "log", "tickvals": [int(lv) for lv in levels]})
    )


def speed_charts(report: dict[str, Any], runs: Sequence[Run]) -> dict[str, Chart]:
    """The speed page's figures by role: speedup, ttft_bands, e2e_bands, breakdown, load."""
    note = " · simulated" if report.get("simulated") else ""
    figures: dict[str, tuple[str, Figure | None]] = {}  # role: (title, figure)
    if report["scenarios"]:
        figures["speedup"] = ("Speed-up per scenario", speedup_figure(report, note))
        figures["breakdown"] = ("Where the time goes", breakdown_figure(report, note))
    figures["ttft_bands"] = (
        "TTFT per scenario over time",
        bands_figure(runs, report["scenarios"], "ttft_ms", "TTFT", note),
    )
    figures["e2e_bands"] = (
        "E2E per scenario over time",
        bands_figure(runs, report["scenarios"], "e2e_ms", "E2E", note),
    )
    if report.get("load"):
        figures["load"] = ("Latency under load", load_figure(report["load"], note))
    return {
        role: SpeedChart(
            id=f"speed-{role.replace('_', '-')}",
            title=title,
            json=figure_json(fig),
            height=int(fig["layout"]["height"] or HEIGHT_PX),
        )
        for role, (title, fig) in figures.items()
        if fig is not None
    }
