"""How much faster, for the overview: each pair's E2E speed-up over its newest comparable runs
per scenario, with the cluster-bootstrap interval and n of the speed page
(``monitor.judging.speed``), and the claim judged on it.

Why: the newest run's speed-up alone moved 2.31× → 1.99× → 2.13× within minutes and carried
no interval, so the overview and the speed page disagreed on the same pair. This pools the
window of runs the speed page reads, judged per scenario the same way, in one pass over all
pairs' samples (two queries).

E2E is the measure: it is what a user of the fast tier waits for, and the pair records no
metric of its own for the claim.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evals.stats.speedup_runs import assess_claim
from monitor.judging.speed import (
    DEFAULT_RUNS,
    SAMPLE_FIELDS,
    paired_samples,
    ratio_ci,
    sample_duration,
    scenario_order,
)
from monitor.models import Run, Sample
from monitor.selectors import newest_trend_runs

METRIC, FIELD = "E2E", "e2e_ms"
# assess_claim's statuses in the overview's three words
WORDS = {
    "confirmed": "confirmed",
    "contradicted": "contradicted",
    "not contradicted": "not yet",
    "cannot tell": "not yet",
}


@dataclass(frozen=True)
class ScenarioSpeed:
    scenario: str
    estimate: float | None
    low: float | None
    high: float | None
    n: int  # paired probes
    claim: str | None  # confirmed / contradicted / not yet; None without a claim


@dataclass(frozen=True)
class WindowSpeed:
    runs: int
    scenarios: tuple[ScenarioSpeed, ...] = field(default_factory=tuple)

    @property
    def claims(self) -> dict[str, int]:
        """Claim word → scenarios with it."""
        out: dict[str, int] = defaultdict(int)
        for s in self.scenarios:
            if s.claim:
                out[s.claim] += 1
        return dict(out)


def window_speedups(
    claims: Mapping[int, float | None], runs: int = DEFAULT_RUNS
) -> dict[int, WindowSpeed]:
    """Pair id → its speed over its newest ``runs`` comparable runs (``claims``: pair id → its
    claimed factor)."""
    pair_ids = list(claims)
    window = Run.objects.trend().filter(newest_trend_runs(pair_ids, runs))
    samples = (
        Sample.objects.filter(run__in=window.values("id"), batch=0)
        .select_related("case", "run")
        .only(*SAMPLE_FIELDS, "run__pair_id")
    )
    by_pair: dict[int, list[Sample]] = defaultdict(list)
    for s in samples:
        by_pair[s.run.pair_id].append(s)
    return {pid: _speed(by_pair.get(pid, []), claims[pid]) for pid in pair_ids}


def _speed(samples: Sequence[Sample], claimed: float | None) -> WindowSpeed:
    pairs = paired_samples(samples)
    out = []
    for scenario in scenario_order(pairs):
        group = pairs[scenario]
        ci = ratio_ci(
            [sample_duration(p["base"], FIELD) for p in group],
            [sample_duration(p["fast"], FIELD) for p in group],
            [p["base"].run_id for p in group],
            "duration",
        )
        claim = WORDS[assess_claim(ci, claimed).status] if claimed else None
        out.append(ScenarioSpeed(scenario, ci.estimate, ci.low, ci.high, ci.n, claim))
    return WindowSpeed(runs=len({s.run_id for s in samples}), scenarios=tuple(out))


def words(speed: WindowSpeed, claimed: float | None) -> dict[str, Any]:
    """The overview's answer: ``line`` ("2.1× E2E [1.9, 2.3] · 10 runs, n = 40"), ``claim``
    ("claim 6×: contradicted", "claim 6×: contradicted in 3 of 5 scenarios, not yet in 2")
    and ``tone`` (ok, bad, wait)."""
    known = [s for s in speed.scenarios if s.estimate is not None]
    if not known:
        return {"line": "no paired probes yet", "claim": "", "tone": "wait"}
    n = sum(s.n for s in known)
    runs = f"{speed.runs} run{'s' * (speed.runs != 1)}, n = {n}"
    if len(known) == 1:
        s = known[0]
        interval = f" [{s.low:.1f}, {s.high:.1f}]" if s.low is not None else " (no interval yet)"
        line = f"{s.estimate:.1f}× {METRIC}{interval} · {runs}"
    else:
        low, high = min(s.estimate for s in known), max(s.estimate for s in known)  # type: ignore[type-var]
        line = f"{low:.1f}× to {high:.1f}× {METRIC} over {len(known)} scenarios · {runs}"
    if not claimed:
        return {"line": line, "claim": "no claim stated", "tone": "wait"}
    counts = speed.claims
    order = [w for w in ("contradicted", "confirmed", "not yet") if counts.get(w)]
    if len(order) == 1:
        said = order[0]
    else:
        total = sum(counts.values())
        said = ", ".join(
            f"{w} in {counts[w]}" + (f" of {total} scenarios" if i == 0 else "")
            for i, w in enumerate(order)
        )
    tone = "bad" if "contradicted" in counts else "ok" if order == ["confirmed"] else "wait"
    return {"line": line, "claim": f"claim {claimed:g}×: {said}", "tone": tone}
