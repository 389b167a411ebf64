"""A pair's evidence across runs: the e-detector of its audits, CUSUM of its probes against a
stored, frozen baseline, and the error budget both are set for.

Per-run p-values never alert on their own: at one audit an hour a test at α = 0.05 would
raise ~36 false alarms a pair a month. Instead, each finished run is folded into the pair's
stored state (``PairMonitorState``) exactly once, and never recomputed from history (a run
older than the last one folded, finishing late, is left out rather than folded out of order):

- **audits** → ``evals.stats.eprocess.update`` with the audit's MMD p-value, unless the audit
  is *inconclusive* with tier-specific losses (failures that cut one tier's long answers make
  identical models reject at 46 %: such a p is not valid evidence and is not folded; an audit
  inconclusive only for a small n, with rates alike on both tiers, is:
  ``error_budget.foldable``). The p is first checked against
  the pair's own null, the newest base-vs-earlier-base p-values of its audits
  (``eprocess["null_ps"]``, kept across acknowledgements: ``eprocess.calibrated_p``), so a
  test that is anti-conservative on this vendor does not spend the budget. The audit's rate
  tests (failed requests, empty answers: Fisher's p of ``evals.stats.labels.rate_test``) are
  folded into detectors of their own (``eprocess["rates"]``), so failures and refusals reach
  the evidence across audits as what they are. Each detector alarms at c = audits per
  quarter / its part of the verdict's share of the pair's budget (``evals.stats.error_budget``).
- **probes** → ``evals.stats.cusum.update`` against the pair's active ``Baseline``. The
  baseline is frozen from the newest ``MIN_BASELINE_RUNS`` probe runs after the pair started
  (or after the last acknowledgement) once they can make one (a few values may be missing; no
  level shift inside them), and never slides after; until then the state is *calibrating*
  and each new probe tries again with the newest runs (so one probe in which every request
  failed cannot leave it "48 of 48" forever). Its h is set for drift's share of the budget.

Once alarmed, a state stays alarmed until a person acknowledges the change
(:func:`acknowledge`): what is in alarm restarts — the CUSUM and its baseline (collected from
the runs after that moment) for drift; the e-process and the capability loss detectors
(``monitor.derived.loss_detectors``) for the verdict — and what is not keeps its evidence
(acknowledging a latency drift must not wipe the audits' evidence of a model change). The
budget sentence (:func:`budget_words`) goes on the verdict page and into every verdict or
drift alert. The budget, the series and the thresholds are
:mod:`evals.stats.error_budget`'s, the same functions the month-long validation calls.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from django.db import transaction
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from evals.stats import cusum, eprocess
from evals.stats.error_budget import (
    HOURLY_S,
    MIN_BASELINE_RUNS,
    VERDICT_TESTS,
    audit_threshold,
    foldable,
    freeze,
    refusal,
    share,
    share_words,
)
from monitor.derived.run_summary import RunSummary
from monitor.models import Baseline, Pair, PairMonitorState, Run, RunKind, RunStatus

# --- cadence and the error budget -------------------------------------------------------------


def cadence_s(pair: Pair, kind: str) -> tuple[int, bool]:
    """Seconds between the pair's scheduled runs of ``kind`` and whether that is the enabled
    schedule (False: no schedule, hourly assumed: the budget then holds for anything slower).
    Reads the interval's two fields only: every fold asks."""
    tasks = PeriodicTask.objects.filter(name=f"{kind}:{pair.name}", enabled=True)
    every, period = tasks.values_list("interval__every", "interval__period").first() or (None, "")
    if every is None:  # no such schedule, or one that is not an interval
        return HOURLY_S, False
    seconds = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}.get(period, 1)
    return max(1, every * seconds), True


def every_words(every_s: int) -> str:
    if every_s == HOURLY_S:
        return "hourly"
    if every_s % 86400 == 0:
        return "daily" if every_s == 86400 else f"every {every_s // 86400} days"
    if every_s % 3600 == 0:
        return f"every {every_s // 3600} hours"
    if every_s == 60:
        return "every minute"
    return f"every {every_s // 60} minutes" if every_s % 60 == 0 else f"every {every_s} s"


def budget_words(pair: Pair, kind: str) -> str:
    """ "expected false alarms: ≤ 0.17 per month at hourly audits": the renewal bound N / c of
    ``evals.stats.eprocess`` (audits) or runs / ARL0 of ``evals.stats.cusum`` (probes), both
    set to ``BUDGET_PER_QUARTER`` a quarter, here per month at the pair's cadence."""
    return budget_words_of(cadence_s(pair, kind), kind)


