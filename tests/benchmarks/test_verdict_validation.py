"""benchmarks/verdict_validation.py on the one verdict engine: ``analyse`` labels resampled
runs with ``evals.stats.labels.judge`` and its docs section counts exactly the labels the
product writes (synthetic pools in ``collect``'s format: no engine needed)."""

import json
import random
from argparse import Namespace

from benchmarks import verdict_validation as vv
from evals.stats.labels import LABEL_WORDS, LABELS

WORDS = {
    "smollm2-f16": ["alpha", "beta", "gamma", "delta"],
    "smollm2-f16-spec": ["alpha", "beta", "gamma", "delta"],
    "smollm2-q8": ["alpha", "beta", "gamma", "delta"],
    "smollm2-q4": ["alpha", "beta", "gamma", "delta", "omega"],
    "gemma-270m": ["red", "green", "blue"],
}


def pools_file(tmp_path):
    rng = random.Random(0)
    keys = [f"case{i:02}" for i in range(25)]
    targets = {t: {"samples": {k: [{"text": " ".join(rng.choice(WORDS[t]) for _ in range(20)),
                                    "t": float(i), "retried": False} for i in range(n)]
                               for k in keys}, "failed": []}
               for t, n in vv.QUOTAS.items()}  # fmt: skip
    run = {"started": "2026-12-01T00:00:00+00:00", "requests": 0, "seconds": 1.0,
           "loadavg_start": [0.0] * 3, "loadavg_end": [0.0] * 3, "quotas": vv.QUOTAS,
           "concurrency": 3, "llama_cpp": "test", "nproc": 2, "counts": {}}  # fmt: skip
    path = tmp_path / "pools.json"
    path.write_text(json.dumps({"prompts": keys, "targets": targets, "runs": [run]}))
    return path


def test_the_analysis_labels_runs_with_judge_and_the_section_counts_its_labels(tmp_path):
    path = pools_file(tmp_path)
    vv.analyse(Namespace(pools=path, resamples=3, seq_resamples=2, B=50, seed=0,
                         timing_repeats=1, write_docs=False))  # fmt: skip
    result = json.loads(path.with_name("results.json").read_text())
    counted = {label for row in result["power"] for label in row["labels"]}
    assert counted <= set(LABELS)
    gemma = vv.cell(result["power"], "gemma vs f16", 250)
    assert gemma["labels"] == {"outputs_differ": 3}
    text = vv.render(result)
    header = next(line for line in text.splitlines() if line.startswith("| comparison | n per"))
    assert (
        header == "| comparison | n per tier | " + " | ".join(LABEL_WORDS[x] for x in LABELS) + " |"
    )
    assert "decide" not in text and "numerics" not in text
