"""The verdict of an audit run, the drift of each tier against its own past, and the events.

An audit run holds temperature-1 samples of three independent batches: fast, base and base
again. The verdict (``compute_verdict``) tests fast against base with the MMD test and
calibrates it with base against base (two batches) and fast against fast (even against odd
repetitions); it adds the temperature-0 diagnostics and the unit-test evidence of the pair's
latest probe runs, and lets ``evals.stats.verdict.decide`` word it. Everything is stored in
``Run.summary["verdict"]`` (JSON, reduced for plotting: histograms, never thousands of floats)
and the sentence in ``Run.verdict``, so pages never recompute it.

Drift (``drift_track``): one statistic per run of the pair (a tier's TTFT P50, a similarity,
the MMD statistic of audits) through ``evals.stats.drift.cusum_track`` against the pair's own
first runs as a frozen baseline. Each run's summary keeps a snapshot of the states
(``summary["drift"]``), so the alert rules can read "drift" from one run's summary.

Events (``endpoint_events``): the first time each returned model id / ``system_fingerprint``
was seen per endpoint, from the ``ProvenanceEvent`` rows written when runs are summarised.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from django.db.models import Q
from django.utils import timezone

from evals.similarity import compare_pairs, first_divergence
from evals.stats.capability import paired_table, pass_at_k
from evals.stats.drift import cusum_track
from evals.stats.mmd import MMDResult, mmd_test
from evals.stats.sequential import sequential_test
from evals.stats.verdict import REFERENCE_LADDER, TierCounts, decide
from monitor.models import Endpoint, Pair, ProvenanceEvent, Run, Sample, Suite

log = logging.getLogger(__name__)

ALPHA = 0.05
NULL_BINS = 40
MAX_DIVERGENCE_ROWS = 200
RECENT_PROBES = 20  # how far back to look for a probe run with unit tests
DRIFT_RUNS = 200  # runs per drift track (the baseline is the first ones of these)
LABEL_WORDS = {
    "no_detectable_difference": "no detectable difference",
    "numerics_scale_difference": "numerics-scale difference",
    "different_model": "different model",
    "inconclusive": "inconclusive",
}
# (statistic, tier) tracked for drift after each run, by run kind.
DRIFT_SERIES = {
    "probe": (("ttft_p50", "fast"), ("ttft_p50", "base"),
              ("similarity", "fast_vs_base"), ("similarity", "base_vs_base")),
    "audit": (("mmd", "fast_vs_base"), ("mmd", "base_vs_base")),
}  # fmt: skip


def audit_suite(pair: Pair) -> Suite:
    """Audits use the newest built-in ``audit`` suite (≥ 25 short open prompts, what the MMD
    test needs) when it is in the database, else the pair's own suite."""
    return Suite.objects.filter(name="audit").order_by("-version").first() or pair.suite


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
    fast, base0, base1 = groups[("fast", 0)], groups[("base", 0)], groups[("base", 1)]
    fvb = mmd_test(fast, base0, seed=run.seed)
    bvb = mmd_test(base0, base1, seed=run.seed + 1) if base1 else None
    ffa, ffb = _halves(fast)
    fvf = mmd_test(ffa, ffb, seed=run.seed + 2)
    fvf = fvf if fvf.statistic is not None else None

    t0 = temperature0_diagnostics(pair=run.pair)
    capability = capability_evidence(pair=run.pair)
    verdict = decide(
        fast_vs_base=fvb,
        base_vs_base=bvb,
        fast_vs_fast=fvf,
        t0_fast_vs_base=(t0 or {}).get("fast_vs_base_full"),
        t0_base_vs_base=(t0 or {}).get("base_vs_base_full"),
        capability=capability["table"] if capability else None,
        tiers=_tier_counts(samples),
        alpha=ALPHA,
    )
    result = {
        **dataclasses.asdict(verdict),
        "label_words": LABEL_WORDS[verdict.label],
        "alpha": ALPHA,
        "run_id": run.id,
        "computed_at": timezone.now().isoformat(),
        "simulated": run.pair.fast.simulated or run.pair.base.simulated,
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
    summary = dict(run.summary or {})
    summary["verdict"] = result
    Run.objects.filter(id=run.id).update(summary=summary, verdict=verdict.sentence)
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


def _halves(texts: dict[str, list[str]]) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Even against odd repetitions of one batch: the fast-vs-fast calibration."""
    return ({k: v[0::2] for k, v in texts.items()}, {k: v[1::2] for k, v in texts.items()})


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
        .only("id", "tier", "batch", "repetition", "text", "logprobs", "case__key")
    )
    by_key = {(s.tier, s.batch, s.case.key, s.repetition): s for s in samples}
    fvb, bvb = [], []
    for (tier, batch, key, rep), base in sorted(by_key.items()):
        if tier != "base" or batch != 0:
            continue
        fast = by_key.get(("fast", 0, key, rep))
        if fast is not None:
            fvb.append((key, rep, fast, base))
        other = by_key.get(("base", 1, key, rep)) or (
            by_key.get(("base", 0, key, 1)) if rep == 0 else None)
        if other is not None:
            bvb.append((key, rep, base, other))
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


def token_at(logprobs: Sequence[dict[str, Any]] | None, pos: int) -> dict[str, Any] | None:
    """The logprob entry of the token covering character ``pos`` of the text the tokens spell
    (the last token when ``pos`` is at the very end); None without logprobs."""
    if not logprobs:
        return None
    end = 0
    for entry in logprobs:
        end += len(entry.get("token") or "")
        if end > pos:
            return entry
    return logprobs[-1]


def logprob_gap(
    base_lp: Sequence[dict[str, Any]] | None, fast_lp: Sequence[dict[str, Any]] | None, pos: int
) -> dict[str, Any] | None:
    """At the first divergence: each tier's chosen token and logprob, and how much more the
    base tier preferred its own token over the fast tier's, ``gap`` = log p_base(own) −
    log p_base(fast's token) in nats (None when fast's token is not among base's top
    logprobs). A near tie (gap well under 1 nat) is what numerics flip; a confident different
    token is what a different model chooses."""
    base, fast = token_at(base_lp, pos), token_at(fast_lp, pos)
    if base is None or fast is None:
        return None
    top = {t.get("token"): t.get("logprob") for t in base.get("top_logprobs") or ()}
    alt = top.get(fast.get("token"))
    own = base.get("logprob")
    ranked = sorted((v for v in top.values() if v is not None), reverse=True)
    return {
        "base_token": base.get("token"), "base_logprob": own,
        "fast_token": fast.get("token"), "fast_logprob": fast.get("logprob"),
        "gap": (own - alt) if own is not None and alt is not None else None,
        "base_margin": (ranked[0] - ranked[1]) if len(ranked) >= 2 else None,
        "base_top": list(base.get("top_logprobs") or ())[:5],
        "fast_top": list(fast.get("top_logprobs") or ())[:5],
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
                if ((r.summary.get("tiers") or {}).get("fast") or {}).get("n_tested")), None)
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


# --- drift ------------------------------------------------------------------------------------


def _probe_value(summary: dict[str, Any], statistic: str, tier: str) -> float | None:
    if statistic == "ttft_p50":
        stat = ((summary.get("tiers") or {}).get(tier) or {}).get("ttft_ms") or {}
        return stat.get("p50") if (stat.get("n") or 0) >= (summary.get("min_n") or 5) else None
    if statistic == "similarity":
        return ((summary.get("similarity") or {}).get(tier) or {}).get("mean_ratio")
    raise ValueError(f"unknown probe statistic {statistic!r}")


def _audit_value(summary: dict[str, Any], statistic: str, tier: str) -> float | None:
    block = ((summary.get("verdict") or {}).get("mmd") or {}).get(tier) or {}
    return block.get("statistic")


def _track(runs: Sequence[Run], statistic: str, tier: str) -> dict[str, Any]:
    """The CUSUM path over ``runs`` (oldest first); runs without a value are left out."""
    read = _audit_value if statistic == "mmd" else _probe_value
    points = [(r, read(r.summary or {}, statistic, tier)) for r in runs]
    points = [(r, v) for r, v in points if v is not None]
    path = cusum_track([v for _, v in points])
    out, changes, previous = [], [], "calibrating"
    for (r, _), p in zip(points, path, strict=True):
        out.append({"run_id": r.id, "at": (r.finished_at or r.created_at).isoformat(),
                    **dataclasses.asdict(p)})
        if p.state == "drift" and previous != "drift":
            changes.append(r.id)
        previous = p.state
    return {"statistic": statistic, "tier": tier, "points": out,
            "state": out[-1]["state"] if out else "calibrating", "change_points": changes}


def _runs_for_drift(pair: Pair, kind: str, until: Run | None) -> list[Run]:
    done = Q(status="done") | Q(id=until.id) if until is not None else Q(status="done")
    runs = Run.objects.filter(done, pair=pair, kind=kind).exclude(trigger="load")
    if until is not None:
        runs = runs.filter(created_at__lte=until.created_at)
    newest = runs.order_by("-created_at", "-id").only(
        "id", "created_at", "finished_at", "summary")[:DRIFT_RUNS]
    return list(reversed(newest))


def drift_tracks(
    *, pair: Pair, series: Iterable[tuple[str, str]], until: Run | None = None
) -> dict[str, dict[str, Any]]:
    """Several tracks, ``"statistic:tier"`` → track, loading each kind's runs once.

    ``statistic``: ``ttft_p50`` (tier fast|base) or ``similarity`` (tier fast_vs_base|
    base_vs_base) over probe runs; ``mmd`` (tier fast_vs_base|base_vs_base) over audit runs.
    Runs without a value (n below the minimum, no verdict) are left out. ``until`` stops the
    tracks at that run and counts it even before it is marked done (the snapshot stored with
    it is taken while the run finishes).
    """
    loaded: dict[str, list[Run]] = {}
    out = {}
    for statistic, tier in series:
        kind = "audit" if statistic == "mmd" else "probe"
        if kind not in loaded:
            loaded[kind] = _runs_for_drift(pair, kind, until)
        out[f"{statistic}:{tier}"] = {**_track(loaded[kind], statistic, tier), "kind": kind}
    return out


def drift_track(*, pair: Pair, tier: str, statistic: str, until: Run | None = None) -> dict:
    """The CUSUM path of one statistic over the pair's finished runs, oldest first: points
    (run id, time, value, z, S⁺, S⁻, state), the last state and the change points (runs where
    the state turned to drift). See :func:`drift_tracks` for the statistics."""
    return drift_tracks(pair=pair, series=[(statistic, tier)], until=until)[f"{statistic}:{tier}"]


def drift_snapshot(*, run: Run) -> dict[str, Any]:
    """The drift state of every tracked series as of ``run`` (stored in its summary)."""
    tracks = drift_tracks(pair=run.pair, series=DRIFT_SERIES.get(run.kind, ()), until=run)
    series = {}
    for key, track in tracks.items():
        last = track["points"][-1] if track["points"] else {}
        series[key] = {"state": track["state"], "z": last.get("z"), "runs": len(track["points"])}
    drifting = sorted(k for k, v in series.items() if v["state"] == "drift")
    return {"series": series, "drifting": drifting,
            "runs": max((v["runs"] for v in series.values()), default=0)}


def after_summary(*, run_id: int) -> None:
    """What runs.execute_run calls once a run is summarised: the verdict of an audit, and the
    drift snapshot of any run, both stored in the run's summary."""
    run = Run.objects.select_related("pair").get(id=run_id)
    if run.kind == "audit":
        try:
            compute_verdict(run_id=run_id)
        except Exception as exc:  # the samples and summary stand; the page shows the error
            log.exception("verdict of run %s failed", run_id)
            Run.objects.filter(id=run_id).update(
                verdict=f"verdict not computed ({type(exc).__name__}: {exc})")
    try:
        snapshot = drift_snapshot(run=run)
    except Exception:  # drift is a view over past runs; it must not fail this one
        log.exception("drift snapshot of run %s failed", run_id)
        return
    run.refresh_from_db(fields=["summary"])
    Run.objects.filter(id=run_id).update(summary={**(run.summary or {}), "drift": snapshot})


def read_verdict_metric(summary: dict[str, Any], metric: str) -> Any:
    """The alert-rule reading (``alerts.Reading``) of ``verdict_different`` or ``drift`` from
    one run's summary: 1.0 or 0.0 with its n; None when the run has no verdict (probe runs),
    an inconclusive one, or no drift series past calibration."""
    from monitor.services.alerts import Reading

    if metric == "verdict_different":
        v = summary.get("verdict")
        if not v or v.get("label") == "inconclusive":
            return None
        n = min(((v.get("mmd") or {}).get("fast_vs_base") or {}).get("n_per_tier") or [0])
        return Reading(1.0 if v["label"] == "different_model" else 0.0, n)
    d = summary.get("drift") or {}
    series = d.get("series") or {}
    if not any(s["state"] != "calibrating" for s in series.values()):
        return None
    return Reading(1.0 if d.get("drifting") else 0.0, int(d.get("runs") or 0))


# --- model id / fingerprint events ------------------------------------------------------------


def endpoint_events(*, endpoints: Iterable[Endpoint], limit: int = 50) -> list[dict[str, Any]]:
    """When each returned model id and system fingerprint was first (and last) seen, per
    endpoint, oldest first. A value after the first one is a change of what the endpoint
    says it serves. Values that come back (A → B → A) are not new and show no second event.
    Read from ``ProvenanceEvent`` rows (upserted by ``monitor.rollups`` when a run is
    summarised): one small query, however many samples the endpoints have."""
    by_id = {ep.pk: ep for ep in endpoints}
    rows = ProvenanceEvent.objects.filter(endpoint_id__in=by_id).order_by("first_seen", "id")
    events, seen = [], Counter()
    for row in rows:
        key = (row.endpoint_id, row.kind)
        seen[key] += 1
        if seen[key] > limit:
            continue
        ep = by_id[row.endpoint_id]
        events.append({
            "endpoint": ep.name, "simulated": ep.simulated,
            "what": "model id" if row.kind == "model_id" else "fingerprint",
            "value": row.value, "first_seen": row.first_seen, "last_seen": row.last_seen,
            "n": row.count, "run_id": row.run_id, "change": seen[key] > 1,
        })
    return events


# --- reads for the verdict page ---------------------------------------------------------------


def audit_runs(pair: Pair, limit: int = 50) -> list[Run]:
    """The pair's newest audit runs, newest first (summaries included, samples not)."""
    return list(Run.objects.filter(pair=pair, kind="audit").order_by("-created_at", "-id")
                .only("id", "pair_id", "kind", "status", "created_at", "started_at",
                      "finished_at", "summary", "verdict", "error", "planned", "completed")
                [:limit])


def verdict_history(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """One row per audit run with a verdict, oldest first, for the history chart."""
    rows = []
    for r in sorted(runs, key=lambda r: (r.created_at, r.id)):
        v = (r.summary or {}).get("verdict")
        if not v:
            continue
        when: datetime = r.finished_at or r.created_at
        bvb = (v.get("mmd") or {}).get("base_vs_base") or {}
        rows.append({"run_id": r.id, "at": when.isoformat(), "label": v["label"],
                     "statistic": v.get("statistic"), "noise_floor": bvb.get("statistic"),
                     "mde": v.get("min_detectable_effect"), "p_value": v.get("p_value"),
                     "sentence": v.get("sentence")})
    return rows
