"""Table cells as the pages print them: a value with its n, or a muted absence ("—",
"n too small (n=3)"): no percentile is shown below the run's minimum n."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evals.latency import min_n_for
from monitor.derived.run_summary import Percentiles, Similarity


@dataclass(frozen=True)
class Cell:
    """A formatted value; ``muted`` when it is an absence (no data, n too small)."""

    text: str
    muted: bool = False

    def __str__(self) -> str:
        return self.text


NO_DATA = Cell("—", muted=True)


def percentile(
    stat: Percentiles | Mapping[str, Any] | None, key: str, min_n: int, unit: str = "ms"
) -> Cell:
    """A percentile with its n, "n too small (n=3)" below the run's minimum n, or "n = 20 <
    59" when this percentile is withheld below its own minimum n (``evals.latency.min_n_for``:
    P95 needs 59 values, P99 299)."""
    if not stat:
        return NO_DATA
    stat = stat if isinstance(stat, Percentiles) else Percentiles.from_json(stat)
    if stat.n < min_n:
        return Cell(f"n too small (n={stat.n})", muted=True)
    value = stat.get(key)
    n = stat.n
    if value is None:
        need = min_n_for(float(key[1:]))
        return Cell(f"n = {n} < {need}", muted=True) if n < need else NO_DATA
    return Cell(f"{value:,.0f} {unit} (n={n})" if value >= 10 else f"{value:.1f} {unit} (n={n})")


def fraction(value: float | None, n: int | None = None) -> Cell:
    """A stored fraction (0–1) as a percentage, with its n when known."""
    if value is None:
        return NO_DATA
    return Cell(f"{100 * value:.1f}%" + (f" (n={n})" if n is not None else ""))


def speedup(value: float | None) -> Cell:
    return NO_DATA if value is None else Cell(f"{value:.2f}×")


def similarity(sim: Similarity | None) -> Cell:
    if sim is None or sim.mean_ratio is None:
        return NO_DATA
    return fraction(sim.mean_ratio, sim.n)


def number(value: float | None, unit: str) -> Cell:
    return NO_DATA if value is None else Cell(f"{value:,.1f} {unit}")