def budget_words_of(cadence: tuple[int, bool], kind: str) -> str:
    """:func:`budget_words` at a cadence already looked up (``cadence_s``): a fold reads the
    pair's schedule once for its thresholds and its words."""
    every, scheduled = cadence
    monitor = "verdict" if kind == RunKind.AUDIT else "drift"
    per_month = share(monitor) / 3
    noun = "audits" if kind == RunKind.AUDIT else "probes"
    tail = "" if scheduled else " (no schedule: hourly assumed; slower runs alarm less)"
    return (
        f"expected false alarms: ≤ {per_month:.2g} per month at {every_words(every)} {noun}{tail}"
        f" ({share_words(monitor)})"
    )


def eprocess_threshold(pair: Pair, test: str = "mmd") -> float:
    every, _ = cadence_s(pair, RunKind.AUDIT)
    return audit_threshold(every, test)


# --- the stored state -------------------------------------------------------------------------


def state_of(pair: Pair) -> PairMonitorState:
    state, _ = PairMonitorState.objects.get_or_create(pair=pair)
    return state


def locked_state(pair: Pair) -> PairMonitorState:
    """The pair's state, created when missing, locked until the caller's transaction ends: the
    lock serialises the folds and acknowledgements of one pair. The locking read is the only
    read (a created row is locked by its insert), and the row carries the pair already read."""
    row, _ = PairMonitorState.objects.select_for_update().get_or_create(pair=pair)
    row.pair = pair
    return row


def eprocess_state(row: PairMonitorState) -> eprocess.EProcessState:
    return (eprocess.EProcessState.from_dict(row.eprocess) if row.eprocess
            else eprocess.EProcessState())  # fmt: skip


def active_baseline(pair: Pair) -> Baseline | None:
    return Baseline.objects.filter(pair=pair, active=True).first()


def run_values(summary: RunSummary) -> dict[str, float | None]:
    """A probe's values of the drift series (None where it has none: n below the minimum)."""
    out: dict[str, float | None] = {}
    for tier in ("fast", "base"):
        stat = summary.tier(tier).ttft_ms
        out[f"ttft_p50:{tier}"] = stat.p50 if stat.n >= summary.min_n else None
    fast, base = out["ttft_p50:fast"], out["ttft_p50:base"]
    out["ttft_ratio:fast_vs_base"] = fast / base if fast and base else None
    sim = summary.similar("fast_vs_base")
    out["similarity:fast_vs_base"] = sim.mean_ratio if sim else None
    return out


def after_run(*, run_id: int, run: Run | None = None) -> None:
    """Fold one finished run into its pair's state, once (a run already folded is skipped).
    ``run``: that run as its caller just read it, with its pair, so it is not read again."""
    run = run or Run.objects.select_related("pair").get(id=run_id)
    if run.status != RunStatus.DONE or run.kind not in (RunKind.AUDIT, RunKind.PROBE):
        return
    with transaction.atomic():
        row = locked_state(run.pair)
        if run.kind == RunKind.AUDIT:
            _fold_audit(row, run)
        else:
            _fold_probe(row, run)


def _fold_audit(row: PairMonitorState, run: Run) -> None:
    verdict = run.summary_obj.verdict
    if verdict is None or (row.last_audit_id or 0) >= run.id:
        return
    if row.since and run.created_at < row.since:
        return  # measured before the acknowledgement: belongs to the old state
    state = eprocess_state(row)
    rate_ps = [r.get("p_value") for r in verdict.data.get("rates") or []]
    valid = foldable(verdict.label, verdict.p_value, rate_ps)  # module docstring
    null_ps = [float(p) for p in (row.eprocess or {}).get("null_ps") or []]
    p = verdict.p_value if valid else None
    folded = eprocess.calibrated_p(p, null_ps) if p is not None else None
    evidence = eprocess.AuditEvidence(p_value=folded, run_id=run.id)
    cadence = cadence_s(row.pair, RunKind.AUDIT)  # once: every threshold and the words
    every = cadence[0]
    state, decision = eprocess.update(state, evidence, threshold=audit_threshold(every, "mmd"))
    rates = _fold_rates(row, verdict.data.get("rates") or [], run.id, every)
    guard = {"p_folded": folded, "null_n": len(null_ps),
             "miscalibrated": eprocess.null_miscalibrated(null_ps)}  # fmt: skip
    stability = (verdict.data.get("base_stability") or {}).get("p_value")
    if stability is not None:
        null_ps = (null_ps + [float(stability)])[-eprocess.CALIBRATION_WINDOW :]
    row.eprocess, row.last_audit = {**asdict(state), "rates": rates, "null_ps": null_ps}, run
    row.save(update_fields=["eprocess", "last_audit", "updated_at"])
    block = {
        **asdict(decision),
        "evalue": state.evalue,
        "audits": state.audits,
        "budget": budget_words_of(cadence, RunKind.AUDIT),
        "rates": {what: {k: r[k] for k in ("detector", "alarmed", "alarm_audit", "audits")}
                  | {"threshold": audit_threshold(every, what)}
                  for what, r in rates.items()},
        "calibration": guard,
    }  # fmt: skip
    if not valid:
        block["skipped"] = ("inconclusive audit with tier-specific losses: its p is not folded "
                            "into the evidence")  # fmt: skip
    Run.objects.merge_summary(run.id, verdict={**verdict.data, "monitor": block})


