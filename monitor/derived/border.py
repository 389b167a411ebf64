"""One tier's border-input tripwire folded run by run (``evals.stats.border``;
docs/measures.md "Border-input tripwires").

The tier's block in ``TripwireState.tiers`` gets ``mode: "border"`` and a ``border`` block: the
kept inputs and their reference distributions from discovery. Every later run's answer
distributions are tested against that reference and the run's p becomes an e-value in the
tier's *one* tripwire e-detector, the same detector, calibrator and threshold as the logprob
tripwire, so
a tier has one tripwire budget whichever kind of evidence its endpoint allows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evals.stats import border as stats
from evals.stats import eprocess


def tier_after(
    block: dict[str, Any], result: Mapping[str, Any], run_id: int, seed: int, threshold: float
) -> dict[str, Any]:
    """The tier's block after one border run: ``result`` is ``{"discovered": border block}``
    or ``{"current": {input: {token: count}}}``."""
    block = {**block, "mode": "border"}
    block.pop("skipped", None)
    if "discovered" in result:
        found = dict(result["discovered"])
        block["border"] = {**found, "run": run_id}
        block["last"] = {"run": run_id, "discovered": len(found["inputs"]), "kind": "border"}
        return block
    reference = block["border"]["reference"]
    test = stats.window_test(reference, result["current"], seed=seed)
    state = eprocess.EProcessState(**block["eprocess"]) if block.get("eprocess") else None
    state, decision = eprocess.update(
        state or eprocess.EProcessState(),
        eprocess.AuditEvidence(p_value=test.p_value, run_id=run_id, calibrator=eprocess.TRIPWIRE),
        threshold=threshold,
    )
    block["eprocess"] = json.loads(state.to_json())
    block["last"] = {
        "run": run_id,
        "kind": "border",
        "statistic": test.statistic,
        "p": test.p_value,
        "e": decision.e_value,
        "detector": decision.detector,
        "threshold": decision.threshold,
        "new_alarm": decision.new_alarm,
        "inputs": test.n_inputs,
    }
    block["current"] = {p: dict(c) for p, c in result["current"].items()}
    return block


def cross(tiers: Mapping[str, Any]) -> dict[str, Any] | None:
    """Fast against base on the border inputs both kept: their newest runs' distance, and the
    same distance between their references as its floor (None until both have run)."""
    blocks = [tiers.get(t, {}) for t in ("fast", "base")]
    if not all(b.get("current") and b.get("border", {}).get("reference") for b in blocks):
        return None
    return {
        "kind": "border",
        "distance": stats.cross_distance(blocks[0]["current"], blocks[1]["current"]),
        "floor": stats.cross_distance(
            blocks[0]["border"]["reference"], blocks[1]["border"]["reference"]
        ),
    }
