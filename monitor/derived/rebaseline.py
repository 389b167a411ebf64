"""Acknowledge a change and re-baseline, leaving a trace: the one call every path makes.

A re-baseline throws evidence away: what is in alarm restarts (``evidence.acknowledge``: the
audits' e-process and the capability loss detectors for a verdict alarm, the probes' CUSUM
sums and the active drift baseline for drift, everything when nothing is in alarm), and the
tripwires collect new references. A dispute later ("why did the alarm stop?") needs who did
it, when, and what was reset, so the reset is written to the audit log (``ConfigChange``,
action ``reset``, shown at /audit/) in the same transaction, and the pair's timeline reads it
from there (the web layer's timeline page).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from monitor.derived import evidence, tripwire
from monitor.models import Baseline, ConfigChange, Pair, PairMonitorState, TripwireState

ACTION = "reset"
SOURCE = "acknowledge & re-baseline"


def _snapshot(pair: Pair) -> dict[str, Any]:
    """The pair's evidence in words and names: e-process, CUSUM sums, capability detectors,
    the active baseline, the tripwires' tiers."""
    row = PairMonitorState.objects.filter(pair=pair).first()
    e = (row.eprocess if row else None) or {}
    wires = TripwireState.objects.filter(pair=pair).first()
    baselines = [
        f"#{b.pk} from {len(b.run_ids)} probe runs, set by {b.set_by} {b.set_at:%Y-%m-%d %H:%M} UTC"
        for b in Baseline.objects.filter(pair=pair, active=True)
    ]
    return {
        "e-process": f"e = {e.get('evalue', 1.0):.3g} over {e.get('audits', 0)} audits"
        + (" (alarmed)" if e.get("alarmed") else ""),
        "CUSUM": sorted((row.cusum if row else None) or {}),
        "capability detectors": sorted((row.capability if row else None) or {}),
        "baseline": baselines or ["none active"],
        "tripwires": sorted((wires.tiers if wires else None) or {}),
    }


def _reset(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """What the reset changed, field → [as it was, as it became]: only what was reset (what
    ``evidence.acknowledge`` restarts depends on what was in alarm), so the log never claims
    a reset that did not happen."""
    return {k: [before[k], after[k]] for k in before if before[k] != after[k]}


def rebaseline(*, pair: Pair, user: Any) -> ConfigChange:
    """Reset the pair's evidence (``evidence.acknowledge``, ``tripwire.acknowledge``) and
    record who, when and what in the audit log, all or nothing."""
    with transaction.atomic():
        before = _snapshot(pair)
        evidence.acknowledge(pair=pair, user=user.get_username())
        tripwire.acknowledge(pair)  # each tier collects a new reference window
        reset = _reset(before, _snapshot(pair))
        return ConfigChange.objects.create(
            user=user if getattr(user, "is_authenticated", False) else None,
            username=user.get_username(),
            source=SOURCE,
            action=ACTION,
            model="pair",
            object_id=str(pair.pk),
            object_repr=pair.name,
            diff=reset,
        )


def rebaselines(pair: Pair, since: Any) -> list[ConfigChange]:
    """The pair's re-baselines since ``since``, newest first (for its timeline)."""
    return list(
        ConfigChange.objects.filter(
            model="pair", object_id=str(pair.pk), action=ACTION, at__gte=since
        )
    )
