"""One tier's border-input tripwire folded run by run (``evals.stats.border``;
docs/measures.md "Border-input tripwires").

The tier's block in ``TripwireState.tiers`` gets ``mode: "border"`` and a ``border`` block: the
kept inputs and their reference distributions from discovery. The next
``run_conformal.reference_runs(every_s)`` runs' answers are kept, run by run, as the
reference runs (a week of daily runs, a day of hourly ones); every later run is tested
against them with the run as the exchangeable unit (``evals.stats.border.run_test``: a real
vendor's border answers move from day to day, which a per-request test read as change) and
its e-value goes into the tier's *one* tripwire e-detector, the same detector and threshold
as the logprob tripwire (``monitor.derived.tripwire.fold``), so a tier has one tripwire
budget whichever kind of evidence its endpoint allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evals.stats import border as stats
from evals.stats import run_conformal


def tier_after(
    block: dict[str, Any], result: Mapping[str, Any], run_id: int, seed: int, every_s: float
) -> dict[str, Any]:
    """The tier's block after one border run: ``result`` is ``{"discovered": border block}``
    or ``{"current": {input: {token: count}}}``."""
    from monitor.derived.tripwire import fold  # tripwire folds both kinds into one detector

    block = {**block, "mode": "border"}
    block.pop("skipped", None)
    if "discovered" in result:
        found = dict(result["discovered"])
        block["border"] = {**found, "run": run_id}
        block["reference_windows"] = []
        block["last"] = {"run": run_id, "discovered": len(found["inputs"]), "kind": "border"}
        return block
    current = {p: dict(c) for p, c in result["current"].items()}
    runs = list(block.get("reference_windows") or [])
    need = run_conformal.reference_runs(every_s)
    if len(runs) < need:
        runs.append(current)
        block["reference_windows"], block["reference_runs"] = runs, len(runs)
        block["reference_of"] = need
        block["last"] = {"run": run_id, "collecting": True, "kind": "border"}
        block["current"] = current
        return block
    test = stats.run_test(runs, current, seed=seed)
    block, last = fold(block, test, run_id, every_s)
    block["last"] = {**last, "kind": "border", "inputs": len(current)}
    block["current"] = current
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
