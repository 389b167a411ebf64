"""Small inline SVG trend lines for the overview: TTFT P50 of the fast and base tiers over a
pair's newest comparable runs (``Run.objects.trend()``), from the stored summaries.

Inline SVG rather than plotly: a row needs no script, prints, and dozens of rows cost nothing.
Both tiers share one y scale (from 0), so the gap between the lines reads as the speed-up;
a run whose P50 is below its minimum n is a gap in its line, not a point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from evals.latency import MIN_N
from monitor import selectors

RUNS = 48
WIDTH, HEIGHT, PAD = 160, 36, 2


@dataclass(frozen=True)
class Trend:
    fast: list[float | None]
    base: list[float | None]

    @property
    def n_runs(self) -> int:
        return sum(
            1 for f, b in zip(self.fast, self.base, strict=True) if f is not None or b is not None
        )

    def last(self, tier: str) -> float | None:
        return next((v for v in reversed(getattr(self, tier)) if v is not None), None)


def ttft_trends(pair_ids: Sequence[int], runs: int = RUNS) -> dict[int, Trend]:
    """TTFT P50 per tier over each pair's newest comparable runs, oldest first, in two queries
    for all pairs. It reads the five numbers it needs through JSON paths, not whole summaries:
    decoding 48 summaries × 50 pairs in Python was ~0.5 s of CPU per overview."""
    rows = selectors.trend_ttft_p50s(pair_ids, runs)
    kept: dict[int, list] = {pid: [] for pid in pair_ids}
    for pair_id, *row in rows:
        if len(kept[pair_id]) < runs:  # ties at the cutoff time
            kept[pair_id].append(row)
    out: dict[int, Trend] = {pid: Trend([], []) for pid in pair_ids}
    for pair_id, newest_first in kept.items():
        for min_n, *values in reversed(newest_first):
            need = int(min_n or MIN_N)  # RunSummary.min_n's default
            for tier, (p50, n) in zip(("fast", "base"), (values[:2], values[2:]), strict=True):
                enough = p50 is not None and n is not None and int(n) >= need
                getattr(out[pair_id], tier).append(float(p50) if enough else None)
    return out


def _paths(values: Sequence[float | None], top: float, count: int) -> list[str]:
    """SVG path data, one sub-path per run of consecutive values (gaps stay gaps)."""
    step = (WIDTH - 2 * PAD) / max(count - 1, 1)
    parts: list[list[str]] = []
    current: list[str] = []
    for i, v in enumerate(values):
        if v is None:
            if current:
                parts.append(current)
            current = []
            continue
        x = PAD + i * step
        y = HEIGHT - PAD - (HEIGHT - 2 * PAD) * (v / top if top else 0)
        current.append(f"{x:.1f},{y:.1f}")
    if current:
        parts.append(current)
    return ["M" + " L".join(p) if len(p) > 1 else f"M{p[0]} l0.1,0" for p in parts]


def svg(trend: Trend) -> SafeString:
    values = [v for v in trend.fast + trend.base if v is not None]
    if not values:
        return mark_safe('<span class="muted">no trend yet</span>')  # a constant
    top = max(values) * 1.05
    count = len(trend.fast)
    lines = []
    for tier in ("base", "fast"):
        for d in _paths(getattr(trend, tier), top, count):
            lines.append((tier, d))
    title = (
        f"TTFT P50 over the last {trend.n_runs} comparable runs: fast (orange) "
        f"{ms(trend.last('fast'))}, base (blue) {ms(trend.last('base'))}; scale 0–"
        f"{top:,.0f} ms"
    )
    body = format_html_join("", '<path class="spark {}" d="{}"/>', lines)
    return format_html(
        '<svg class="sparkline" width="{}" height="{}" viewBox="0 0 {} {}" role="img" '
        'aria-label="{}"><title>{}</title>{}</svg>',
        WIDTH,
        HEIGHT,
        WIDTH,
        HEIGHT,
        title,
        title,
        body,
    )


def ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"
