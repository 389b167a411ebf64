"""A pair's error budget and the monitoring settings derived from it, in one place.

The product (``monitor.derived.evidence``) and the month-long validation
(``benchmarks/monitoring_month.py``) both call these, so what is measured is what ships: the
budget (expected false alarms per pair per quarter), the probe series watched for drift, how
many probe runs a baseline is frozen from, the e-detector threshold at a cadence and the
CUSUM's target in-control run length.

- Audits: c = audits per quarter / budget (:func:`evals.stats.eprocess.threshold_for`, the
  renewal bound N / c); at hourly audits c = 4,320.
- Probes: the pair's ARL0 = probes per quarter / budget, shared by its series
  (:meth:`evals.stats.cusum.Baseline.from_runs`); at hourly probes, 3 series and a 48-run
  baseline, h ≈ 20.1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evals.stats import cusum, eprocess

BUDGET_PER_QUARTER = eprocess.DEFAULT_BUDGET  # expected false alarms per pair per quarter
QUARTER_S = 90 * 86400
MONTH_S = QUARTER_S / 3
HOURLY_S = 3600
MIN_BASELINE_RUNS = cusum.MIN_BASELINE_RUNS
SERIES = (  # probe statistics watched for drift; transform and which way is bad
    cusum.SeriesSpec("ttft_p50:fast", "log", 1),
    cusum.SeriesSpec("ttft_p50:base", "log", 1),
    cusum.SeriesSpec("similarity:fast_vs_base", "identity", -1),
)


def runs_per_quarter(every_s: float) -> float:
    return QUARTER_S / every_s


def audit_threshold(every_s: float) -> float:
    """The e-detector's alarm level at one audit every ``every_s`` seconds."""
    return eprocess.threshold_for(runs_per_quarter(every_s), BUDGET_PER_QUARTER)


def probe_arl(every_s: float) -> float:
    """The pair's in-control run length (probes) at one probe every ``every_s`` seconds."""
    return runs_per_quarter(every_s) / BUDGET_PER_QUARTER


def freeze(
    values: Sequence[Mapping[str, float | None]],
    hours: Sequence[int],
    every_s: float,
    **meta: object,
) -> cusum.Baseline | None:
    """The baseline of ``SERIES`` from a pair's first ``MIN_BASELINE_RUNS`` probe values
    (oldest first, with each run's hour of day); series with too few values there are left
    out, None when none is left. ``meta``: run_ids, set_by, set_at."""
    specs = [s for s in SERIES
             if sum(v.get(s.name) is not None for v in values) >= MIN_BASELINE_RUNS]  # fmt: skip
    if len(values) < MIN_BASELINE_RUNS or not specs:
        return None
    return cusum.Baseline.from_runs(specs, values, arl_pair=probe_arl(every_s), hours=hours,
                                    **meta)  # type: ignore[arg-type]  # fmt: skip
