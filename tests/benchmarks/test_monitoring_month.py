"""benchmarks/monitoring_month.py: its monitor is the product's, and the pool replay reads
``verdict_validation.py collect``'s file format."""

import json
import random
from argparse import Namespace

import numpy as np

from benchmarks import monitoring_month as mm
from evals.stats import cusum, error_budget


def test_the_monitor_freezes_the_product_s_baseline_and_threshold():
    m = mm.Monitor()
    probes = mm.probe_values(np.random.default_rng(3), None, 1.0)
    for t in range(error_budget.MIN_BASELINE_RUNS):
        assert not m.probe(probes[t], hour=t % 24)
    assert m.threshold == error_budget.audit_threshold(3600) == 2160 / 0.1
    assert [s.name for s in m.baseline.series] == [s.name for s in error_budget.SERIES]
    arl = error_budget.probe_arl(3600)
    assert m.baseline.h == cusum.h_for_arl(2 * arl, n_baseline=48, batches=True)


def test_an_alarm_before_the_switch_is_acknowledged_and_restarts_the_baseline():
    p = np.full(mm.HOURS, 0.5)
    p[10:16] = 1 / 1001  # near-zero audits (floored at 0.01): the 4th reaches 21,600
    out = mm.one_month(p, None)
    assert out == {"verdict": [13], "drift": [], "h": []}


def pools_file(tmp_path, per_prompt: dict[str, int]) -> str:
    """A small pools file in ``collect``'s format: 4 prompts; q4 rewrites a few words of the
    base's texts, gemma writes other words."""
    rng = random.Random(0)
    words = {
        "smollm2-f16": ["alpha", "beta", "gamma", "delta"],
        "smollm2-q4": ["alpha", "beta", "gamma", "delta", "omega"],
        "gemma-270m": ["red", "green", "blue"],
    }
    keys = [f"case{i}" for i in range(4)]
    targets = {t: {"samples": {k: [{"text": " ".join(rng.choice(words[t]) for _ in range(30)),
                                    "t": 0.0, "retried": False} for _ in range(n)]
                               for k in keys}, "failed": []}
               for t, n in per_prompt.items()}  # fmt: skip
    path = tmp_path / "pools.json"
    path.write_text(json.dumps({"prompts": keys, "targets": targets, "runs": []}))
    return path


def test_the_pool_replay_reports_false_alarms_and_time_to_detection(tmp_path):
    path = pools_file(tmp_path, {"smollm2-f16": 30, "smollm2-q4": 14, "gemma-270m": 10})
    text = mm.replayed(Namespace(pools=path, months=2, bank=8, target=None, default_pools=False))
    assert text.startswith(mm.POOLS_SECTION)
    assert "| verdict (e-detector) | 0 | 0.000 [0.000, 1.844] |" in text
    gemma = next(line for line in text.splitlines() if line.startswith("| f16 → gemma-270m"))
    assert "| 4 h | 4 h | 0 of 2 |" in gemma  # p = 1/1001 each hour: the 4th reaches c
    assert "f16 → smollm2-q4 (q4; goal ≤ 24 h)" in text


def test_the_replay_takes_other_target_names_and_skips_missing_ones(tmp_path):
    path = pools_file(tmp_path, {"smollm2-f16": 30, "gemma-270m": 10})
    text = mm.replayed(
        Namespace(
            pools=path,
            months=1,
            bank=4,
            default_pools=False,
            target=["different model=gemma-270m", "q4=absent"],
        )
    )
    assert "f16 → gemma-270m" in text and "q4" not in text.split("### Time")[1]
