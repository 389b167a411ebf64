"""The metrics an alert rule can watch: each one's place in the run summary, label and unit.

Per-tier metrics read one tier's block of the summary (rule tier "fast" or "base"); pair
metrics compare the tiers or judge the pair (rule tier "pair"). ``problem`` is the one check of
a rule's metric and tier, used by ``AlertRule.clean`` (admin, config files) and by the
evaluation, which skips a rule it would reject.
"""

from __future__ import annotations

from typing import NamedTuple


class Metric(NamedTuple):
    key: str  # summary field it reads
    percentile: str | None
    label: str
    unit: str  # "ms", "%", "x" or "" (a plain number)


TIER_METRICS = {
    "ttft_p50": Metric("ttft_ms", "p50", "TTFT P50", "ms"),
    "ttft_p95": Metric("ttft_ms", "p95", "TTFT P95", "ms"),
    "e2e_p50": Metric("e2e_ms", "p50", "E2E P50", "ms"),
    "e2e_p95": Metric("e2e_ms", "p95", "E2E P95", "ms"),
    "tpot_p50": Metric("tpot_ms", "p50", "TPOT P50", "ms"),
    "error_rate": Metric("error_rate", None, "error rate", "%"),
    "availability": Metric("availability", None, "availability", "%"),
    "pass_rate": Metric("pass_rate", None, "unit-test pass rate", "%"),
    "downgrade_rate": Metric("downgrade_rate", None, "served-tier downgrade rate", "%"),
}
PAIR_METRICS = {
    "similarity": Metric("similarity", None, "similarity fast vs base (mean Indel ratio)", ""),
    "speedup_ttft": Metric("ttft", None, "TTFT speed-up (base / fast)", "x"),
    "speedup_e2e": Metric("e2e", None, "E2E speed-up (base / fast)", "x"),
    "verdict_different": Metric(
        "verdict", None, "outputs differ across audits (1 = e-detector alarmed)", ""
    ),
    "drift": Metric("drift", None, "drift against the frozen baseline (1 = CUSUM alarmed)", ""),
}
# Raised by the watchdog (monitor.runs.watchdog) or a tripwire, not by a threshold: never
# evaluated after a run. A rule on one of them routes those alerts; with no channels it goes
# to every channel.
SYSTEM_METRICS = {
    "worker_lost": Metric("worker_lost", None, "run failed: worker lost", ""),
    "schedule_overdue": Metric(
        "schedule_overdue", None, "scheduled run overdue (beat, worker or broker down)", ""
    ),
    "database_unavailable": Metric(
        "database_unavailable", None, "run failed: database unavailable", ""
    ),
    "sandbox_unavailable": Metric(
        "sandbox_unavailable", None, "generated code not run: no working sandbox", ""
    ),
    # opened by a run whose requests mostly failed (monitor.alerting.vendor), not the watchdog
    "vendor_failed": Metric(
        "vendor_failed", None, "run failed: the vendor refused or did not answer", ""
    ),
    # raised by a tripwire run (monitor.derived.tripwire), which also schedules an audit
    "tripwire_fired": Metric(
        "tripwire_fired", None, "tripwire fired: a tier's first-token logprobs moved", ""
    ),
}


def problem(metric: str, tier: str) -> str | None:
    """What is wrong with a rule's metric/tier combination, or None when it is valid."""
    if metric in PAIR_METRICS or metric in SYSTEM_METRICS:
        if tier != "pair":
            return f"metric {metric} compares the tiers: set tier to 'pair'"
        return None
    if metric in TIER_METRICS:
        if tier not in ("fast", "base"):
            return f"metric {metric} is per tier: set tier to 'fast' or 'base'"
        return None
    known = ", ".join([*TIER_METRICS, *PAIR_METRICS, *SYSTEM_METRICS])
    return f"unknown metric {metric!r}; expected one of {known}"


def metric(name: str) -> Metric:
    return PAIR_METRICS.get(name) or SYSTEM_METRICS.get(name) or TIER_METRICS[name]


def label(name: str, tier: str) -> str:
    """ "fast TTFT P95"; a pair metric's label alone."""
    if name in PAIR_METRICS or name in SYSTEM_METRICS:
        return metric(name).label
    return f"{tier} {TIER_METRICS[name].label}"


def fmt(name: str, value: float | None) -> str:
    """A value in the metric's unit, as alerts and emails print it."""
    if value is None or name in SYSTEM_METRICS:
        return "n/a"
    unit = metric(name).unit
    if unit == "ms":
        return f"{value:.0f} ms"
    if unit == "%":
        return f"{100 * value:.1f}%"
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:.3f}"