def _fold_rates(row: PairMonitorState, rates: list[Mapping[str, Any]], run_id: int, every: int
                ) -> dict[str, Any]:  # fmt: skip
    """The audit's rate tests (failed requests, empty answers) into detectors of their own:
    Fisher's two-sided p is valid (super-uniform) when both tiers fail or go silent alike."""
    stored = dict((row.eprocess or {}).get("rates") or {})
    for r in rates:
        what = r.get("what")
        if what not in VERDICT_TESTS or r.get("p_value") is None:
            continue
        old = eprocess.EProcessState.from_dict(stored.get(what) or {})
        new, _ = eprocess.update(
            old, eprocess.AuditEvidence(p_value=max(float(r["p_value"]), 1e-12), run_id=run_id),
            threshold=audit_threshold(every, what),
        )  # fmt: skip
        stored[what] = asdict(new)
    return stored


def _fold_probe(row: PairMonitorState, run: Run) -> None:
    if (row.last_probe_id or 0) >= run.id:
        return
    pair = row.pair
    cadence = cadence_s(pair, RunKind.PROBE)
    baseline = active_baseline(pair)
    if baseline is None:
        _calibrate(row, run, cadence)
        return
    frozen = cusum.Baseline.from_json(_json(baseline.statistics))
    state = (cusum.CusumState.from_json(_json(row.cusum)) if row.cusum
             else cusum.start(frozen))  # fmt: skip
    hour = (run.finished_at or run.created_at).hour
    state, alarm = cusum.update(state, frozen, run_values(run.summary_obj), hour=hour)
    row.cusum, row.last_probe = asdict(state), run
    row.save(update_fields=["cusum", "last_probe", "updated_at"])
    Run.objects.merge_summary(run.id, drift=_drift_block(cadence, baseline, state, alarm))


def _calibrate(row: PairMonitorState, run: Run, cadence: tuple[int, bool]) -> None:
    """A probe before the pair has a baseline: it freezes one when the newest runs can make
    one, else the run says how far the collection is (from the same candidates read once)."""
    runs = _baseline_candidates(row.pair, row.since)
    baseline, why = _maybe_freeze(row, runs, cadence[0])
    row.last_probe = run
    row.save(update_fields=["cusum", "last_probe", "updated_at"])
    Run.objects.merge_summary(
        run.id,
        drift=_calibrating(len(runs), cadence, why)
        if baseline is None
        else _drift_block(cadence, baseline, None, None),
    )


def _json(data: Mapping[str, Any]) -> str:
    return json.dumps(data)


def _baseline_candidates(pair: Pair, since) -> list[Run]:
    """The newest ``MIN_BASELINE_RUNS`` probe runs since ``since``, oldest first: the first
    48 when there are 48, and after a refusal the window moves on with each new probe."""
    runs = Run.objects.trend().filter(pair=pair)
    if since is not None:
        runs = runs.filter(created_at__gte=since)
    newest = runs.order_by("-created_at", "-id").only("id", "created_at", "finished_at", "summary")
    return list(reversed(newest[:MIN_BASELINE_RUNS]))


def _maybe_freeze(row: PairMonitorState, runs: list[Run], every: int
                  ) -> tuple[Baseline | None, str]:  # fmt: skip
    """Freeze the baseline from the newest ``MIN_BASELINE_RUNS`` probes since ``row.since``
    (``runs``, :func:`_baseline_candidates`) once there are that many and they can make one
    (:func:`evals.stats.error_budget.freeze`); else (None, why not)."""
    if len(runs) < MIN_BASELINE_RUNS:
        return None, ""
    frozen = freeze(
        [run_values(r.summary_obj) for r in runs],
        [(r.finished_at or r.created_at).hour for r in runs],
        every,
        run_ids=[r.id for r in runs],
        set_by=row.acknowledged_by or "automatic",
        set_at=timezone.now().isoformat(),
    )
    if frozen is None:
        return None, refusal([run_values(r.summary_obj) for r in runs]) or "no series to watch"
    baseline = Baseline.objects.create(
        pair=row.pair, run_ids=[r.id for r in runs], statistics=_plain(frozen), set_by=frozen.set_by
    )
    row.cusum = asdict(cusum.start(frozen))
    return baseline, ""


