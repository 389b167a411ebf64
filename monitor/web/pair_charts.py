"""The pair page's charts: latency, similarity and pass rate per run, from the runs' typed
summaries (``Run.summary_obj``). A percentile whose n is below the run's minimum n is left out
(a gap), never drawn from too few samples.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from evals import sketch
from evals.latency import min_n_for
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


P95_MAX_RUNS = 12  # the longest trailing window a P95 point may pool (3 h at 15 minutes)
Sketches = Mapping[tuple[int, str], Mapping[str, Mapping[str, int]]]


def _p95_windows(
    runs: Sequence[Run], tier: str, metric: str, sketches: Sketches
) -> list[tuple[float | None, int, int]]:
    """Per run (oldest first): the P95 of ``metric`` over the trailing window of runs whose
    merged rollup sketches first hold P95's minimum n (``evals.latency.min_n_for``), with the
    window's n and its number of runs; None where even ``P95_MAX_RUNS`` runs hold too few."""
    need = min_n_for(95)
    series = [(sketches.get((r.id, tier)) or {}).get(metric) for r in runs]
    out = []
    for run, (merged, used) in zip(runs, sketch.trailing(series, need, P95_MAX_RUNS), strict=True):
        q = sketch.quantiles(merged, (95,), min_n=run.summary_obj.min_n, per_quantile=True)
        out.append((q["p95"], q["n"], used))
    return out


def _runs_words(windows: list[int]) -> str:
    low, high = min(windows), max(windows)
    return f"{low} runs" if low == high else f"{low}–{high} runs"


def latency_figure(
    runs: Sequence[Run],
    metric: str,
    label: str,
    *,
    note: str = "",
    sketches: Sketches | None = None,
) -> Figure:
    """P50 line per run and P95 per tier of ``metric`` (``ttft_ms`` or ``e2e_ms``), the band
    between. With the runs' rollup ``sketches`` the P95 pools a trailing window of runs until
    it has its minimum n (a probe of 20 requests per tier never reaches 59 alone), and says
    its n and window; without them (in-memory runs) it is each run's own P95, a gap below 59.
    No P95 point at all: no P95 trace, and the subtitle says why instead of promising it."""
    data = []
    ns: list[int] = []
    p95_ns: list[int] = []
    windows: list[int] = []
    hidden = 0
    for tier in TIERS:
        xs, p50, p95, n_col = [], [], [], []
        p95_col: list[Any] = []
        pooled = _p95_windows(runs, tier, metric, sketches) if sketches is not None else None
        for i, run in enumerate(runs):
            summary = run.summary_obj
            stat = summary.tier(tier).metric(metric)
            n = stat.n
            enough = n >= summary.min_n
            hidden += 0 if enough else 1
            if enough:
                ns.append(n)
            xs.append(run_time(run))
            p50.append(stat.p50 if enough else None)
            n_col.append(n)
            if pooled is not None:
                value, n95, used = pooled[i]
                p95.append(value)
                p95_col.append([n95, used])
                if value is not None:
                    p95_ns.append(n95)
                    windows.append(used)
            else:
                p95.append(stat.p95 if enough else None)
                p95_col.append([n, 1])
                if enough and stat.p95 is not None:
                    p95_ns.append(n)
                    windows.append(1)
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
        if any(v is not None for v in p95):
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
                    customdata=p95_col,
                    hovertemplate=f"{tier} P95 %{{y:.0f}} ms (n=%{{customdata[0]}} over "
                    "%{customdata[1]} run(s))<extra></extra>",
                )
            )
    need = min_n_for(95)
    if not p95_ns:
        scope = f"{P95_MAX_RUNS} runs" if sketches is not None else "a run"
        p95_words = f"no P95: needs n ≥ {need} in {scope}"
    elif max(windows) > 1:
        p95_words = f"dotted P95 over {_runs_words(windows)} ({n_range(p95_ns)}; needs {need})"
    else:
        p95_words = f"dotted P95 per run ({n_range(p95_ns)})"
    subtitle = f"solid P50 per run ({n_range(ns)}) · {p95_words}"
    if hidden:
        subtitle += f" · {hidden} tier-runs below min n left out"
    title_p95 = " and P95 per tier" if p95_ns else " per tier"
    return figure(
        data,
        _layout(
            f"{label} per run: P50{title_p95}{note}",
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


def pair_charts(
    runs: Sequence[Run], *, simulated: bool = False, sketches: Sketches | None = None
) -> list[Chart]:
    """The pair page's four charts over the finished probe runs among ``runs`` (any order);
    ``sketches``: their rollups' latency sketches (``selectors.run_sketches``) for the P95.

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
            latency_figure(done, "ttft_ms", "TTFT", note=note, sketches=sketches),
        ),
        (
            "chart-e2e",
            "End-to-end latency (E2E)",
            latency_figure(done, "e2e_ms", "E2E", note=note, sketches=sketches),
        ),
        ("chart-similarity", "Text similarity", similarity_figure(done, note=note)),
        ("chart-pass-rate", "Unit-test pass rate", pass_rate_figure(done, note=note)),
    ]
    downgraded = downgrade_figure(done, note=note)
    if downgraded is not None:
        figures.append(("chart-downgrade", "Served-tier downgrades", downgraded))
    return charts_of(figures)
