"""Acknowledge a change and re-baseline, leaving a trace: the one call every path makes.

A re-baseline throws evidence away (the audits' e-process, the probes' CUSUM sums and the
capability loss detectors restart, the active drift baseline is retired, the logprob
tripwires collect new references). A dispute later ("why did the alarm stop?") needs who did
it, when, and what was reset, so the reset is written to the audit log (``ConfigChange``,
action ``reset``, shown at /audit/) in the same transaction, and the pair's timeline reads it
from there (``monitor.web.timeline``).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from monitor.derived import evidence, tripwire
from monitor.models import Baseline, ConfigChange, Pair, PairMonitorState, TripwireState

ACTION = "reset"
SOURCE = "acknowledge & re-baseline"


def _described(pair: Pair) -> dict[str, list[Any]]:
    """What the reset throws away, field → [as it was, as it becomes], in words and names."""
    row = PairMonitorState.objects.filter(pair=pair).first()
    e = (row.eprocess if row else None) or {}
    wires = TripwireState.objects.filter(pair=pair).first()
    baselines = [
        f"#{b.pk} from {len(b.run_ids)} probe runs, set by {b.set_by} {b.set_at:%Y-%m-%d %H:%M} UTC"
        for b in Baseline.objects.filter(pair=pair, active=True)
    ]
    return {
        "e-process": [
            f"e = {e.get('evalue', 1.0):.3g} over {e.get('audits', 0)} audits"
            + (" (alarmed)" if e.get("alarmed") else ""),
            "e = 1, no audits",
        ],
        "CUSUM": [sorted((row.cusum if row else None) or {}), []],
        "capability detectors": [sorted((row.capability if row else None) or {}), []],
        "baseline": [baselines or ["none active"], ["a new one from the next probe runs"]],
        "tripwires": [sorted((wires.tiers if wires else None) or {}), []],
    }


def rebaseline(*, pair: Pair, user: Any) -> ConfigChange:
    """Reset the pair's evidence (``evidence.acknowledge``, ``tripwire.acknowledge``) and
    record who, when and what in the audit log, all or nothing."""
    with transaction.atomic():
        reset = _described(pair)
        evidence.acknowledge(pair=pair, user=user.get_username())
        tripwire.acknowledge(pair)  # each tier collects a new reference window
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
