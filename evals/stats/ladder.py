"""The reference ladder: MMD² distances measured on real engines, shown as context only.

``manage.py measure_ladder`` measures, on the local llama.cpp vendor, the base tier against
an independent batch of itself (A-vs-A), the same weights in Q8_0 and Q4_0, and a different
model, and writes them to ``reference_ladder.json`` beside this module. The verdict
(:func:`evals.stats.labels.judge`) never reads a cause off the ladder (the size of MMD²
depends on output length, entropy and the prompts); it quotes the rungs beside a run measured
on the same suite and L (:func:`evals.stats.labels.ladder_context`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LADDER_PATH = Path(__file__).with_name("reference_ladder.json")
DIFFERENT_MODEL_RUNG = "different_model"  # a rung key of the ladder file, not a verdict label

# PLACEHOLDER rungs, NOT measurements: orders of magnitude guessed for L = 1000 at
# temperature 1, used until a measured ladder file exists. ``placeholder`` keeps them out of
# every sentence (ladder_context returns "" for them).
PLACEHOLDER_LADDER: dict[str, Any] = {
    "placeholder": True,
    "note": "placeholder values, not measured yet",
    "L": 1000,
    "rungs": [
        {"key": "a_vs_a", "label": "the same model against itself", "mmd2": 0.0},
        {"key": "q8_0", "label": "an 8-bit quantization of the same model", "mmd2": 0.001},
        {"key": "q4_0", "label": "a 4-bit quantization of the same model", "mmd2": 0.005},
        {"key": DIFFERENT_MODEL_RUNG, "label": "a different model", "mmd2": 0.05},
    ],
}


def load_reference_ladder(path: Path = LADDER_PATH) -> dict[str, Any]:
    """The measured ladder when its JSON file exists, else ``PLACEHOLDER_LADDER``.

    A file without ``L`` or without the different-model rung is refused: the rungs are only
    comparable at the L they were measured at, and the different model is the far end that
    gives the others their scale.
    """
    if not path.exists():
        return PLACEHOLDER_LADDER
    ladder: dict[str, Any] = json.loads(path.read_text())
    keys = [r["key"] for r in ladder["rungs"]]
    if DIFFERENT_MODEL_RUNG not in keys or "L" not in ladder:
        raise ValueError(f"{path}: needs 'L' and a '{DIFFERENT_MODEL_RUNG}' rung")
    return ladder


REFERENCE_LADDER = load_reference_ladder()
