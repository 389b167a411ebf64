"""evals.stats.cusum: a frozen baseline, online one-sided CUSUM, thresholds from the ARL."""

import math

import numpy as np
import pytest

from evals.stats.cusum import (
    Baseline,
    CusumState,
    SeriesSpec,
    h_for_arl,
    reset,
    siegmund_arl,
    start,
    update,
)

SPECS = (SeriesSpec("ttft", "log", 1), SeriesSpec("mmd_p", "p_normal", 1))


def runs(rng, n, phi=0.0, median=100.0):
    out, x = [], 0.0
    for _ in range(n):
        x = phi * x + rng.normal() * math.sqrt(1 - phi * phi)
        out.append({"ttft": median * math.exp(0.2 * x), "mmd_p": float(rng.uniform(0.001, 1))})
    return out


def test_h_matches_siegmunds_arl_and_grows_with_an_estimated_baseline():
    h = h_for_arl(465)
    assert siegmund_arl(h) == pytest.approx(465, rel=1e-6)
    assert 4.0 < h < 5.5  # the textbook h ≈ 5 for ARL0 ≈ 465 at k = 0.5
    assert h_for_arl(465, n_baseline=48) > h_for_arl(465, n_baseline=500) > h


def test_it_simulates_in_control_at_the_target_run_length():
    """Known-parameter CUSUM on N(0, 1): the simulated ARL is near Siegmund's value."""
    rng = np.random.default_rng(1)
    h = h_for_arl(200)
    s, lengths, t = np.zeros(4000), [], np.zeros(4000, dtype=int)
    alive = np.ones(4000, dtype=bool)
    while alive.any():
        s = np.where(alive, np.maximum(0, s + rng.standard_normal(4000) - 0.5), s)
        t += alive
        hit = alive & (s > h)
        lengths.extend(t[hit].tolist())
        alive &= ~hit
    assert np.mean(lengths) == pytest.approx(200, rel=0.1)


def test_the_baseline_is_robust_frozen_and_round_trips():
    rng = np.random.default_rng(2)
    base_runs = runs(rng, 60, phi=0.5)
    base_runs[3]["ttft"] = 1e6  # one wild run does not move a median/MAD baseline
    b = Baseline.from_runs(SPECS, base_runs, arl_pair=4320, run_ids=range(60), set_by="ana")
    ttft = b.series[0]
    assert ttft.center == pytest.approx(math.log(100), abs=0.15)
    assert ttft.phi > 0.2 and ttft.lrv > 1.3  # AR(1): long-run variance above the variance
    assert b.series[1].center == 0.0 and b.series[1].scale == 1.0  # p's null is known
    assert Baseline.from_json(b.to_json()) == b
    with pytest.raises(ValueError, match="ttft: 10 baseline runs with a value, need 48"):
        Baseline.from_runs(SPECS, base_runs[:10], arl_pair=100)


def test_it_alarms_once_on_a_shift_and_stays_alarmed_until_reset():
    rng = np.random.default_rng(3)
    b = Baseline.from_runs(SPECS, runs(rng, 100), arl_pair=4320)
    state = start(b)
    for r in runs(rng, 50):
        state, a = update(state, b, r)
    assert not a.alarm
    fired = []
    for i, r in enumerate(runs(rng, 30, median=200.0)):  # TTFT doubles
        state, a = update(state, b, r)
        fired += [i] if a.new_alarm else []
    assert len(fired) == 1 and fired[0] < 10 and state.alarm_series == "ttft"
    assert a.alarm and CusumState.from_json(state.to_json()) == state
    assert reset(b).sums == (0.0, 0.0) and not reset(b).alarmed


def test_a_missing_value_keeps_its_sum_and_a_daily_cycle_needs_the_hour():
    rng = np.random.default_rng(4)
    hourly = runs(rng, 96)
    for t, r in enumerate(hourly):
        r["ttft"] *= math.exp(0.3 * math.sin(2 * math.pi * (t % 24) / 24))
    b = Baseline.from_runs(SPECS, hourly, arl_pair=4320, hours=[t % 24 for t in range(96)])
    assert b.series[0].hour_offsets[6] == pytest.approx(0.3, abs=0.1)
    state, a = update(start(b), b, {"ttft": None, "mmd_p": 0.5}, hour=1)
    assert a.z["ttft"] is None and state.sums[0] == 0.0
    with pytest.raises(ValueError, match="hour of day"):
        update(state, b, {"ttft": 100.0})
