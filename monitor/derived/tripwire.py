"""A pair's logprob tripwires folded run by run into ``TripwireState``
(``evals.stats.tripwire``, docs/measures.md "Logprob tripwires").

Per tier the question is "did this one change?": its first ``reference_runs(every_s)``
tripwire runs are frozen, *run by run*, as its reference (a day of runs: 24 at hourly runs, a
week at daily ones), and every later run is tested against them with the run as the
exchangeable unit (``evals.stats.run_conformal``: a conformal rank among the reference runs
and a tolerance bet beyond the farthest of them). Why the run and not the request: a serving
stack's numerics move by the hour, the same for every query of a run, and a per-request test
called each such move a change. The run's e-value goes into that tier's e-detector, whose
threshold gives the tripwires their share of the pair's false-alarm budget
(``TRIPWIRE_BUDGET`` per tier per quarter) *at the tripwire's own cadence* (``threshold``).
Fast against base ("are they the same?") is a distance on the same prompts with its noise
floor, the same distance between the two references: shown, never alarmed on, never read as
proof of identity.

When a tier's detector crosses its threshold the tripwire *fires*: an alert (metric
``tripwire_fired``) and the caller's ``escalate`` schedules an MMD audit at once. A tier
stored before the reference was kept run by run collects its reference again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from evals.stats import eprocess, error_budget, run_conformal
from evals.stats import tripwire as stats
from monitor.alerting import lifecycle
from monitor.alerting.alerts import pair_link
from monitor.derived import border as border_fold
from monitor.models import Alert, Pair, Run, TripwireState

log = logging.getLogger(__name__)

HOURLY_S = error_budget.HOURLY_S
# expected false alarms per tier per quarter: half the tripwires' share of the pair's one
# budget (``evals.stats.error_budget``)
TRIPWIRE_BUDGET = error_budget.tripwire_share_per_tier()
REFERENCE_RUNS = run_conformal.reference_runs(HOURLY_S)  # at the default, hourly cadence
Window = Mapping[str, Sequence[stats.Observation]]


def threshold(every_s: float = HOURLY_S) -> float:
    """The tier's e-detector alarm level at one tripwire run every ``every_s`` seconds: runs per
    quarter / the tier's share (21,600 at hourly runs, 900 at daily ones)."""
    return eprocess.threshold_for(error_budget.runs_per_quarter(every_s), TRIPWIRE_BUDGET)


