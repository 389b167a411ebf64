"""Plotly figures of the verdict page, built server-side from stored verdicts (never samples).

Each figure reads a run summary's verdict block (``run_summary.Verdict``, written by
``monitor.judging.verdict``) or a drift track, and travels as JSON to ``static/js/charts.js``
like the pair page's charts.
MMD² is unitless: the kernel is the share of the first L characters two completions of the
same prompt have in common, so MMD² is a difference of such shares.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from evals.stats.labels import LABEL_WORDS
from monitor.derived.run_summary import Verdict
from monitor.web.chart_kit import (
    HEIGHT_PX,
    SIM_COLOURS,
    Chart,
    Figure,
    charts_of,
    figure,
    log_ticks,
    merged,
    titled_layout,
)

LABEL_COLOURS = {  # Okabe–Ito, as on the pair page
    "no_detectable_difference": "#009E73",
    "outputs_differ": "#E69F00",
    "capability_difference": "#D55E00",
    "inconclusive": "#999999",
}
FLOOR, OBSERVED, THRESHOLD, EVENT = "#009E73", "#D55E00", "#555555", "#56B4E9"
MMD_AXIS = "MMD² (unitless)"


def _layout(title: str, subtitle: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    return titled_layout(
        title=title,
        subtitle=subtitle,
        x_title=x_title,
        y_title=y_title,
        height=HEIGHT_PX,
        top=90,
        **extra,
    )


def _vline(x: float, top: float, name: str, colour: str, dash: str) -> dict[str, Any]:
    """A vertical line as a trace, so it has a legend entry, a hover and joins autorange."""
    return dict(
        type="scatter",
        x=[x, x],
        y=[0, top],
        mode="lines",
        name=name,
        line={"color": colour, "dash": dash, "width": 2},
        hovertemplate=f"{name}: {x:.3g}<extra></extra>",
    )


def null_figure(verdict: Verdict, *, note: str = "") -> Figure:
    """The fast-vs-base MMD² against its permutation null, with the run's critical value (the
    null's 1 − α quantile: caught half the time) and the MMD² it catches with 80% power."""
    fvb = verdict.mmd("fast_vs_base")
    hist = fvb.get("null_hist") or {"edges": [], "counts": []}
    edges, counts = hist["edges"], hist["counts"]
    data = []
    top = max(counts, default=1) * 1.05
    if counts:
        centres = [(a + b) / 2 for a, b in zip(edges, edges[1:], strict=False)]
        data.append(
            dict(
                type="bar",
                x=centres,
                y=counts,
                width=[b - a for a, b in zip(edges, edges[1:], strict=False)],
                name=f"permutation null (B = {fvb['B']})",
                marker={"color": "#BBBBBB"},
                hovertemplate="MMD² %{x:.3g}: %{y} permutations<extra></extra>",
            )
        )
    if fvb.get("critical_value") is not None:
        alpha = verdict.alpha
        data.append(
            _vline(
                fvb["critical_value"],
                top,
                f"detection threshold (1 − {alpha:g} quantile)",
                THRESHOLD,
                "dot",
            )
        )
    if verdict.detectable_80 is not None:
        data.append(_vline(verdict.detectable_80, top, "caught with 80% power", FLOOR, "dash"))
    if fvb.get("statistic") is not None:
        data.append(_vline(fvb["statistic"], top, "fast vs base (observed)", OBSERVED, "solid"))
    n_fast, n_base = fvb.get("n_per_tier") or (0, 0)
    subtitle = (
        f"n = {n_fast} fast / {n_base} base samples, {fvb.get('n_prompts', 0)} prompts, "
        f"L = {fvb.get('L')} chars<br>kernel: share of matching characters · labels "
        f"permuted within prompts{note}"
    )
    return figure(
        data,
        _layout(
            "MMD² fast vs base against chance", subtitle, MMD_AXIS, "permutations (count)", bargap=0
        ),
    )


