"""The verdict of an audit run, with the temperature-0 and unit-test evidence beside it.

An audit run holds temperature-1 samples of three independent batches: fast, base and base
again. ``compute_verdict`` hands their texts to ``evals.stats.verdict.assess`` (fast against
base with the MMD test, calibrated by base against base and fast against fast), with the
temperature-0 diagnostics and the unit-test evidence of the pair's latest probe runs. The
result is stored as the run summary's ``verdict`` block (JSON, reduced for plotting:
histograms, never thousands of floats) and the sentence in ``Run.verdict``, so pages never
recompute it.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.utils import timezone

from evals.comparable import comparable_pairs
from evals.logprobs import logprob_gap
from evals.similarity import compare_pairs, first_divergence
from evals.stats.capability import paired_table, pass_at_k
from evals.stats.mmd import MMDResult
from evals.stats.sequential import sequential_test
from evals.stats.verdict import REFERENCE_LADDER, TierCounts, assess
from monitor.models import Pair, Run, Sample

ALPHA = 0.05
NULL_BINS = 40
MAX_DIVERGENCE_ROWS = 200
RECENT_PROBES = 20  # how far back to look for a probe run with unit tests
LABEL_WORDS = {
    "no_detectable_difference": "no detectable difference",
    "numerics_scale_difference": "numerics-scale difference",
    "different_model": "different model",
    "inconclusive": "inconclusive",
}


# --- the verdict ------------------------------------------------------------------------------


def compute_verdict(*, run_id: int) -> dict[str, Any]:
    """Compute, store and return the verdict of a finished audit run (see module docstring)."""
    run = Run.objects.select_related("pair__fast", "pair__base").get(id=run_id)
    samples = list(
        run.samples.select_related("case").only(
            "tier", "batch", "repetition", "seq", "ok", "text", "case__key"
        ).order_by("seq")
    )
    groups = _audit_groups(samples)
    t0 = temperature0_diagnostics(pair=run.pair)
    capability = capability_evidence(pair=run.pair)
    tests = assess(
        groups[("fast", 0)], groups[("base", 0)], groups[("base", 1)],
        seed=run.seed,
        alpha=ALPHA,
        t0_fast_vs_base=(t0 or {}).get("fast_vs_base_full"),
        t0_base_vs_base=(t0 or {}).get("base_vs_base_full"),
        capability=capability["table"] if capability else None,
        tiers=_tier_counts(samples),
    )
    fvb, bvb, fvf, verdict = (tests.fast_vs_base, tests.base_vs_base, tests.fast_vs_fast,
                              tests.verdict)
    result = {
        **dataclasses.asdict(verdict),
        "label_words": LABEL_WORDS[verdict.label],
        "alpha": ALPHA,
        "run_id": run.id,
        "computed_at": timezone.now().isoformat(),
        "simulated": run.pair.simulated,
        "mmd": {
            "fast_vs_base": _mmd_block(fvb),
            "base_vs_base": _mmd_block(bvb) if bvb else None,
            "fast_vs_fast": _mmd_block(fvf) if fvf else None,
        },
        "sequential": _sequential(samples),
        "t0": _public_t0(t0),
        "capability": _public_capability(capability),
        "ladder": {k: REFERENCE_LADDER.get(k) for k in ("placeholder", "note", "L", "rungs")},
    }
    Run.objects.merge_summary(run.id, verdict=result)
    Run.objects.filter(id=run.id).update(verdict=verdict.sentence)
    return result


def _audit_groups(samples: Sequence[Sample]) -> dict[tuple[str, int], dict[str, list[str]]]:
    """(tier, batch) → case key → ok texts in repetition order."""
    rows: dict[tuple[str, int], dict[str, list[tuple[int, str]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for s in samples:
        if s.ok:
            rows[(s.tier, s.batch)][s.case.key].append((s.repetition, s.text))
    return defaultdict(dict, {
        group: {key: [t for _, t in sorted(items)] for key, items in by_case.items()}
        for group, by_case in rows.items()
    })  # fmt: skip


def _tier_counts(samples: Sequence[Sample]) -> dict[str, TierCounts]:
    out = {}
    for tier in ("fast", "base"):
        mine = [s for s in samples if s.tier == tier]
        out[tier] = TierCounts(
            requests=len(mine),
            failed=sum(1 for s in mine if not s.ok),
            empty=sum(1 for s in mine if s.ok and not s.text.strip()),
        )
    return out


def null_histogram(null: np.ndarray, bins: int = NULL_BINS) -> dict[str, list[float]]:
    """The permutation null reduced to histogram bins (edges has one more entry than counts)."""
    if null.size == 0:
        return {"edges": [], "counts": []}
    counts, edges = np.histogram(null, bins=bins)
    return {"edges": edges.tolist(), "counts": counts.tolist()}


def _mmd_block(result: MMDResult) -> dict[str, Any]:
    return {**result.to_dict(), "null_hist": null_histogram(result.null_stats),
            "critical_value": result.critical_value(ALPHA)}


def _sequential(samples: Sequence[Sample]) -> dict[str, Any] | None:
    """What the anytime-valid betting test would have concluded on the same samples, fed in
    the order they were sent: how many fast/base pairs it needed to stop (if it stopped)."""
    texts: dict[tuple[str, str, int], tuple[int, str]] = {}
    for s in samples:
        if s.ok and s.batch == 0:
            texts[(s.tier, s.case.key, s.repetition)] = (s.seq, s.text)
    pairs = []
    for (tier, key, rep), (seq, text) in texts.items():
        other = texts.get(("base", key, rep)) if tier == "fast" else None
        if other is not None:
            pairs.append((max(seq, other[0]), key, text, other[1]))
    if not pairs:
        return None
    pairs.sort()
    result = sequential_test(((k, [a], [b]) for _, k, a, b in pairs), alpha=ALPHA)
    return {"rejected": result.rejected, "stopped_at_pair": result.stopped_at_pair,
            "n_pairs": len(pairs), "final_wealth": float(result.wealth[-1]) if
            result.wealth.size else 1.0}


# --- temperature-0 diagnostics ----------------------------------------------------------------


def latest_probe(pair: Pair) -> Run | None:
    """The pair's newest finished probe at its own concurrency (load probes left out)."""
    return Run.objects.trend().filter(pair=pair).order_by("-created_at", "-id").first()


