"""Drift: each tier against its own past.

One statistic per run of the pair (a tier's TTFT P50, a similarity, the MMD statistic of
audits) goes through ``evals.stats.drift.cusum_track`` against the pair's own first runs as a
frozen baseline. Each run's summary keeps a snapshot of the states (its ``drift`` block), so
an alert rule reads "drift" from one run's summary.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from django.db.models import Q

from evals.stats.drift import cusum_track
from monitor.models import Pair, Run, RunKind, RunStatus
from monitor.run_summary import RunSummary

DRIFT_RUNS = 200  # runs per drift track (the baseline is the first ones of these)
# (statistic, tier) tracked for drift after each run, by run kind.
DRIFT_SERIES = {
    RunKind.PROBE: (("ttft_p50", "fast"), ("ttft_p50", "base"),
                    ("similarity", "fast_vs_base"), ("similarity", "base_vs_base")),
    RunKind.AUDIT: (("mmd", "fast_vs_base"), ("mmd", "base_vs_base")),
}  # fmt: skip


def value_of(summary: RunSummary, statistic: str, tier: str) -> float | None:
    """One run's value of a tracked statistic; None when it has none (n below its min n, no
    verdict)."""
    if statistic == "ttft_p50":
        stat = summary.tier(tier).ttft_ms
        return stat.p50 if stat.n >= summary.min_n else None
    if statistic == "similarity":
        sim = summary.similar(tier)
        return sim.mean_ratio if sim else None
    if statistic == "mmd":
        return summary.verdict.mmd(tier).get("statistic") if summary.verdict else None
    raise ValueError(f"unknown drift statistic {statistic!r}")


def _track(runs: Sequence[Run], statistic: str, tier: str) -> dict[str, Any]:
    """The CUSUM path over ``runs`` (oldest first); runs without a value are left out."""
    points = [(r, value_of(r.summary_obj, statistic, tier)) for r in runs]
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
    done = Q(status=RunStatus.DONE)
    runs = Run.objects.filter(done | Q(id=until.id) if until else done, pair=pair, kind=kind)
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
    tracks at that run and counts it whatever its status.
    """
    loaded: dict[str, list[Run]] = {}
    out = {}
    for statistic, tier in series:
        kind = RunKind.AUDIT if statistic == "mmd" else RunKind.PROBE
        if kind not in loaded:
            loaded[kind] = _runs_for_drift(pair, kind, until)
        out[f"{statistic}:{tier}"] = {**_track(loaded[kind], statistic, tier), "kind": str(kind)}
    return out


def drift_track(*, pair: Pair, tier: str, statistic: str, until: Run | None = None) -> dict:
    """The CUSUM path of one statistic over the pair's finished runs, oldest first: points
    (run id, time, value, z, S⁺, S⁻, state), the last state and the change points (runs where
    the state turned to drift). See :func:`drift_tracks` for the statistics."""
    return drift_tracks(pair=pair, series=[(statistic, tier)], until=until)[f"{statistic}:{tier}"]


def drift_snapshot(*, run: Run) -> dict[str, Any]:
    """The drift state of every tracked series as of ``run`` (its summary's ``drift`` block)."""
    tracks = drift_tracks(pair=run.pair, series=DRIFT_SERIES.get(run.kind, ()), until=run)
    series = {}
    for key, track in tracks.items():
        last = track["points"][-1] if track["points"] else {}
        series[key] = {"state": track["state"], "z": last.get("z"), "runs": len(track["points"])}
    drifting = sorted(k for k, v in series.items() if v["state"] == "drift")
    return {"series": series, "drifting": drifting,
            "runs": max((v["runs"] for v in series.values()), default=0)}


def store_snapshot(*, run: Run) -> None:
    Run.objects.merge_summary(run.id, drift=drift_snapshot(run=run))
