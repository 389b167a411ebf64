"""A verdict is computed whatever the probe's ``repeat``: with repeat = 1 there are no
base-vs-base temperature-0 pairs (their median is None), which used to crash the wording."""

import pytest

from evals.similarity import compare_pairs
from evals.stats.labels import judge
from tests.evals.synthetic import result


def t0_summaries(repeat: int) -> tuple[dict, dict]:
    """What a probe with ``repeat`` answers per case and tier yields: fast-vs-base pairs for
    every repetition, base-vs-base pairs only between repetitions (none when repeat = 1)."""
    fast = {c: [f"answer {c} v{r}" for r in range(repeat)] for c in range(5)}
    base = {c: [f"answer {c} v0"] * repeat for c in range(5)}
    fb = compare_pairs([(fast[c][r], base[c][r]) for c in fast for r in range(repeat)])
    bb = compare_pairs([(base[c][0], base[c][r]) for c in base for r in range(1, repeat)])
    return fb, bb


@pytest.mark.parametrize("repeat", [1, 2])
def test_it_computes_a_verdict_for_repeat_one_and_two(repeat):
    fb, bb = t0_summaries(repeat)
    assert (bb["median_ratio"] is None) == (repeat == 1)
    v = judge(fast_vs_base=result(0.41, 0.0002), t0_fast_vs_base=fb, t0_base_vs_base=bb)
    assert v.label == "no_detectable_difference"
    t0 = next(r for r in v.reasons if r.startswith("temperature 0"))
    if repeat == 1:
        assert "no base-vs-base pairs to compare with" in t0
    else:
        assert "base-vs-base 1.000" in t0