def _plain(frozen: cusum.Baseline) -> dict[str, Any]:
    return json.loads(frozen.to_json())


def _calibrating(have: int, cadence: tuple[int, bool], why: str = "") -> dict[str, Any]:
    reason = f"collecting the baseline: {have} of {MIN_BASELINE_RUNS} probe runs"
    if why:
        reason += f"; not frozen: {why}; trying again with the next runs"
    return {
        "state": "calibrating",
        "runs": have,
        "reason": reason,
        "budget": budget_words_of(cadence, RunKind.PROBE),
    }


def _drift_block(
    cadence: tuple[int, bool],
    baseline: Baseline,
    state: cusum.CusumState | None,
    alarm: cusum.DriftAlarm | None,
) -> dict[str, Any]:
    frozen = baseline.statistics
    names = [s["name"] for s in frozen["series"]]
    sums = alarm.sums if alarm else dict.fromkeys(names, 0.0)
    zs = alarm.z if alarm else dict.fromkeys(names)
    series = {n: {"z": _finite(zs.get(n)), "s": sums.get(n, 0.0)} for n in names}
    incident = bool(alarm and alarm.incident)
    drifting = state is not None and state.alarmed
    return {
        "state": "drift" if drifting else ("incident" if incident else "ok"),
        "cause": _cause(state.alarm_series if drifting and state else None, incident),
        "tiers": {n: round(v, 3) for n, v in (alarm.context or {}).items()} if alarm else {},
        "series": series,
        "h": frozen["h"],
        "baseline_id": baseline.id,
        "baseline_runs": len(baseline.run_ids),
        "drifting": [state.alarm_series] if state is not None and state.alarmed else [],
        "new_alarm": bool(alarm and alarm.new_alarm),
        "runs": state.runs if state else 0,
        "budget": budget_words_of(cadence, RunKind.PROBE),
    }


CAUSES = {  # what a drift alarm of each series means, in words
    "ttft_ratio:fast_vs_base": "a tier change: the fast tier slowed relative to the base tier",
    "similarity:fast_vs_base": "a tier change: the tiers' temperature-0 answers moved apart",
}
INCIDENT = "both tiers slowed: vendor incident (not a tier change; the ratio did not move)"


def _cause(series: str | None, incident: bool) -> str:
    if series is not None:
        return CAUSES.get(series, f"a tier change in {series}")
    return INCIDENT if incident else ""


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


# --- acknowledgement --------------------------------------------------------------------------


def acknowledge(*, pair: Pair, user: str) -> PairMonitorState:
    """A person accepts a change. What is in alarm restarts (module docstring): drift → the
    CUSUM restarts, the active baseline is retired and a new one is frozen from the probe runs
    after this moment; the verdict (or a rate detector) → the e-process and the capability loss
    detectors restart. Nothing in alarm (a person re-baselining by hand): everything restarts."""
    with transaction.atomic():
        row = locked_state(pair)
        drift = bool((row.cusum or {}).get("alarmed"))
        rates = (row.eprocess or {}).get("rates") or {}
        verdict = eprocess_state(row).alarmed or any(r.get("alarmed") for r in rates.values())
        if not drift and not verdict:
            drift = verdict = True
        if verdict:  # the base tier's own null stays: it is the vendor's, not the change's
            null_ps = (row.eprocess or {}).get("null_ps") or []
            row.eprocess = {**asdict(eprocess.acknowledge(eprocess_state(row))), "null_ps": null_ps}
            row.capability = {}  # the capability loss detectors restart too
        if drift:
            row.cusum = {}
            Baseline.objects.filter(pair=pair, active=True).update(active=False)
        row.since = timezone.now()
        row.acknowledged_by = user
        row.save()
    return row


# --- across pairs -----------------------------------------------------------------------------


def differs_across_pairs(pairs: list[Pair], alpha: float = 0.05) -> dict[int, bool]:
    """e-BH across pairs (false discovery rate ≤ α over the overview's "differs" flags) on each
    pair's e-process since its last acknowledgement."""
    rows = {r.pair_id: r for r in PairMonitorState.objects.filter(pair__in=pairs)}
    evalues = [eprocess_state(rows[p.id]).evalue if p.id in rows else 1.0 for p in pairs]
    return {p.id: flag for p, flag in zip(pairs, eprocess.e_bh(evalues, alpha), strict=True)}
