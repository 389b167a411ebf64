"""Paired probes and their speed-up interval: the pieces the speed page
(``monitor.judging.speed``), the claims (``monitor.judging.claims``) and the overview
(``monitor.judging.speed_window``) share, kept apart so those modules import it, not each other.

Paired probes: the fast and base samples of the same run, case and repetition (batch 0), sent
interleaved and so sharing the vendor's load. The interval is the cluster bootstrap over runs
of ``evals.stats.speedup_runs.cluster_ratio_ci``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Literal

from evals.stats.speedup import RatioCI
from evals.stats.speedup_runs import MIN_PAIRS, cluster_ratio_ci
from evals.suites import SCENARIOS
from monitor.models import Sample


def scenario_order(names: Iterable[str]) -> list[str]:
    """The speed matrix's order (``SCENARIOS``), then any other scenario by name."""
    names = set(names)
    return [s for s in SCENARIOS if s in names] + sorted(names - set(SCENARIOS))


def fmt_ci(ci: RatioCI | dict[str, Any]) -> str:
    """ "5.8x [5.1, 6.4]", the same wording as ``assess_claim``; the estimate alone, "5.0x (n =
    12 < 20 pairs)", below the minimum number of pairs."""
    d = ci if isinstance(ci, dict) else ci.__dict__
    if d.get("estimate") is None:
        return d.get("note") or "no pairs"
    if d.get("low") is None:
        return f"{d['estimate']:.1f}x (n = {d['n']} < {MIN_PAIRS} pairs)"
    return f"{d['estimate']:.1f}x [{d['low']:.1f}, {d['high']:.1f}]"


def paired_samples(samples: Iterable[Sample]) -> dict[str, list[dict[str, Sample]]]:
    """Per scenario, {"fast": s, "base": s} of the same run, case and repetition (batch 0),
    and in an agent episode the same turn and step: the k-th request of a turn has the same
    conversation before it on both tiers until they diverge."""
    Slot = tuple[int, int, int, int | None, int]
    slots: dict[Slot, dict[str, Sample]] = defaultdict(dict)
    scenario_of: dict[Slot, str] = {}
    for s in samples:
        if s.batch == 0:
            key = (s.run_id, s.case_id, s.repetition, s.turn, s.step)
            slots[key][s.tier] = s
            scenario_of[key] = s.scenario
    out: dict[str, list[dict[str, Sample]]] = defaultdict(list)
    for key, pair in slots.items():
        if "fast" in pair and "base" in pair:
            out[scenario_of[key]].append(pair)
    return out


def ratio_ci(
    base: list[float | None],
    fast: list[float | None],
    runs: list[int],
    kind: Literal["duration", "rate"],
) -> RatioCI:
    keep = [i for i in range(len(base)) if not _is_nan(base[i]) and not _is_nan(fast[i])]
    return cluster_ratio_ci(
        [base[i] for i in keep],
        [fast[i] for i in keep],
        [runs[i] for i in keep],
        kind=kind,
        min_n=MIN_PAIRS,
    )


def _is_nan(x: float | None) -> bool:
    return x is not None and x != x
