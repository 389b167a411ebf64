"""The pair page's charts: latency, similarity and pass rate per run, from the runs' typed
summaries (``Run.summary_obj``). A percentile whose n is below the run's minimum n is left out
(a gap), never drawn from too few samples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from monitor.models import Run, RunKind, RunStatus
from monitor.web.chart_kit import (
    SIM_COLOURS,
    TIER_BANDS,
    TIER_COLOURS,
    TIERS,
    Chart,
    Figure,
    charts_of,
    figure,
    n_range,
    run_time,
    titled_layout,
)


def _layout(title: str, subtitle: str, y_title: str, **yaxis: Any) -> dict[str, Any]:
    return titled_layout(
        title=title,
        subtitle=subtitle,
        x_title="run time (UTC)",
        y_title=y_title,
        yaxis=yaxis,
        hovermode="x unified",
    )


def latency_figure(runs: Sequence[Run], metric: str, label: str, *, note: str = "") -> Figure:
    """P50 line and P50–P95 band per tier of ``metric`` (``ttft_ms`` or ``e2e_ms``) per run."""
    data = []
    ns: list[int] = []
    hidden = 0
    for tier in TIERS:
        xs, p50, p95, n_col = [], [], [], []
        for run in runs:
            summary = run.summary_obj
            stat = summary.tier(tier).metric(metric)
            n = stat.n
            enough = n >= summary.min_n
            hidden += 0 if enough else 1
            if enough:
                ns.append(n)
            xs.append(run_time(run))
            p50.append(stat.p50 if enough else None)
            p95.append(stat.p95 if enough else None)
            n_col.append(n)
        colour = TIER_COLOURS[tier]
        data.append(
            dict(
                type="scatter",
                x=xs,
                y=p50,
                name=f"{tier} P50",
                legendgroup=tier,
                mode="lines+markers",
                line={"color": colour, "width": 2},
                customdata=n_col,
                hovertemplate=f"{tier} P50 %{{y:.0f}} ms (n=%{{customdata}})<extra></extra>",
            )
        )
        data.append(
            dict(
                type="scatter",
                x=xs,
                y=p95,
                name=f"{tier} P95",
                legendgroup=tier,
                mode="lines",
                line={"color": colour, "width": 1, "dash": "dot"},
                fill="tonexty",
                fillcolor=TIER_BANDS[tier],
                customdata=n_col,
                hovertemplate=f"{tier} P95 %{{y:.0f}} ms (n=%{{customdata}})<extra></extra>",
            )
        )
    subtitle = f"solid P50, dotted P95, band between · {n_range(ns)} successes per tier per run"
    if hidden:
        subtitle += f" · {hidden} tier-runs below min n left out"
    return figure(
        data,
        _layout(
            f"{label} per run: P50 and P95 per tier{note}",
            subtitle,
            f"{label} (ms)",
            rangemode="tozero",
        ),
    )


def _percent_series(
    runs: Sequence[Run],
    read: Callable[[Run], tuple[float | None, int]],
    ns: list[int],
) -> tuple[list[str], list[float | None], list[int]]:
    """(run times, value in percent or None, n) per run from a fraction and its n that ``read``
    takes from a run's summary; each non-zero n is also added to ``ns`` for the subtitle."""
    xs, ys, n_col = [], [], []
    for run in runs:
        fraction, n = read(run)
        xs.append(run_time(run))
        ys.append(None if fraction is None else 100.0 * fraction)
        n_col.append(n)
        if n:
            ns.append(n)
    return xs, ys, n_col


def _similarity(run: Run, key: str) -> tuple[float | None, int]:
    sim = run.summary_obj.similar(key)
    return (sim.mean_ratio, sim.n) if sim else (None, 0)


def _pass_rate(run: Run, tier: str) -> tuple[float | None, int]:
    block = run.summary_obj.tier(tier)
    return block.pass_rate, block.n_tested


