"""evals.stats.ladder: the measured ladder file is read, a missing one falls back to the
placeholder (which no sentence quotes), a malformed one is refused."""

import json

import pytest

from evals.stats.labels import ladder_context
from evals.stats.ladder import PLACEHOLDER_LADDER, load_reference_ladder


def test_it_loads_a_measured_ladder_and_rejects_a_malformed_one(tmp_path):
    measured = {"L": 1000, "suite": "audit", "rungs": [
        {"key": "a_vs_a", "label": "the same model against itself", "mmd2": 0.0},
        {"key": "q4_0", "label": "a 4-bit quantization", "mmd2": 0.002, "p_value": 0.001},
        {"key": "different_model", "label": "a different model", "mmd2": 0.02, "p_value": 0.001},
    ]}  # fmt: skip
    path = tmp_path / "ladder.json"
    path.write_text(json.dumps(measured))
    ladder = load_reference_ladder(path)
    assert ladder == measured
    assert "a 4-bit quantization 0.002" in ladder_context(ladder, suite="audit", L=1000)
    assert load_reference_ladder(tmp_path / "absent.json") is PLACEHOLDER_LADDER
    assert ladder_context(PLACEHOLDER_LADDER, suite="audit", L=1000) == ""
    path.write_text(json.dumps({"L": 1000, "rungs": measured["rungs"][:2]}))
    with pytest.raises(ValueError, match="needs 'L' and a 'different_model' rung"):
        load_reference_ladder(path)
