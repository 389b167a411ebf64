"""evals.stats.drift: z-scores against a frozen baseline, two-sided CUSUM, hysteresis."""

import math

import numpy as np
import pytest

from evals.stats.drift import cusum_track

# Six baseline runs of ±a with a chosen so that the sample sd is 1 and the mean 0: then
# each later value is its own z-score.
A = math.sqrt(5 / 6)
BASELINE = [-A, A] * 3


def track(zs, **kw):
    kw.setdefault("h", 5.0)  # the hand-computed sums below use the textbook h
    return cusum_track(BASELINE + list(zs), baseline_n=6, min_baseline_runs=6, **kw)[6:]


def test_it_calibrates_until_enough_baseline_runs():
    points = cusum_track([1.0, 2.0, 3.0, 4.0, 5.0, 3.0], baseline_n=10, min_baseline_runs=5)
    assert [p.state for p in points] == ["calibrating"] * 5 + ["ok"]
    assert points[0].z is None
    assert points[5].z == pytest.approx(0.0)  # scored against the five runs before it
    with pytest.raises(ValueError):
        cusum_track([1.0], baseline_n=3, min_baseline_runs=5)


def test_it_accumulates_page_cusum_both_ways():
    points = track([2.9, 2.9, -1.0])
    assert [p.z for p in points] == pytest.approx([2.9, 2.9, -1.0])
    assert [p.s_pos for p in points] == pytest.approx([2.4, 4.8, 3.3])
    assert [p.s_neg for p in points] == pytest.approx([0.0, 0.0, 0.5])


def test_it_fires_above_h_and_clears_only_after_two_runs_below_half_h():
    # S+: 2.4, 4.8, 7.2 (fires) then −0.5 a run: 6.7 … 2.7, 2.2 (below h/2 once), then a
    # z of 1 lifts it to 2.7 (the count restarts), then 2.2, 1.7 (twice): clear.
    zs = [2.9, 2.9, 2.9] + [0.0] * 10 + [1.0, 0.0, 0.0]
    points = track(zs)
    assert [p.s_pos for p in points][12:] == pytest.approx([2.2, 2.7, 2.2, 1.7])
    states = [p.state for p in points]
    assert states[:3] == ["ok", "ok", "drift"]
    assert states[3:15] == ["drift"] * 12
    assert states[15] == "ok"
    assert track([-2.9] * 3)[-1].state == "drift"  # downward shifts too


def test_it_caps_the_sums_so_a_long_drift_clears_in_bounded_time():
    zs = [4.0] * 30 + [0.0] * 40
    capped = [p.state for p in track(zs)]
    page = [p.state for p in track(zs, cap_h=None)]
    assert max(p.s_pos for p in track(zs)) == pytest.approx(10.0)
    assert capped[30:].index("ok") <= 16
    assert "ok" not in page[30:]  # Page's sum reached 105: 40 quiet runs are not enough


def test_it_fires_on_a_step_change_not_on_noise():
    noise_alarms = step_alarms = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)
        base = rng.normal(100, 5, 20)
        noise = cusum_track(np.r_[base, rng.normal(100, 5, 20)])[20:]
        step = cusum_track(np.r_[base, rng.normal(115, 5, 20)])[20:]
        noise_alarms += any(p.state == "drift" for p in noise)
        step_alarms += any(p.state == "drift" for p in step)
    assert step_alarms >= 95  # a 3-sd step
    assert noise_alarms <= 30  # measured 19/100 (estimated σ: docs/benchmarks.md)