def similarity_figure(runs: Sequence[Run], *, note: str = "") -> Figure:
    """Mean Indel similarity per run, fast-vs-base beside the base-vs-base noise floor.

    Ratios are stored as fractions (0–1, rapidfuzz's normalized Indel similarity) and shown in
    percent. A fast-vs-base line well under the base-vs-base line is the signal; the floor says
    how much two batches of the same tier already differ.
    """
    data: list[dict[str, Any]] = []
    ns: list[int] = []
    labels = {"fast_vs_base": "fast vs base", "base_vs_base": "base vs base<br>(noise floor)"}
    for key, name in labels.items():
        xs, ys, n_col = _percent_series(runs, partial(_similarity, key=key), ns)
        data.append(
            dict(
                type="scatter",
                x=xs,
                y=ys,
                name=name,
                mode="lines+markers",
                customdata=n_col,
                line={
                    "color": SIM_COLOURS[key],
                    "width": 2,
                    "dash": "dash" if key == "base_vs_base" else "solid",
                },
                hovertemplate=f"{name.replace('<br>', ' ')} %{{y:.1f}}%"
                " (n=%{customdata} text pairs)<extra></extra>",
            )
        )
    return figure(
        data,
        _layout(
            f"Text similarity per run (temperature 0){note}",
            f"mean over {n_range(ns)} text pairs per run · 100% = identical",
            "mean Indel similarity (%)",
            range=[0, 102],
        ),
    )


def pass_rate_figure(runs: Sequence[Run], *, note: str = "") -> Figure:
    """Unit-test pass rate per tier per run (coding cases only), in percent."""
    data: list[dict[str, Any]] = []
    ns: list[int] = []
    for tier in TIERS:
        xs, ys, n_col = _percent_series(runs, partial(_pass_rate, tier=tier), ns)
        data.append(
            dict(
                type="scatter",
                x=xs,
                y=ys,
                name=f"{tier}",
                mode="lines+markers",
                customdata=n_col,
                line={"color": TIER_COLOURS[tier], "width": 2},
                hovertemplate=(
                    f"{tier} %{{y:.0f}}% passed (n=%{{customdata}} tested)<extra></extra>"
                ),
            )
        )
    return figure(
        data,
        _layout(
            f"Unit-test pass rate per run{note}",
            f"generated code against the case's tests · {n_range(ns)} tested per tier per run",
            "pass rate (%)",
            range=[0, 105],
        ),
    )


def _downgrades(run: Run) -> tuple[float | None, int]:
    block = run.summary_obj.tier("fast")
    return block.downgrade_rate, block.n_tier_reported


def downgrade_figure(runs: Sequence[Run], *, note: str = "") -> Figure | None:
    """Served-tier downgrade rate per run of the fast tier (``evals.latency.downgrades``), in
    percent; None when no run's fast endpoint expects a tier."""
    ns: list[int] = []
    xs, ys, n_col = _percent_series(runs, _downgrades, ns)
    if all(y is None for y in ys):
        return None
    trace = dict(
        type="scatter",
        x=xs,
        y=ys,
        name="fast",
        mode="lines+markers",
        customdata=n_col,
        line={"color": TIER_COLOURS["fast"], "width": 2},
        hovertemplate="fast %{y:.1f}% downgraded (n=%{customdata} reported)<extra></extra>",
    )
    return figure(
        [trace],
        _layout(
            f"Served-tier downgrade rate per run{note}",
            f"requests reporting another tier than the expected one · {n_range(ns)} reported "
            "per run",
            "downgraded (%)",
            range=[0, 105],
        ),
    )


def pair_charts(runs: Sequence[Run], *, simulated: bool = False) -> list[Chart]:
    """The pair page's four charts over the finished probe runs among ``runs`` (any order).

    Probe runs only: they share temperature 0, so their similarity and pass rates compare.
    """
    done = sorted(
        (
            r
            for r in runs
            if r.status == RunStatus.DONE and r.kind == RunKind.PROBE and r.summary_obj.has_tiers
        ),
        key=run_time,
    )
    if not done:
        return []
    note = " · simulated" if simulated else ""
    figures = [
        (
            "chart-ttft",
            "Time to first token (TTFT)",
            latency_figure(done, "ttft_ms", "TTFT", note=note),
        ),
        ("chart-e2e", "End-to-end latency (E2E)", latency_figure(done, "e2e_ms", "E2E", note=note)),
        ("chart-similarity", "Text similarity", similarity_figure(done, note=note)),
        ("chart-pass-rate", "Unit-test pass rate", pass_rate_figure(done, note=note)),
    ]
    downgraded = downgrade_figure(done, note=note)
    if downgraded is not None:
        figures.append(("chart-downgrade", "Served-tier downgrades", downgraded))
    return charts_of(figures)
