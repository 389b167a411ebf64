"""How much faster, for the overview: each pair's E2E speed-up over its newest comparable runs
per scenario, with the cluster-bootstrap interval and n of the speed page
(``monitor.judging.speed``), and the claim judged on it.

Why: the newest run's speed-up alone moved 2.31× → 1.99× → 2.13× within minutes and carried
no interval, so the overview and the speed page disagreed on the same pair. This pools the
window of runs the speed page reads, judged per scenario the same way, in one pass over all
pairs' samples (two queries).

The measure is the claim's own metric when the claim is a factor (output tok/s for "2.5×
output tokens per second"), else E2E: what a user of the fast tier waits for. A floor claim
("99 % of requests ≥ 80 tok/s") is judged on the share of fast-tier requests meeting it
(``monitor.judging.claims.check``). Both read the gated samples: a sample the vendor served on
another tier is left out unless the pair includes downgraded samples (``evals.served``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evals.claims import METRICS, Claim, judge
from monitor.judging.claims import DEFAULT_METRIC, check, expected_tiers, gate, metric_ci
from monitor.judging.pairing import paired_samples, scenario_order
from monitor.judging.speed import DEFAULT_RUNS, SAMPLE_FIELDS
from monitor.models import Run, Sample
from monitor.selectors import newest_trend_runs


@dataclass(frozen=True)
class PairClaim:
    """What the overview needs of a pair to judge its speed: its claim and gating choice."""

    claim: Claim | None = None
    include_downgraded: bool = False


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
    metric: str = DEFAULT_METRIC  # the speed-ups' metric (evals.claims.METRICS key)
    floor: str | None = None  # a floor claim's word and share, e.g. "contradicted (93.1 % …)"
    floor_word: str | None = None
    note: str = ""  # evals.served.NEVER_CONFIRMED when the vendor never confirmed the tier
    left_out: int = 0  # downgraded samples left out

    @property
    def claims(self) -> dict[str, int]:
        """Claim word → scenarios with it."""
        out: dict[str, int] = defaultdict(int)
        for s in self.scenarios:
            if s.claim:
                out[s.claim] += 1
        return dict(out)


def window_speedups(
    claims: Mapping[int, PairClaim], runs: int = DEFAULT_RUNS
) -> dict[int, WindowSpeed]:
    """Pair id → its speed over its newest ``runs`` comparable runs (``claims``: pair id → its
    claim and gating choice)."""
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
    expected = expected_tiers(s.endpoint_id for s in samples)
    return {pid: _speed(by_pair.get(pid, []), claims[pid], expected) for pid in pair_ids}


def _speed(samples: Sequence[Sample], spec: PairClaim, expected: Mapping[int, str]) -> WindowSpeed:
    kept, gating = gate(samples, include_downgraded=spec.include_downgraded, expected=expected)
    claim = spec.claim
    factor = claim if claim and claim.form == "factor" else None
    metric = factor.metric if factor else DEFAULT_METRIC
    pairs = paired_samples(kept)
    out = []
    for scenario in scenario_order(pairs):
        ci = metric_ci(pairs[scenario], metric)
        word = (judge(ci.low, ci.high, factor.value) or "not yet") if factor else None
        out.append(ScenarioSpeed(scenario, ci.estimate, ci.low, ci.high, ci.n, word))
    floor = check(claim, kept) if claim and claim.form == "floor" else None
    share = ""
    if floor and floor.get("share") is not None:
        share = f" ({100 * floor['share']:.1f} % of {floor['n']} met it)"
    return WindowSpeed(
        runs=len({s.run_id for s in samples}),
        scenarios=tuple(out),
        metric=metric,
        floor=f"{floor['word']}{share}" if floor else None,
        floor_word=floor["word"] if floor else None,
        note=gating["note"],
        left_out=gating["left_out"],
    )


def words(speed: WindowSpeed, claim: Claim | None) -> dict[str, Any]:
    """The overview's answer: ``line`` ("2.1× E2E [1.9, 2.3] · 10 runs, n = 40"), ``claim``
    ("claim 6× E2E: contradicted", "claim 2.5× output tok/s: contradicted in 3 of 5
    scenarios, not yet in 2", "claim 99 % of requests ≥ 80 tok/s: not yet (97.0 % of 300 met
    it)"), ``tone`` (ok, bad, wait) and ``note`` (the tier was never confirmed, or how many
    downgraded samples were left out)."""
    known = [s for s in speed.scenarios if s.estimate is not None]
    note = speed.note or (
        f"{speed.left_out} downgraded sample{'s' * (speed.left_out != 1)} left out"
        if speed.left_out
        else ""
    )
    metric = METRICS[speed.metric]
    if claim and claim.form == "floor" and speed.floor_word:
        tone = {"contradicted": "bad", "confirmed": "ok"}.get(speed.floor_word, "wait")
        floor = {"claim": f"claim {claim.text()}: {speed.floor}", "tone": tone, "note": note}
    else:
        floor = {}
    if not known:
        return {"line": "no paired probes yet", "claim": "", "tone": "wait", "note": note, **floor}
    n = sum(s.n for s in known)
    runs = f"{speed.runs} run{'s' * (speed.runs != 1)}, n = {n}"
    if len(known) == 1:
        s = known[0]
        interval = f" [{s.low:.1f}, {s.high:.1f}]" if s.low is not None else " (no interval yet)"
        line = f"{s.estimate:.1f}× {metric}{interval} · {runs}"
    else:
        low, high = min(s.estimate for s in known), max(s.estimate for s in known)  # type: ignore[type-var]
        line = f"{low:.1f}× to {high:.1f}× {metric} over {len(known)} scenarios · {runs}"
    if floor:
        return {"line": line, **floor}
    if not claim or claim.form == "floor":
        return {"line": line, "claim": "no claim stated", "tone": "wait", "note": note}
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
    return {"line": line, "claim": f"claim {claim.text()}: {said}", "tone": tone, "note": note}
