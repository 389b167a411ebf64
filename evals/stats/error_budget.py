"""A pair's error budget and the monitoring settings derived from it, in one place.

The product (``monitor.derived.evidence``) and the month-long validation
(``benchmarks/monitoring_month.py``) both call these, so what is measured is what ships: the
budget (expected false alarms per pair per quarter), the probe series watched for drift, how
many probe runs a baseline is frozen from, the e-detector threshold at a cadence and the
CUSUM's target in-control run length.

- Audits: c = audits per quarter / budget (:func:`evals.stats.eprocess.threshold_for`, the
  renewal bound N / c); at hourly audits c = 4,320.
- Probes: the pair's ARL0 = probes per quarter / budget, shared by its series
  (:meth:`evals.stats.cusum.Baseline.from_runs`).

**One budget per pair.** A pair is watched by four monitors; false alarms add up across them
(the expected count of a sum is the sum of the expected counts, whatever their dependence),
so the pair's budget is *split* between them (:data:`SHARES`) and each monitor sets its
threshold for its share only: tripwires (both tiers), drift, the audit verdict and capability
loss together stay ≤ ``BUDGET_PER_QUARTER`` expected false alarms per pair per quarter at any
cadence (each threshold is computed for its monitor's own cadence). Each alert states its
share (:func:`share_words`). Within the verdict's share, the MMD test and the two rate tests
(failed requests, empty answers) each get a part (:data:`VERDICT_TESTS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evals.stats import cusum, eprocess, run_conformal

BUDGET_PER_QUARTER = eprocess.DEFAULT_BUDGET  # expected false alarms per pair per quarter
QUARTER_S = 90 * 86400
MONTH_S = QUARTER_S / 3
HOURLY_S = 3600
MIN_BASELINE_RUNS = cusum.MIN_BASELINE_RUNS
MAX_MISSING = cusum.MAX_MISSING
SERIES = (  # probe statistics watched for drift; transform and which way is bad
    # the tier series: log TTFT_fast − log TTFT_base, so load shared by both tiers cancels
    cusum.SeriesSpec("ttft_ratio:fast_vs_base", "log", 1),
    cusum.SeriesSpec("similarity:fast_vs_base", "identity", -1),
)
CONTEXT_SERIES = (  # each tier's own TTFT: names a vendor incident, never a drift alarm
    cusum.SeriesSpec("ttft_p50:fast", "log", 1),
    cusum.SeriesSpec("ttft_p50:base", "log", 1),
)

# The pair's budget split between its monitors (expected false alarms per quarter; the sum
# is BUDGET_PER_QUARTER). The tripwires' share covers both tiers (half each).
SHARES = {"tripwires": 0.2, "verdict": 0.15, "drift": 0.1, "capability": 0.05}
# Runs frozen as a tier's tripwire reference at the hourly default: a day of runs, each one
# unit of the run-level test (``evals.stats.run_conformal.reference_runs`` for any cadence).
TRIPWIRE_REFERENCE_RUNS = run_conformal.reference_runs(HOURLY_S)
# The verdict's share split between its tests across audits (fractions of the share).
VERDICT_TESTS = {"mmd": 2 / 3, "failed requests": 1 / 6, "empty answers": 1 / 6}
MONITOR_WORDS = {"tripwires": "tripwires", "verdict": "audit verdict", "drift": "drift",
                 "capability": "capability loss"}  # fmt: skip


def share(monitor: str) -> float:
    """The expected false alarms per quarter ``monitor`` may raise on one pair (its part of
    ``BUDGET_PER_QUARTER``): "tripwires", "verdict", "drift" or "capability"."""
    if monitor not in SHARES:
        raise ValueError(f"unknown monitor {monitor!r}: one of {', '.join(SHARES)}")
    return SHARES[monitor]


def tripwire_share_per_tier() -> float:
    """The tripwires' budget per tier per quarter (``monitor.derived.tripwire`` sets each
    tier's e-detector threshold for it): half the tripwires' share."""
    return share("tripwires") / 2


def share_words(monitor: str) -> str:
    """ "drift's share: 0.1 of the pair's 0.5 expected false alarms per quarter"."""
    return (f"{MONITOR_WORDS[monitor]}'s share: {share(monitor):g} of the pair's "
            f"{BUDGET_PER_QUARTER:g} expected false alarms per quarter")  # fmt: skip


def runs_per_quarter(every_s: float) -> float:
    return QUARTER_S / every_s


def audit_threshold(every_s: float, test: str = "mmd") -> float:
    """The e-detector's alarm level for one of the verdict's tests across audits
    (:data:`VERDICT_TESTS`) at one audit every ``every_s`` seconds."""
    return eprocess.threshold_for(runs_per_quarter(every_s), share("verdict") * VERDICT_TESTS[test])


TIER_SPECIFIC_ALPHA = 0.05  # a rate test below this: the audit's losses are tier-specific


def foldable(label: str, p_value: float | None, rate_ps: Sequence[float | None]) -> bool:
    """Whether an audit's MMD p is evidence across audits. An audit that is not inconclusive:
    yes. An inconclusive one only when its losses are not tier-specific: every rate test
    (failed requests, empty answers) has p ≥ ``TIER_SPECIFIC_ALPHA`` (e.g. too few prompts
    or texts, lost alike on both tiers: the permutation p of what is left is valid, only
    weak). Failures that cut one tier's long answers make identical models reject at 46 %;
    Fisher's test sees them, and such a p is not folded. No rate test: not folded."""
    if label != "inconclusive":
        return True
    tested = [p for p in rate_ps if p is not None]
    return p_value is not None and bool(tested) and min(tested) >= TIER_SPECIFIC_ALPHA