def ladder_figure(verdict: Verdict, *, note: str = "") -> Figure:
    """The reference ladder's significant rungs on a log scale (context, as in
    ``evals.stats.labels.ladder_context``), with this run's statistic and 80%-power effect.
    Values ≤ 0 cannot sit on a log axis and are named in the subtitle instead."""
    ladder = verdict.data.get("ladder") or {}
    rungs = [r for r in ladder.get("rungs") or () if (r.get("mmd2") or 0) > 0
             and r["key"] != "a_vs_a" and r.get("p_value", 1.0) < verdict.alpha]  # fmt: skip
    data = [
        dict(
            type="scatter",
            x=[r["mmd2"] for r in rungs],
            y=["reference ladder"] * len(rungs),
            mode="markers+text",
            text=[r["key"] for r in rungs],
            textposition="top center",
            name="reference rungs",
            marker={"symbol": "line-ns-open", "size": 22, "color": "#333333"},
            customdata=[r["label"] for r in rungs],
            hovertemplate="%{customdata}: MMD² %{x:.3g}<extra></extra>",
        )
    ]
    marks = [
        ("fast vs base", verdict.statistic, OBSERVED),
        ("caught with 80% power", verdict.detectable_80, FLOOR),
    ]
    hidden = []
    for name, value, colour in marks:
        if value is None or value <= 0:
            hidden.append(f"{name} {'n/a' if value is None else f'{value:.2g}'}")
            continue
        data.append(
            dict(
                type="scatter",
                x=[value],
                y=["this run"],
                mode="markers",
                name=name,
                marker={"size": 13, "color": colour},
                hovertemplate=f"{name}: %{{x:.3g}}<extra></extra>",
            )
        )
    sub = "context only, measured on this suite and L: never a label"
    sub += f", L = {ladder.get('L')}"
    if hidden:
        sub += "<br>not on the log axis (≤ 0): " + ", ".join(hidden)
    layout = _layout(
        "For context: MMD² of known differences", sub + note, f"{MMD_AXIS}, log scale", ""
    )
    shown = [r["mmd2"] for r in rungs] + [v for _, v, _ in marks if v is not None and v > 0]
    xaxis: dict[str, Any] = {"type": "log"}
    if shown:  # log10 range with half a decade of room, so labels at the ends fit
        xaxis["range"] = [math.log10(min(shown)) - 0.5, math.log10(max(shown)) + 0.5]
        xaxis |= log_ticks(*(10**end for end in xaxis["range"]))
    # room for the rung labels above their marks
    return figure(data, merged(layout, xaxis=xaxis, yaxis={"range": [-0.6, 1.8]}))


def similarity_figure(t0: Mapping[str, Any], *, note: str = "") -> Figure:
    """Overlaid histograms of temperature-0 Indel similarity, fast-vs-base over the
    base-vs-base pairs (the noise floor)."""
    data = []
    for key, name in (("fast_vs_base", "fast vs base"), ("base_vs_base", "base vs base (floor)")):
        block = t0.get(key) or {}
        ratios = [100.0 * r for r in block.get("ratios") or ()]
        data.append(
            dict(
                type="histogram",
                x=ratios,
                name=f"{name}, n = {len(ratios)}",
                opacity=0.6,
                xbins={"start": 0, "end": 100.01, "size": 2.5},
                histnorm="percent",
                marker={"color": SIM_COLOURS[key]},
                hovertemplate=f"{name}: %{{y:.0f}}% of pairs at %{{x}}%<extra></extra>",
            )
        )
    layout = _layout(
        "Temperature-0 similarity: fast vs base beside base vs base",
        f"probe run #{t0['run_id']} · rapidfuzz Indel ratio, 100% = identical{note}",
        "Indel similarity (%)",
        "share of text pairs (%)",
        barmode="group",
    )
    lowest = min(
        (
            100.0 * r
            for k in ("fast_vs_base", "base_vs_base")
            for r in (t0.get(k) or {}).get("ratios") or ()
        ),
        default=90.0,
    )
    return figure(data, merged(layout, xaxis={"range": [max(0.0, min(lowest, 90.0) - 5.0), 102.5]}))


def divergence_figure(t0: Mapping[str, Any], *, note: str = "") -> Figure:
    """Box plots of the first-divergence position (characters) of the pairs that diverge."""
    data = []
    for key, name in (("fast_vs_base", "fast vs base"), ("base_vs_base", "base vs base (floor)")):
        block = t0.get(key) or {}
        pos = [d for d in block.get("first_divergence") or () if d is not None]
        n_all = block.get("n") or 0
        data.append(
            dict(
                type="box",
                x=pos,
                name=f"{name}<br>{len(pos)} of {n_all} diverge",
                boxpoints="all",
                jitter=0.4,
                marker={"color": SIM_COLOURS[key]},
                orientation="h",
                hovertemplate="first divergence at character %{x}<extra></extra>",
            )
        )
    layout = _layout(
        "Where temperature-0 answers first differ",
        f"probe run #{t0['run_id']} · identical pairs have no divergence and are left out{note}",
        "first divergence (character index)",
        "",
        showlegend=False,
    )
    if not any(t["x"] for t in data):
        layout["annotations"] = [
            {
                "text": "no text pair diverges: every pair is identical",
                "showarrow": False,
                "xref": "paper",
                "yref": "paper",
                "x": 0.5,
                "y": 0.5,
            }
        ]
    return figure(data, layout)


