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

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from monitor.models import Run, RunStatus
from monitor.run_summary import LoadLevel
from monitor.services.speed import BREAKDOWN, METRICS
from monitor.web.chart_kit import TIER_BANDS, TIER_COLOURS, TIERS, Chart, figure_json, titled_layout

PART_COLOURS = {"connect": "#999999", "headers": "#E69F00", "prefill": "#56B4E9",
                "decode": "#009E73"}
METRIC_COLOURS = {"ttft": "#0072B2", "decode": "#009E73", "e2e": "#D55E00"}
HEIGHT_PX = 400


@dataclass(frozen=True)
class SpeedChart(Chart):
    """A chart with the height its div needs (the panels of a per-scenario figure stack)."""

    height: int = HEIGHT_PX


def _layout(fig: go.Figure, title: str, subtitle: str, x_title: str, y_title: str,
            height: int = HEIGHT_PX, **yaxis: Any) -> None:
    titled_layout(fig, title=title, subtitle=subtitle, x_title=x_title, y_title=y_title,
                  height=height, top=80, yaxis=yaxis)


def speedup_figure(report: dict[str, Any], note: str) -> go.Figure:
    """Times faster per scenario and metric, with its interval where it has one (20 pairs or
    more), beside the claim; an estimate without an interval is drawn hollow."""
    fig = go.Figure()
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
        fig.add_trace(go.Scatter(
            x=scenarios, y=ys, name=label, mode="markers",
            marker={"color": METRIC_COLOURS[key], "size": 10,
                    "symbol": ["circle-open" if h else "circle" for h in hollow]},
            error_y={"type": "data", "symmetric": False, "array": hi, "arrayminus": lo},
            customdata=ns,
            hovertemplate=f"{label} %{{y:.2f}}x (n=%{{customdata}} pairs)<extra></extra>",
        ))
    # Reference lines as shapes across the plot, named by legend-only traces: add_hline's own
    # annotation text lands at 10^y on a log axis, and grouped traces would be offset.
    claimed = report.get("claimed")
    for y, name, line in ((claimed, f"claimed {claimed or 0:g}x",
                           {"color": "#CC79A7", "dash": "dash"}),
                          (1.0, "1x (no faster)", {"color": "#999999", "width": 1})):
        if y:
            fig.add_hline(y=y, line=line)
            fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=line, name=name))
    n = sum(report["n_pairs"].values())
    _layout(fig, f"Speed-up of the fast tier per scenario{note}",
            f"base/fast, 95% cluster-bootstrap interval over runs · n = {n} pairs in all · "
            f"hollow: no interval below {report.get('min_pairs', 20)} pairs · failed probes "
            "count as slowest", "scenario", "times faster (×, log scale)",
            type="log", dtick="D2")
    fig.update_layout(scattermode="group")
    return fig


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


def bands_figure(runs: Sequence[Run], scenarios: Sequence[str], metric: str, label: str,
                 note: str) -> go.Figure | None:
    """Per scenario (one panel each) and tier: P50 line and P50–P95 band per run, read from
    each run's summary (its ``by_scenario`` block). Scenarios without a run at the minimum n
    get no panel (:func:`thin_scenarios`; the page says why); a P95 withheld below its own
    minimum n leaves the band out."""
    thin = thin_scenarios(runs, scenarios, metric)
    scenarios = [s for s in scenarios if s not in thin]
    runs = _runs_with_scenarios(runs)
    if not runs or not scenarios:
        return None
    fig = make_subplots(rows=len(scenarios), cols=1, shared_xaxes=True,
                        subplot_titles=list(scenarios), vertical_spacing=0.35 / len(scenarios))
    ns: list[int] = []
    for row, scn in enumerate(scenarios, start=1):
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
            fig.add_trace(go.Scatter(
                x=xs, y=p50, name=f"{tier} P50", legendgroup=tier, showlegend=row == 1,
                mode="lines+markers", line={"color": colour, "width": 2}, customdata=n_col,
                hovertemplate=f"{scn} {tier} P50 %{{y:.0f}} ms (n=%{{customdata}})<extra></extra>",
            ), row=row, col=1)
            fig.add_trace(go.Scatter(
                x=xs, y=p95, name=f"{tier} P95 (band from P50)", legendgroup=tier,
                showlegend=row == 1, mode="lines", fill="tonexty", fillcolor=TIER_BANDS[tier],
                line={"color": colour, "width": 1, "dash": "dot"}, customdata=n_col,
                hovertemplate=f"{scn} {tier} P95 %{{y:.0f}} ms (n=%{{customdata}})<extra></extra>",
            ), row=row, col=1)
        fig.update_yaxes(title_text=f"{label} (ms)", rangemode="tozero", row=row, col=1)
    fig.update_xaxes(title_text="run time (UTC)", row=len(scenarios), col=1)
    n_text = f"n = {min(ns)}–{max(ns)}" if ns else "no tier-run reached min n"
    _layout(fig, f"{label} per scenario over time: P50 and P95 per tier{note}",
            f"one point per probe run · {n_text} successes per tier, scenario and run · "
            "below min n left out · P95 band only from n ≥ 59", "run time (UTC)", f"{label} (ms)",
            height=140 + 190 * len(scenarios))
    fig.update_layout(xaxis={"title": None})
    return fig