def probe_arl(every_s: float) -> float:
    """The pair's drift in-control run length (probes) at one probe every ``every_s`` s."""
    return runs_per_quarter(every_s) / share("drift")


def freeze(
    values: Sequence[Mapping[str, float | None]],
    hours: Sequence[int],
    every_s: float,
    **meta: object,
) -> cusum.Baseline | None:
    """The baseline of ``SERIES`` (and the ``CONTEXT_SERIES`` that name an incident) from
    ``MIN_BASELINE_RUNS`` probe values (oldest first, with each run's hour of day). A series
    may miss up to ``MAX_MISSING`` values (an outage hour, a 5xx burst); one missing more is
    left out. None when no decision series is left or the runs cannot make a baseline (a
    level shift inside them, φ at its clip: :func:`evals.stats.cusum.refusal`): the caller
    retries with the *next* runs. ``meta``: run_ids, set_by, set_at."""
    need = MIN_BASELINE_RUNS - MAX_MISSING

    def kept(specs: Sequence[cusum.SeriesSpec]) -> list[cusum.SeriesSpec]:
        return [s for s in specs if sum(v.get(s.name) is not None for v in values) >= need]

    specs, context = kept(SERIES), kept(CONTEXT_SERIES)
    if len(values) < MIN_BASELINE_RUNS or not specs:
        return None
    if cusum.refusal(specs, values) is not None:
        return None
    return cusum.Baseline.from_runs(specs, values, arl_pair=probe_arl(every_s), hours=hours,
                                    context=context, min_runs=need,
                                    **meta)  # type: ignore[arg-type]  # fmt: skip


def refusal(values: Sequence[Mapping[str, float | None]]) -> str | None:
    """Why ``values`` cannot make a baseline (for the calibrating page), or None."""
    need = MIN_BASELINE_RUNS - MAX_MISSING
    specs = [s for s in SERIES if sum(v.get(s.name) is not None for v in values) >= need]
    if not specs:
        return f"no drift series has {need} of {len(values)} probe runs with a value"
    return cusum.refusal(specs, values)
