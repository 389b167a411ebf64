"""The verdict of an audit run, with the temperature-0 and unit-test evidence beside it.

An audit run holds temperature-1 samples of fast and base, one batch each
(``evals.plan.AUDIT_TIERS``: an in-plan second base batch is exchangeable with the first by
construction, so it could detect nothing). ``compute_verdict`` tests fast against base
(``evals.stats.mmd.mmd_test``, texts normalised, empties apart) and labels the run with
``evals.stats.labels.judge``: outputs differ / no detectable difference (with the MMD² an
80%-powered run would catch) / capability difference / inconclusive (why). Unit-test results
count only when they come from this run's own samples; an earlier probe's are context
(``capability_from_run=False``): counted at every audit, one chance rejection would label
them all. The base tier's stability is its batch now against the base batch of an audit at
least ``STABILITY_GAP`` earlier (a different time window, so the test can fail). The result is
stored as the run summary's ``verdict`` block (histograms, never thousands of floats) and the
sentence in ``Run.verdict``; the per-pair evidence across audits is
``monitor.derived.evidence``'s.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np
from django.utils import timezone

from evals.comparable import comparable_pairs
from evals.logprobs import logprob_gap
from evals.served import counts_for_tier
from evals.similarity import compare_pairs, first_divergence
from evals.stats.capability import PairedTable, paired_table, pass_at_k
from evals.stats.labels import LABEL_WORDS, TierCounts, fmt_p, judge, ladder_context
from evals.stats.ladder import REFERENCE_LADDER
from evals.stats.mmd import MMDResult, mmd_test
from evals.stats.sequential import sequential_test
from evals.stats.stability import base_stability
from monitor.judging.claims import expected_tiers, gate
from monitor.models import Pair, Run, RunKind, RunStatus, Sample

ALPHA = 0.05
NULL_BINS = 40
MAX_DIVERGENCE_ROWS = 200
RECENT_PROBES = 20  # how far back to look for a probe run with unit tests
STABILITY_GAP = timedelta(hours=24)  # base now vs base at least this long ago


# --- the verdict ------------------------------------------------------------------------------


def compute_verdict(*, run_id: int) -> dict[str, Any]:
    """Compute, store and return the verdict of a finished audit run (see module docstring)."""
    run = Run.objects.select_related("pair__fast", "pair__base", "suite").get(id=run_id)
    samples = list(
        run.samples.select_related("case")
        .only(
            "tier",
            "batch",
            "repetition",
            "seq",
            "ok",
            "text",
            "tests_passed",
            "case__key",
            "case__difficulty",
            "endpoint_id",
            "served_tier",
        )
        .order_by("seq")
    )
    # a sample served on another tier than bought is another model's answer: left out of the
    # test and the capability figures unless the pair includes it (evals.served)
    samples, gating = gate(samples, include_downgraded=run.pair.include_downgraded)
    groups = _audit_groups(samples)
    fast, base = groups[("fast", 0)], groups[("base", 0)]
    fvb = mmd_test(fast, base, seed=run.seed)
    t0 = temperature0_diagnostics(pair=run.pair)
    own = capability_of_samples(samples, run_id=run.id)
    capability = own or capability_evidence(pair=run.pair)
    earlier = stability_reference(run)
    stability = (base_stability(base, _audit_groups(list(
        earlier.samples.filter(tier="base", batch=0).select_related("case")
        .only("tier", "batch", "repetition", "ok", "text", "case__key")))[("base", 0)],
        seed=run.seed + 1) if earlier else None)  # fmt: skip
    suite = run.suite.name if run.suite_id else None
    j = judge(
        fast_vs_base=fvb,
        tiers=_tier_counts(samples),
        capability=capability["table"] if capability else None,
        capability_from_run=own is not None,
        t0_fast_vs_base=(t0 or {}).get("fast_vs_base_full"),
        t0_base_vs_base=(t0 or {}).get("base_vs_base_full"),
        base_stability=stability,
        suite=suite,
        alpha=ALPHA,
    )
    effect = j.effect
    result = {
        "label": j.label,
        "label_words": LABEL_WORDS[j.label],
        "sentence": j.sentence,
        "p_value": j.p_value,
        "p_adjusted": j.adjusted_p_values.get("mmd_fast_vs_base"),
        "adjusted_p_values": j.adjusted_p_values,
        # the sentence's own formatting, so the headline and the table agree digit for digit
        "p_words": {k: fmt_p(p) for k, p in j.adjusted_p_values.items()}
        | {"raw": fmt_p(j.p_value) if j.p_value is not None else "—"},
        "statistic": fvb.statistic,
        "effect": dataclasses.asdict(effect) if effect else None,
        "detectable_80": effect.detectable_80 if effect else None,
        "min_detectable_effect": effect.critical_value if effect else None,
        "n_per_tier": list(fvb.n_per_tier),
        "n_prompts": fvb.n_prompts,
        "rates": [dataclasses.asdict(r) | {"words": r.words()} for r in j.rates],
        "reasons": j.reasons,
        "context": j.context,
        "alpha": ALPHA,
        "run_id": run.id,
        "computed_at": timezone.now().isoformat(),
        "simulated": run.pair.simulated,
        "mmd": {"fast_vs_base": _mmd_block(fvb)},
        "base_stability": (
            {**_mmd_block(stability), "earlier_run_id": earlier.id}
            if earlier is not None and stability is not None and stability.statistic is not None
            else None
        ),
        "sequential": _sequential(samples),
        "gating": gating,
        "t0": _public_t0(t0),
        "capability": _public_capability(capability),
        "capability_from_run": own is not None,
        "ladder": (
            {k: REFERENCE_LADDER.get(k) for k in ("placeholder", "note", "L", "rungs")}
            if ladder_context(REFERENCE_LADDER, suite=suite, L=fvb.L, alpha=ALPHA)
            else None
        ),
    }
    Run.objects.merge_summary(run.id, verdict=result)
    Run.objects.filter(id=run.id).update(verdict=j.sentence)
    return result


def stability_reference(run: Run) -> Run | None:
    """The newest finished audit of the pair on the same suite at least ``STABILITY_GAP``
    older than ``run``: another time window for the base tier."""
    return (Run.objects.filter(pair=run.pair_id, kind=RunKind.AUDIT, status=RunStatus.DONE,
                               suite=run.suite_id,
                               created_at__lte=run.created_at - STABILITY_GAP)
            .exclude(id=run.id).order_by("-created_at", "-id").first())  # fmt: skip


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
    return {
        **result.to_dict(),
        "null_hist": null_histogram(result.null_stats),
        "critical_value": result.critical_value(ALPHA),
    }


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
    return {
        "rejected": result.rejected,
        "stopped_at_pair": result.stopped_at_pair,
        "n_pairs": len(pairs),
        "final_wealth": float(result.wealth[-1]) if result.wealth.size else 1.0,
    }


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
        run.samples.filter(ok=True)
        .select_related("case")
        .only(
            "id",
            "tier",
            "batch",
            "repetition",
            "ok",
            "text",
            "logprobs",
            "case__key",
            "case__messages",
            "endpoint_id",
            "served_tier",
        )
    )
    samples, _ = gate(samples, include_downgraded=pair.include_downgraded)
    pairs = comparable_pairs(
        samples, group=lambda s: s.case.key, messages=lambda s: s.case.messages
    )
    fvb = [(f.case.key, f.repetition, f, b) for f, b in pairs["fast_vs_base"]]
    bvb = [(a.case.key, a.repetition, a, b) for a, b in pairs["base_vs_base"]]
    if not fvb:
        return None
    full_fvb = compare_pairs([(f.text, b.text) for _, _, f, b in fvb])
    full_bvb = compare_pairs([(a.text, b.text) for _, _, a, b in bvb])
    rows = []
    for (key, rep, fast, base), ratio in zip(fvb, full_fvb["ratios"], strict=True):
        pos = first_divergence(base.text, fast.text)
        rows.append(
            {
                "case": key,
                "repetition": rep,
                "ratio": ratio,
                "first_divergence": pos,
                "base_sample": base.id,
                "fast_sample": fast.id,
                "logprobs": logprob_gap(base.logprobs, fast.logprobs, pos)
                if pos is not None
                else None,
            }
        )
    rows.sort(key=lambda r: (r["first_divergence"] is None, r["first_divergence"] or 0))
    return {
        "run_id": run.id,
        "default_temperature": default_temperature_tiers(pair),
        "fast_vs_base_full": full_fvb,
        "base_vs_base_full": full_bvb,
        "divergences": rows[:MAX_DIVERGENCE_ROWS],
    }


def default_temperature_tiers(pair: Pair) -> list[str]:
    """The tiers whose endpoint sends no temperature (a reasoning model that takes only its
    default, or Anthropic extended thinking): their "temperature-0" texts were sampled at the
    model's default temperature, so their differences include sampling."""
    endpoints = (("fast", pair.fast), ("base", pair.base))
    return [t for t, ep in endpoints if not ep.send_temperature or ep.thinking_budget]