def temperature0_diagnostics(*, pair: Pair, run: Run | None = None) -> dict[str, Any] | None:
    """Fast-vs-base beside base-vs-base text pairs of a probe run (the latest by default):
    Indel ratios, first divergences, and the logprob gap at the first divergence when the
    samples carry logprobs. None when there is no probe run with paired texts."""
    run = run or latest_probe(pair)
    if run is None:
        return None
    samples = list(
        run.samples.filter(ok=True).select_related("case")
        .only("id", "tier", "batch", "repetition", "ok", "text", "logprobs", "case__key",
              "case__messages")
    )
    pairs = comparable_pairs(samples, group=lambda s: s.case.key,
                             messages=lambda s: s.case.messages)
    fvb = [(f.case.key, f.repetition, f, b) for f, b in pairs["fast_vs_base"]]
    bvb = [(a.case.key, a.repetition, a, b) for a, b in pairs["base_vs_base"]]
    if not fvb:
        return None
    full_fvb = compare_pairs([(f.text, b.text) for _, _, f, b in fvb])
    full_bvb = compare_pairs([(a.text, b.text) for _, _, a, b in bvb])
    rows = []
    for (key, rep, fast, base), ratio in zip(fvb, full_fvb["ratios"], strict=True):
        pos = first_divergence(base.text, fast.text)
        rows.append({
            "case": key, "repetition": rep, "ratio": ratio, "first_divergence": pos,
            "base_sample": base.id, "fast_sample": fast.id,
            "logprobs": logprob_gap(base.logprobs, fast.logprobs, pos) if pos is not None
            else None,
        })
    rows.sort(key=lambda r: (r["first_divergence"] is None, r["first_divergence"] or 0))
    return {"run_id": run.id, "fast_vs_base_full": full_fvb, "base_vs_base_full": full_bvb,
            "divergences": rows[:MAX_DIVERGENCE_ROWS]}


def _public_t0(t0: dict[str, Any] | None) -> dict[str, Any] | None:
    if t0 is None:
        return None
    return {
        "run_id": t0["run_id"],
        "fast_vs_base": t0["fast_vs_base_full"],
        "base_vs_base": t0["base_vs_base_full"],
        "divergences": t0["divergences"],
    }


# --- capability -------------------------------------------------------------------------------


def capability_evidence(*, pair: Pair) -> dict[str, Any] | None:
    """Unit-test evidence from the pair's latest probe run with tested cases.

    McNemar needs one pass/fail per case and tier: a case passes on a tier when at least half
    of its samples there passed (pass@1 ≥ 0.5). pass@1 per tier is the mean over cases of
    the unbiased per-case estimate (Chen et al. 2021; with k = 1 it is c / n).
    """
    runs = Run.objects.trend().filter(pair=pair).order_by("-created_at", "-id")
    run = next((r for r in runs.only("id", "summary")[:RECENT_PROBES]
                if r.summary_obj.tier("fast").n_tested), None)
    if run is None:
        return None
    counts: dict[str, dict[str, list[int]]] = {"fast": {}, "base": {}}
    difficulty: dict[str, str] = {}
    rows = (Sample.objects.filter(run=run, tests_passed__isnull=False)
            .values_list("tier", "case__key", "case__difficulty", "tests_passed"))
    for tier, key, diff, passed in rows:
        n_c = counts[tier].setdefault(key, [0, 0])
        n_c[0] += 1
        n_c[1] += int(passed)
        difficulty[key] = diff
    rate = {t: {k: pass_at_k(n, c, 1) for k, (n, c) in counts[t].items()} for t in counts}
    table = paired_table({k: v >= 0.5 for k, v in rate["fast"].items()},
                         {k: v >= 0.5 for k, v in rate["base"].items()})
    pass1: dict[str, dict[str, float | None]] = {}
    for tier in ("fast", "base"):
        groups: dict[str, list[float]] = defaultdict(list)
        for key, value in rate[tier].items():
            groups["all"].append(value)
            groups[difficulty[key]].append(value)
        pass1[tier] = {g: float(np.mean(v)) for g, v in sorted(groups.items())}
    cases = [
        {"case": key, "difficulty": difficulty[key],
         "fast": counts["fast"].get(key), "base": counts["base"].get(key)}
        for key in sorted(difficulty)
    ]
    return {"run_id": run.id, "table": table, "pass_at_1": pass1, "cases": cases}


def _public_capability(cap: dict[str, Any] | None) -> dict[str, Any] | None:
    if cap is None:
        return None
    return {**{k: v for k, v in cap.items() if k != "table"},
            "table": dataclasses.asdict(cap["table"])}


