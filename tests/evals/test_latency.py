"""evals.latency: percentiles with a minimum n, availability, goodput, tier summaries."""

from types import SimpleNamespace

import pytest

from evals.latency import (
    MIN_N,
    availability,
    goodput,
    min_n_for,
    percentiles,
    summarise_tier,
)
from evals.records import TimingRecord


def test_it_interpolates_percentiles_linearly():
    out = percentiles(list(range(1, 301)), per_quantile=True)
    assert out["n"] == 300 and out["too_small"] is False
    # type 7: position (n − 1)·q = 299·0.9 = 269.1 → 270 + 0.1·(271 − 270)
    assert out["p50"] == pytest.approx(150.5)
    assert out["p90"] == pytest.approx(270.1)
    assert out["p99"] == pytest.approx(297.01)


def test_each_percentile_has_its_own_minimum_n():
    assert [min_n_for(q) for q in (50, 90, 95, 99)] == [6, 29, 59, 299]
    # at that n, [min, max] covers the quantile with ≥ 95%; one fewer and it cannot
    for q in (0.5, 0.95, 0.99):
        n = min_n_for(q)
        assert 1 - q**n - (1 - q) ** n >= 0.95 > 1 - q ** (n - 1) - (1 - q) ** (n - 1)
    out = percentiles(list(range(60)), per_quantile=True)
    assert out["p50"] is not None and out["p95"] is not None and out["p99"] is None
    assert percentiles(list(range(10)))["p99"] is not None  # off by default (the pages)


def test_it_withholds_percentiles_below_min_n():
    out = percentiles([10.0] * (MIN_N - 1))
    assert out == {
        "n": MIN_N - 1,
        "too_small": True,
        "p50": None,
        "p90": None,
        "p95": None,
        "p99": None,
    }


def test_it_skips_missing_values_when_counting_n():
    out = percentiles([None, 1.0, float("nan"), 2.0, 3.0, 4.0, 5.0], qs=(50,))
    assert out == {"n": 5, "too_small": False, "p50": 3.0}


def test_it_counts_rate_limits_apart_in_availability():
    out = availability(n_ok=80, n_total=100, n_rate_limited=10)
    assert out["availability"] == 0.8
    assert out["rate_limited_share"] == 0.1
    assert out["availability_excl_rate_limited"] == pytest.approx(80 / 90)
    assert availability(0, 0, 0)["availability"] is None


def test_it_counts_errors_and_missing_values_against_goodput():
    slo = {"ttft_ms": 500, "e2e_ms": 2000}
    records = [
        {"ok": True, "ttft_ms": 100, "e2e_ms": 1000},  # meets both
        {"ok": True, "ttft_ms": 600, "e2e_ms": 1000},  # TTFT too slow
        {"ok": True, "ttft_ms": 100, "e2e_ms": None},  # cannot be shown to meet E2E
        {"ok": False, "ttft_ms": None, "e2e_ms": None},  # error: in the denominator
    ]
    assert goodput(records, slo) == 0.25
    assert goodput([], slo) is None


def test_it_summarises_a_tier_from_records_and_dicts():
    ok = [
        TimingRecord(
            ok=True,
            ttft_ms=100.0 + i,
            e2e_ms=1000.0 + i,
            tpot_ms=10.0,
            completion_tokens=100,
            estimated_tokens=100 if i else 120,
        )
        for i in range(6)
    ]
    failed = [
        {"ok": False, "error_class": "rate_limited"},
        {"ok": False, "error_class": "timeout"},
        SimpleNamespace(ok=False, error_class="rate_limited", ttft_ms=None),
    ]
    out = summarise_tier(ok + failed)
    assert (out["n"], out["n_ok"], out["rate_limited"]) == (9, 6, 2)
    assert out["errors"] == {"rate_limited": 2, "timeout": 1}
    assert out["ttft_ms"]["n"] == 6 and out["ttft_ms"]["p50"] == pytest.approx(102.5)
    assert out["decode_tok_s_p50"] == pytest.approx(100.0)
    assert out["token_count_flags"] == 1  # 120 vs 100 is a 20% difference
    assert out["availability"] == pytest.approx(6 / 9)


def test_a_trailing_window_of_sketches_stops_at_the_n_it_needs_or_its_longest():
    """``sketch.trailing``: each run merged with those before it until ``need`` values, never
    more than ``max_runs`` sketches (the pair charts' P95 over runs)."""
    from evals import sketch as sk

    runs = [sk.sketch([float(10 * i + j) for j in range(20)]) for i in range(1, 6)]
    windows = sk.trailing(runs, need=59, max_runs=3)
    assert [(sk.count(m), used) for m, used in windows] == [
        (20, 1),
        (40, 2),
        (60, 3),
        (60, 3),
        (60, 3),
    ]
    assert [used for _, used in sk.trailing(runs, need=59, max_runs=2)] == [1, 2, 2, 2, 2]
    assert sk.trailing([None, {}], need=1, max_runs=5) == [({}, 1), ({}, 2)]
