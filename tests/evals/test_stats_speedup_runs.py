"""evals.stats.speedup_runs: cluster bootstrap over runs, failures as slow, claim status."""

import numpy as np
import pytest

from evals.stats.speedup import RatioCI
from evals.stats.speedup_runs import _resampled_ratios, assess_claim, cluster_ratio_ci


def probes(seed, runs=5, per=8, ratio=1.5, load=0.5):
    rng = np.random.default_rng(seed)
    base, fast, ids = [], [], []
    for r in range(runs):
        shared = np.exp(rng.normal(0, load))
        base += (100 * shared * np.exp(rng.normal(0, 0.2, per))).tolist()
        fast += (100 / ratio * shared * np.exp(rng.normal(0, 0.2, per))).tolist()
        ids += [r] * per
    return base, fast, ids


def test_it_withholds_the_interval_below_20_pairs():
    b, f, ids = probes(0, runs=1, per=19)
    ci = cluster_ratio_ci(b, f, ids)
    assert ci.estimate is not None and ci.low is None
    assert ci.note == "n too small: 19 pairs, need 20"


def test_it_resamples_whole_runs_when_pairs_come_from_several():
    b, f, ids = probes(1)
    by_run = cluster_ratio_ci(b, f, ids, n_resamples=1000)
    assert by_run.method == "cluster bootstrap over runs"
    assert by_run.low <= 1.5 <= by_run.high
    few = cluster_ratio_ci(b, f, [i // 20 for i in range(len(b))], n_resamples=1000)
    assert few.method == "bootstrap over pairs"  # 2 runs: too few clusters to resample


def test_failed_probes_count_as_slowest_not_dropped():
    b, f, _ = probes(2, runs=1, per=40, load=0.0)
    order = np.argsort(f)
    timed_out = list(f)
    for i in order[-6:]:  # the slowest 15% of fast probes time out
        timed_out[i] = None
    kept = cluster_ratio_ci(b, timed_out)
    dropped = np.median(b) / np.median([x for x in timed_out if x is not None])
    assert kept.estimate == pytest.approx(np.median(b) / np.median(f), rel=0.1)
    assert dropped > kept.estimate  # dropping them flatters the fast tier
    assert kept.note == "6 failed probes counted as slowest"


def test_rates_treat_a_failure_as_zero_and_more_than_half_failed_gives_no_ratio():
    ci = cluster_ratio_ci([10.0] * 20, [20.0] * 9 + [None] * 11, kind="rate")
    assert ci.estimate is None and ci.note == "half or more of a tier failed"


@pytest.mark.parametrize(
    ("low", "high", "status"),
    [(6.1, 7.0, "confirmed"), (4.0, 5.9, "contradicted"), (1.9, 18.6, "not contradicted")],
)
def test_claims_are_confirmed_only_when_the_lower_bound_reaches_them(low, high, status):
    a = assess_claim(RatioCI(5.0, low, high, 40, "cluster bootstrap over runs"), 6)
    assert a.status == status and a.line.startswith(f"claimed 6x: {status} (5.0x")
    assert assess_claim(RatioCI(5.0, None, None, 5, "none", note="n too small"), 6).status == (
        "cannot tell"
    )


def _resampled_by_concatenation(b, f, member, clusters, kind, n_resamples, seed):
    """The bootstrap written out: each resample's drawn clusters concatenated, np.median."""
    rng = np.random.default_rng(seed)
    groups = [np.flatnonzero(member == g) for g in range(clusters)]
    out = []
    for _ in range(n_resamples):
        idx = np.concatenate([groups[i] for i in rng.integers(0, clusters, clusters)])
        mb, mf = np.median(b[idx]), np.median(f[idx])
        ok = np.isfinite(mb) and np.isfinite(mf) and mb > 0 and mf > 0
        out.append((mb / mf if kind == "duration" else mf / mb) if ok else np.nan)
    return np.array(out)


@pytest.mark.parametrize("kind", ["duration", "rate"])
@pytest.mark.parametrize("clusters", [1, 3, 7, 40])
def test_the_vectorised_resamples_equal_concatenated_clusters_draw_for_draw(kind, clusters):
    rng = np.random.default_rng(clusters)
    n = 40
    b = np.round(np.exp(rng.normal(5, 0.4, n)), -1)  # rounded: ties between values
    f = np.exp(rng.normal(4.6, 0.4, n))
    f[rng.random(n) < 0.2] = np.inf if kind == "duration" else 0.0  # failures, censored
    member = rng.integers(0, clusters, n)
    member[:clusters] = np.arange(clusters)  # every cluster has a pair
    got = _resampled_ratios(b, f, member, clusters, kind, 300, seed=11)
    want = _resampled_by_concatenation(b, f, member, clusters, kind, 300, seed=11)
    np.testing.assert_array_equal(got, want)