def fold(
    block: dict[str, Any], test: run_conformal.RunTest | None, run_id: int, every_s: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A tier's e-detector after one tested run (logprob or border), and the run's figures for
    the page; a run with no evidence (``test`` None) changes nothing and says so."""
    state = eprocess.EProcessState(**block["eprocess"]) if block.get("eprocess") else None
    state, decision = eprocess.update(
        state or eprocess.EProcessState(),
        eprocess.AuditEvidence(
            p_value=None, e_value=None if test is None else test.e_value, run_id=run_id
        ),
        threshold=threshold(every_s),
    )
    last: dict[str, Any] = {
        "run": run_id,
        "detector": decision.detector,
        "threshold": decision.threshold,
        "new_alarm": decision.new_alarm,
    }
    if test is None:
        last["no_evidence"] = "no query of this run answered a reference input"
    else:
        last.update(statistic=test.statistic, p=test.p_value, e=test.e_value,
                    rank=round(test.rank_p * test.n_runs), of=test.n_runs,
                    tolerance=test.tolerance, tolerance_p=test.tolerance_p)  # fmt: skip
    return {**block, "eprocess": json.loads(state.to_json())}, last


def _tier_after(
    block: dict[str, Any], window: Window, run_id: int, seed: int, every_s: float = HOURLY_S
) -> dict[str, Any]:
    """One tier's block after one run: still collecting its reference runs, or tested."""
    block = dict(block)
    block.pop("skipped", None)
    if "reference" in block and "reference_windows" not in block:
        block = {}  # a reference pooled before runs were kept apart: collected again
    runs = list(block.get("reference_windows") or [])
    need = run_conformal.reference_runs(every_s)
    if len(runs) < need:
        runs.append({p: list(v) for p, v in window.items()})
        block["reference_windows"], block["reference_runs"] = runs, len(runs)
        block["reference_of"] = need
        block["last"] = {"run": run_id, "collecting": True}
        return block
    test = stats.run_test(runs, window, seed=seed)
    block, block["last"] = fold(block, test, run_id, every_s)
    return block


def pooled_reference(block: Mapping[str, Any]) -> dict[str, list[stats.Observation]]:
    """A tier's reference runs as one window (the fast-against-base floor)."""
    out: dict[str, list[stats.Observation]] = {}
    for window in block.get("reference_windows") or ():
        for prompt, rows in window.items():
            out.setdefault(prompt, []).extend(rows)
    return out


def after_run(
    *,
    run: Run,
    windows: Mapping[str, Window],
    skipped: Mapping[str, str],
    escalate: Callable[[Pair], Run] | None = None,
    border: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[TripwireState, list[Alert]]:
    """Fold one tripwire run (per tier its queries' first-token logprobs, or the reason it
    was skipped) into the pair's state; fire, alert and escalate when a detector crosses."""
    from monitor.derived.evidence import cadence_s  # evidence reads this module's threshold

    every_s, _ = cadence_s(run.pair, "tripwire")
    with transaction.atomic():
        state, _ = TripwireState.objects.select_for_update().get_or_create(pair=run.pair)
        tiers = dict(state.tiers)
        fired = []
        for tier, window in windows.items():
            tiers[tier] = _tier_after(tiers.get(tier, {}), window, run.id, run.seed, every_s)
            if tiers[tier]["last"].get("new_alarm"):
                fired.append(tier)
        for tier, result in (border or {}).items():  # endpoints without logprobs
            tiers[tier] = border_fold.tier_after(
                tiers.get(tier, {}), result, run.id, run.seed, every_s
            )
            if tiers[tier]["last"].get("new_alarm"):
                fired.append(tier)
        for tier, reason in skipped.items():
            tiers[tier] = {**tiers.get(tier, {}), "skipped": reason, "last": {"run": run.id}}
        state.tiers = tiers
        state.cross = _cross(tiers, windows, run.id) or state.cross
        if border:
            state.cross = {**(border_fold.cross(tiers) or state.cross), "run": run.id}
        if fired and not state.fired_tier:
            state.fired_tier, state.fired_run, state.fired_at = fired[0], run, timezone.now()
        state.save()
    if fired and state.fired_run_id == run.id:
        if escalate is not None:
            audit = escalate(run.pair)
            TripwireState.objects.filter(pk=state.pk).update(audit=audit)
            state.audit = audit
        return state, _alert(run, state, fired)
    return state, []


def _cross(tiers: dict[str, Any], windows: Mapping[str, Window], run_id: int) -> dict | None:
    if "fast" not in windows or "base" not in windows:
        return None
    refs = [pooled_reference(tiers.get(t, {})) for t in ("fast", "base")]
    floor = stats.cross_distance(*refs) if all(refs) else None
    return {
        "run": run_id,
        "distance": stats.cross_distance(windows["fast"], windows["base"]),
        "floor": floor,
    }


def _alert(run: Run, state: TripwireState, fired: list[str]) -> list[Alert]:
    from monitor.runs.watchdog import system_rules  # the rule that routes system alerts

    last = state.tiers[fired[0]]["last"]
    audit = f"audit run {state.audit_id} scheduled" if state.audit_id else "no audit scheduled"
    probe = escalated_probe(state)
    if probe is not None:
        audit += f", capability probe run {probe.id} scheduled"
    moved = (
        f"border-input answers moved a mean total-variation distance of {last['statistic']:.3f}"
        if last.get("kind") == "border"
        else f"first-token logprobs moved {last['statistic']:.3f} nats"
    )
    message = (
        f"Tripwire fired on the {' and '.join(fired)} tier of pair {run.pair.name}: {moved} "
        "from the tier's frozen reference "
        f"(p {last['p']:.3g}; evidence {last['detector']:.3g} ≥ {last['threshold']:.0f}, "
        f"{error_budget.share_words('tripwires')}, {TRIPWIRE_BUDGET:g} a tier). "
        f"{audit}. {pair_link(run.pair)}"
    )
    opened = []
    for rule in system_rules("tripwire_fired", run.pair):
        alert = Alert.objects.create(rule=rule, pair=run.pair, run=run, message=message)
        opened.append(lifecycle.opened(alert_id=alert.pk))
    return opened


def escalated_probe(state: TripwireState) -> Run | None:
    """The capability probe the firing queued with its audit (``tasks.escalate_to_audit``)."""
    if not state.fired_at:
        return None
    return (
        Run.objects.filter(
            pair_id=state.pair_id, kind="probe", trigger="tripwire", created_at__gte=state.fired_at
        )
        .order_by("id")
        .first()
    )


def acknowledge(pair: Pair) -> None:
    """A person accepted the change: references are collected again, evidence from 1."""
    TripwireState.objects.filter(pair=pair).update(
        tiers={}, cross={}, fired_tier="", fired_run=None, fired_at=None, audit=None
    )