def _public_t0(t0: dict[str, Any] | None) -> dict[str, Any] | None:
    if t0 is None:
        return None
    return {
        "run_id": t0["run_id"],
        "default_temperature": t0.get("default_temperature") or [],
        "fast_vs_base": t0["fast_vs_base_full"],
        "base_vs_base": t0["base_vs_base_full"],
        "divergences": t0["divergences"],
    }


# --- capability -------------------------------------------------------------------------------


def capability_evidence(*, pair: Pair) -> dict[str, Any] | None:
    """Unit-test evidence from the pair's latest probe run with tested cases (context for an
    audit: another run's evidence, never counted in its label)."""
    runs = Run.objects.trend().filter(pair=pair).order_by("-created_at", "-id")
    run = next(
        (
            r
            for r in runs.only("id", "summary")[:RECENT_PROBES]
            if r.summary_obj.tier("fast").n_tested
        ),
        None,
    )
    if run is None:
        return None
    rows = Sample.objects.filter(run=run, tests_passed__isnull=False).values_list(
        "tier", "case__key", "case__difficulty", "tests_passed", "endpoint_id", "served_tier"
    )
    expected = expected_tiers((pair.fast_id, pair.base_id))
    kept = [
        r[:4]
        for r in rows
        if counts_for_tier(r[5], expected.get(r[4], ""), include_downgraded=pair.include_downgraded)
    ]
    return _capability(kept, run_id=run.id)