def time_range(stamps: Sequence[str], least: timedelta = timedelta(hours=2)) -> list[str] | None:
    """An x range at least ``least`` wide, centred on ``stamps`` (ISO times), or None when
    they already span that: around a single audit plotly's own range is a second wide and its
    ticks read in milliseconds."""
    times = [datetime.fromisoformat(s) for s in stamps]
    if not times or max(times) - min(times) >= least:
        return None
    middle = min(times) + (max(times) - min(times)) / 2
    return [(middle - least / 2).isoformat(), (middle + least / 2).isoformat()]


def history_figure(
    history: Sequence[dict[str, Any]],
    track: dict[str, Any] | None,
    events: Sequence[dict[str, Any]],
    *,
    note: str = "",
) -> Figure:
    """Each audit's MMD² fast vs base (coloured by its label), the MMD² each audit would catch
    with 80% power, the audits where the pair's e-detector was alarmed and the model id /
    fingerprint changes."""
    xs = [h["at"] for h in history]
    data = [
        dict(
            type="scatter",
            x=xs,
            y=[h["detectable_80"] for h in history],
            name="caught with 80% power",
            mode="lines",
            line={"color": THRESHOLD, "dash": "dot"},
            hovertemplate="80% power above MMD² %{y:.3g}<extra></extra>",
        )
    ]
    for label, colour in LABEL_COLOURS.items():
        rows = [h for h in history if h["label"] == label]
        if rows:
            data.append(
                dict(
                    type="scatter",
                    x=[h["at"] for h in rows],
                    y=[h["statistic"] for h in rows],
                    mode="markers",
                    name=LABEL_WORDS[label],
                    marker={"color": colour, "size": 11},
                    customdata=[[h["run_id"], h["sentence"]] for h in rows],
                    hovertemplate="run #%{customdata[0]}: %{customdata[1]}<extra></extra>",
                )
            )
    values = [v for h in history for v in (h["statistic"], h["detectable_80"]) if v is not None]
    top = max(values, default=1.0)
    top = top * 1.1 if top > 0 else 1.0
    alarmed = [h for h in history if h.get("alarm")]
    if alarmed:
        data.append(
            dict(
                type="scatter",
                x=[h["at"] for h in alarmed],
                y=[top] * len(alarmed),
                mode="markers",
                name="e-detector alarmed",
                marker={"symbol": "x", "size": 14, "color": "#CC0000"},
                hovertemplate="evidence across audits: alarmed<extra></extra>",
            )
        )
    changed = [e for e in events if e["change"]]
    if changed:
        data.append(
            dict(
                type="scatter",
                x=[e["first_seen"].isoformat() for e in changed],
                y=[top] * len(changed),
                mode="markers",
                name="new model id / fingerprint",
                marker={"symbol": "diamond", "size": 12, "color": EVENT},
                customdata=[f"{e['endpoint']}: {e['what']} {e['value']}" for e in changed],
                hovertemplate="%{customdata}<extra></extra>",
            )
        )
    layout = _layout(
        "Verdict history: MMD² fast vs base per audit run",
        f"{len(history)} audit runs · markers coloured by label · ✕ e-detector alarmed, "
        f"◆ new model id / fingerprint{note}",
        "audit time (UTC)",
        MMD_AXIS,
        hovermode="closest",
    )
    shown = time_range([*xs, *(e["first_seen"].isoformat() for e in changed)])
    if shown:
        layout = merged(layout, xaxis={"range": shown})
    return figure(data, layout)


def verdict_charts(
    verdict: Verdict | None,
    history: Sequence[dict[str, Any]],
    track: dict[str, Any] | None,
    events: Sequence[dict[str, Any]],
    *,
    simulated: bool,
) -> list[Chart]:
    """The verdict page's figures that have data, in page order."""
    note = " · simulated" if simulated else ""
    figures: list[tuple[str, str, Figure]] = []
    if verdict and verdict.mmd("fast_vs_base").get("statistic") is not None:
        figures.append(
            ("chart-null", "MMD² against its permutation null", null_figure(verdict, note=note))
        )
        if verdict.data.get("ladder"):  # context only on the suite and L it was measured on
            figures.append(("chart-ladder", "Reference ladder", ladder_figure(verdict, note=note)))
    t0 = verdict.t0 if verdict else None
    if t0:
        figures.append(
            ("chart-similarity", "Temperature-0 similarity", similarity_figure(t0, note=note))
        )
        figures.append(("chart-divergence", "First divergence", divergence_figure(t0, note=note)))
    if history:
        figures.append(
            ("chart-history", "Verdict history", history_figure(history, track, events, note=note))
        )
    return charts_of(figures)


def fmt_stat(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.3g}"
