"""Small inline SVG trend lines for the overview: TTFT P50 of the fast and base tiers over a
pair's newest comparable runs (``Run.objects.trend()``), from the stored summaries.

Inline SVG rather than plotly: a row needs no script, prints, and dozens of rows cost nothing.
Both tiers share one y scale (from 0), so the gap between the lines reads as the speed-up;
a run whose P50 is below its minimum n is a gap in its line, not a point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import FloatField, IntegerField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from evals.latency import MIN_N
from monitor import selectors
from monitor.models import Run

RUNS = 48
TIERS = ("fast", "base")
WIDTH, HEIGHT, PAD = 160, 36, 2


@dataclass(frozen=True)
class Trend:
    fast: list[float | None]
    base: list[float | None]

    @property
    def n_runs(self) -> int:
        return sum(1 for f, b in zip(self.fast, self.base, strict=True)
                   if f is not None or b is not None)

    def last(self, tier: str) -> float | None:
        return next((v for v in reversed(getattr(self, tier)) if v is not None), None)


def ttft_trends(pair_ids: Sequence[int], runs: int = RUNS) -> dict[int, Trend]:
    """TTFT P50 per tier over each pair's newest comparable runs, oldest first: one query
    for all pairs (``selectors.newest_per_pair``) reading only the summaries' ``min_n`` and
    TTFT P50 and n, as numbers cast by PostgreSQL: decoding 2,400 whole summaries (50 pairs ×
    48 runs) cost 0.5 s of CPU. A P50 below the run's minimum n is a gap, as
    ``RunSummary``'s readers show it."""
    paths = {f"{tier}_{key}": Cast(KT(f"summary__tiers__{tier}__ttft_ms__{key}"), field())
             for tier in TIERS for key, field in (("p50", FloatField), ("n", IntegerField))}
    rows = selectors.newest_per_pair(
        Run.objects.trend(), pair_ids, runs, "pair_id", "created_at", "id",
        min_n=Cast(KT("summary__min_n"), IntegerField()), **paths)
    out: dict[int, Trend] = {pid: Trend([], []) for pid in pair_ids}
    for pair_id, _, _, min_n, *values in sorted(rows, key=lambda row: row[:3]):
        min_n = min_n or MIN_N  # RunSummary.from_json's default
        for i, tier in enumerate(TIERS):
            p50, n = values[2 * i], values[2 * i + 1]
            getattr(out[pair_id], tier).append(p50 if (n or 0) >= min_n else None)
    return out


def _paths(values: Sequence[float | None], top: float, count: int) -> list[str]:
    """SVG path data, one sub-path per run of consecutive values (gaps stay gaps)."""
    step = (WIDTH - 2 * PAD) / max(count - 1, 1)
    parts, current = [], []
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
    title = (f"TTFT P50 over the last {trend.n_runs} comparable runs: fast (orange) "
             f"{ms(trend.last('fast'))}, base (blue) {ms(trend.last('base'))}; scale 0–"
             f"{top:,.0f} ms")
    body = format_html_join("", '<path class="spark {}" d="{}"/>', lines)
    return format_html(
        '<svg class="sparkline" width="{}" height="{}" viewBox="0 0 {} {}" role="img" '
        'aria-label="{}"><title>{}</title>{}</svg>', WIDTH, HEIGHT, WIDTH, HEIGHT, title, title,
        body)


def ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"
