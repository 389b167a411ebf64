"""A pair's logprob tripwires folded run by run into ``TripwireState``
(``evals.stats.tripwire``, docs/measures.md "Logprob tripwires").

Per tier the question is "did this one change?": its first ``REFERENCE_RUNS`` tripwire runs
are frozen as its reference window, every later run is tested against it, and the run's p
becomes an e-value in that tier's e-detector, by the tripwires' own calibrator
(``eprocess.TRIPWIRE``: floored at the permutation test's resolution, so a switched model
fires at the third hourly run). The detector's threshold gives the tripwires
their own share of the pair's false-alarm budget (``TRIPWIRE_BUDGET`` per quarter at hourly
runs). Fast against base ("are they the same?") is a distance on the same prompts with its
noise floor, the same distance between the two reference windows: shown, never alarmed on,
never read as proof of identity.

When a tier's detector crosses its threshold the tripwire *fires*: an alert (metric
``tripwire_fired``) and the caller's ``escalate`` schedules an MMD audit at once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from evals.stats import eprocess, error_budget
from evals.stats import tripwire as stats
from monitor.alerting import lifecycle
from monitor.alerting.alerts import pair_link
from monitor.derived import border as border_fold
from monitor.models import Alert, Pair, Run, TripwireState

log = logging.getLogger(__name__)

REFERENCE_RUNS = error_budget.TRIPWIRE_REFERENCE_RUNS  # a day of hourly runs: why, there
# expected false alarms per tier per quarter at hourly tripwire runs: half the tripwires' share
# of the pair's one budget (``evals.stats.error_budget``)
TRIPWIRE_BUDGET = error_budget.tripwire_share_per_tier()
RUNS_PER_QUARTER = 24 * 90
Window = Mapping[str, Sequence[stats.Observation]]


def threshold() -> float:
    return eprocess.threshold_for(RUNS_PER_QUARTER, TRIPWIRE_BUDGET)


def _tier_after(block: dict[str, Any], window: Window, run_id: int, seed: int) -> dict[str, Any]:
    """One tier's block after one run: still collecting its reference, or tested against it."""
    block = dict(block)
    block.pop("skipped", None)
    reference = {p: list(v) for p, v in (block.get("reference") or {}).items()}
    if block.get("reference_runs", 0) < REFERENCE_RUNS:
        for prompt, rows in window.items():
            reference.setdefault(prompt, []).extend(rows)
        block["reference"], block["reference_runs"] = reference, block.get("reference_runs", 0) + 1
        block["last"] = {"run": run_id, "collecting": True}
        return block
    test = stats.window_test(reference, window, seed=seed)
    state = eprocess.EProcessState(**block["eprocess"]) if block.get("eprocess") else None
    state, decision = eprocess.update(
        state or eprocess.EProcessState(),
        eprocess.AuditEvidence(p_value=test.p_value, run_id=run_id, calibrator=eprocess.TRIPWIRE),
        threshold=threshold(),
    )
    block["eprocess"] = json.loads(state.to_json())
    block["last"] = {
        "run": run_id,
        "statistic": test.statistic,
        "p": test.p_value,
        "e": decision.e_value,
        "detector": decision.detector,
        "threshold": decision.threshold,
        "new_alarm": decision.new_alarm,
    }
    return block


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
    with transaction.atomic():
        state, _ = TripwireState.objects.select_for_update().get_or_create(pair=run.pair)
        tiers = dict(state.tiers)
        fired = []
        for tier, window in windows.items():
            tiers[tier] = _tier_after(tiers.get(tier, {}), window, run.id, run.seed)
            if tiers[tier]["last"].get("new_alarm"):
                fired.append(tier)
        for tier, result in (border or {}).items():  # endpoints without logprobs
            tiers[tier] = border_fold.tier_after(
                tiers.get(tier, {}), result, run.id, run.seed, threshold()
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
    refs = [tiers.get(t, {}).get("reference") for t in ("fast", "base")]
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