def capability_of_samples(samples: Sequence[Sample], *, run_id: int) -> dict[str, Any] | None:
    """Unit-test evidence of a run's own samples (None when none was tested)."""
    rows = [(s.tier, s.case.key, s.case.difficulty, s.tests_passed) for s in samples
            if s.tests_passed is not None and s.batch == 0]  # fmt: skip
    return _capability(rows, run_id=run_id) if rows else None


def _capability(rows: Sequence[tuple[str, str, str, bool]], *, run_id: int) -> dict[str, Any]:
    """McNemar needs one pass/fail per case and tier: a case passes on a tier when at least
    half of its samples there passed (pass@1 ≥ 0.5). pass@1 per tier is the mean over cases of
    the unbiased per-case estimate (Chen et al. 2021; with k = 1 it is c / n)."""
    counts: dict[str, dict[str, list[int]]] = {"fast": {}, "base": {}}
    difficulty: dict[str, str] = {}
    for tier, key, diff, passed in rows:
        n_c = counts[tier].setdefault(key, [0, 0])
        n_c[0] += 1
        n_c[1] += int(passed)
        difficulty[key] = diff
    rate = {t: {k: pass_at_k(n, c, 1) for k, (n, c) in counts[t].items()} for t in counts}
    table: PairedTable = paired_table(
        {k: v >= 0.5 for k, v in rate["fast"].items()},
        {k: v >= 0.5 for k, v in rate["base"].items()},
    )
    pass1: dict[str, dict[str, float | None]] = {}
    for tier in ("fast", "base"):
        groups: dict[str, list[float]] = defaultdict(list)
        for key, value in rate[tier].items():
            groups["all"].append(value)
            groups[difficulty[key]].append(value)
        pass1[tier] = {g: float(np.mean(v)) for g, v in sorted(groups.items())}
    cases = [
        {
            "case": key,
            "difficulty": difficulty[key],
            "fast": counts["fast"].get(key),
            "base": counts["base"].get(key),
        }
        for key in sorted(difficulty)
    ]
    return {"run_id": run_id, "table": table, "pass_at_1": pass1, "cases": cases}


def _public_capability(cap: dict[str, Any] | None) -> dict[str, Any] | None:
    if cap is None:
        return None
    return {
        **{k: v for k, v in cap.items() if k != "table"},
        "table": dataclasses.asdict(cap["table"]),
    }