def breakdown_figure(report: dict[str, Any], note: str) -> go.Figure:
    """Where the time goes: stacked medians per scenario and tier (ms)."""
    fig = go.Figure()
    cats = [(scn, tier) for scn in report["scenarios"] for tier in ("fast", "base")]
    x = [[scn for scn, _ in cats], [tier for _, tier in cats]]
    ns = [report["breakdown"][scn][tier]["n"] for scn, tier in cats]
    for part, label in BREAKDOWN:
        ys = [report["breakdown"][scn][tier][part] for scn, tier in cats]
        fig.add_trace(go.Bar(
            x=x, y=ys, name=label, marker={"color": PART_COLOURS[part]}, customdata=ns,
            hovertemplate=f"{label}: %{{y:.1f}} ms (n=%{{customdata}})<extra></extra>",
        ))
    n_text = f"n = {min(ns)}–{max(ns)}" if ns else "no samples"
    _layout(fig, f"Where the time goes, per scenario and tier{note}",
            f"medians of each part over successful samples · {n_text} per bar · medians do not "
            "add up exactly to the E2E median", "scenario / tier", "time (ms, median)")
    fig.update_layout(barmode="stack")
    return fig


def load_figure(load: dict[str, Any], note: str) -> go.Figure:
    """P95 TTFT and E2E against concurrency per tier (the newest load probe)."""
    fig = go.Figure()
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
            fig.add_trace(go.Scatter(
                x=[int(lv) for lv in levels], y=ys, name=f"{tier} {label} P95",
                mode="lines+markers", customdata=n_col,
                line={"color": TIER_COLOURS[tier], "dash": dash, "width": 2},
                hovertemplate=f"{tier} {label} P95 %{{y:.0f}} ms at concurrency %{{x}} "
                              "(n=%{customdata})<extra></extra>",
            ))
    n_text = f"n = {min(ns)}–{max(ns)}" if ns else "no requests"
    _layout(fig, f"Latency under load: P95 against concurrency{note}",
            f"load probe run #{load['run']} · each tier probed alone · {n_text} successes per "
            "point · below min n left out", "concurrent requests per tier (log scale)",
            "P95 latency (ms)", rangemode="tozero")
    fig.update_xaxes(type="log", tickvals=[int(lv) for lv in levels])
    return fig


def speed_charts(report: dict[str, Any], runs: Sequence[Run]) -> dict[str, Chart]:
    """The speed page's figures by role: speedup, ttft_bands, e2e_bands, breakdown, load."""
    note = " · simulated" if report.get("simulated") else ""
    figures: dict[str, tuple[str, go.Figure | None]] = {}  # role: (title, figure)
    if report["scenarios"]:
        figures["speedup"] = ("Speed-up per scenario", speedup_figure(report, note))
        figures["breakdown"] = ("Where the time goes", breakdown_figure(report, note))
    figures["ttft_bands"] = ("TTFT per scenario over time",
                             bands_figure(runs, report["scenarios"], "ttft_ms", "TTFT", note))
    figures["e2e_bands"] = ("E2E per scenario over time",
                            bands_figure(runs, report["scenarios"], "e2e_ms", "E2E", note))
    if report.get("load"):
        figures["load"] = ("Latency under load", load_figure(report["load"], note))
    return {
        role: SpeedChart(id=f"speed-{role.replace('_', '-')}", title=title,
                         json=figure_json(fig), height=int(fig.layout.height or HEIGHT_PX))
        for role, (title, fig) in figures.items() if fig is not None
    }
