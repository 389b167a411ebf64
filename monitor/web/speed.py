"""The speed page of a pair: speed-ups per scenario against the claim, percentiles with n,
where the time goes, mechanism hints with their evidence, goodput, load, skipped cases.

The view formats ``monitor.judging.speed.speed_report`` and the runs' stored summaries; it
computes nothing itself.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from evals.claims import METRICS as CLAIM_METRICS
from evals.latency import min_n_for
from monitor import selectors
from monitor.derived.run_summary import LoadLevel
from monitor.judging.speed import BREAKDOWN, METRICS, OTPS, TIERS
from monitor.web import page_figures
from monitor.web.access import VIEW_RUN, requires
from monitor.web.cells import NO_DATA, Cell, fraction, percentile

QUANTILES = ("p50", "p90", "p95", "p99")
METRIC_KEYS = tuple(key for key, _, _ in METRICS)
TIMINGS = (("ttft_ms", "TTFT"), ("e2e_ms", "E2E"), ("tpot_ms", "TPOT"))


def speedup_rows(
    report: dict[str, Any],
    table: str = "speedup",
    keys: tuple[str, ...] = METRIC_KEYS,
) -> list[dict[str, Any]]:
    """One row per scenario: per metric the estimate [CI] and its status against the claim."""
    rows = []
    for scn in report["scenarios"]:
        cells = []
        for key in keys:
            ci = report[table].get(scn, {}).get(key) or {}
            muted = ci.get("low") is None
            cells.append(
                {
                    "text": ci.get("text", "—"),
                    "muted": muted,
                    "status": ci.get("status"),
                    "claim": ci.get("claim") or "",
                }
            )
        rows.append(
            {
                "scenario": scn,
                "description": report["descriptions"].get(scn, ""),
                "n": report["n_pairs"].get(scn, 0),
                "cells": cells,
            }
        )
    return rows


def _short(stat: dict[str, Any], q: str, min_n: int) -> Cell:
    """A percentile in ms without its n (the row has an n column per timing, which keeps the
    table narrow); "n<59" when withheld below its own minimum n."""
    n, value = stat.get("n", 0), stat.get(q)
    if n < min_n:
        return Cell("—", muted=True)
    if value is None:
        need = min_n_for(float(q[1:]))
        return Cell(f"n<{need}", muted=True) if n < need else NO_DATA
    return Cell(f"{value:,.0f}" if value >= 10 else f"{value:.1f}")


def percentile_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Scenario × tier rows; per timing n, then P50/P90/P95/P99 in ms, none below min n and
    each withheld below its own minimum n (``evals.latency.min_n_for``)."""
    min_n = report["min_n"]
    rows = []
    for scn in report["scenarios"]:
        for tier in TIERS:
            stats = report["percentiles"][scn][tier]
            cells = []
            for m, _ in TIMINGS:
                cells.append(Cell(str(stats[m].get("n", 0))))
                cells += [_short(stats[m], q, min_n) for q in QUANTILES]
            rows.append({"scenario": scn, "tier": tier, "cells": cells})
    return rows


def _ms(value: float | None) -> Cell:
    return NO_DATA if value is None else Cell(f"{value:,.1f} ms")


def breakdown_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for scn in report["scenarios"]:
        for tier in TIERS:
            b = report["breakdown"][scn][tier]
            rows.append(
                {
                    "scenario": scn,
                    "tier": tier,
                    "n": b["n"],
                    "cells": [_ms(b[part]) for part, _ in BREAKDOWN],
                }
            )
    return rows


def goodput_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    g = report["goodput"]
    rows = [
        {
            "scenario": "all scenarios",
            "cells": [fraction(g["tiers"][t]["value"], g["tiers"][t]["n"]) for t in TIERS],
        }
    ]
    for scn in report["scenarios"]:
        rows.append(
            {
                "scenario": scn,
                "cells": [
                    fraction(g["scenarios"][scn][t]["value"], g["scenarios"][scn][t]["n"])
                    for t in TIERS
                ],
            }
        )
    return rows


def load_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    load = report.get("load")
    if not load:
        return []
    min_n = report["min_n"]
    rows = []
    for level in sorted(load["levels"], key=int):
        for tier in TIERS:
            stored = load["levels"][level].get(tier)
            b = LoadLevel.from_json(stored)
            rows.append(
                {
                    "level": level,
                    "tier": tier,
                    "n": b.n,
                    "n_ok": b.n_ok,
                    "cells": [
                        percentile(getattr(b, m) if stored else None, q, min_n)
                        for m in ("ttft_ms", "e2e_ms")
                        for q in ("p50", "p95")
                    ],
                    "goodput": fraction(b.goodput, b.n if stored else None),
                    "rps": NO_DATA
                    if not b.throughput_rps
                    else Cell(f"{b.throughput_rps:.1f} req/s"),
                }
            )
    return rows


def hourly_rows(hours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fast tier's downgrade rate per UTC hour of day with n, only hours with a report."""
    return [{**h, "rate": fraction(h["rate"], h["n"])} for h in hours if h["n"]]


def premium_rows(weeks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per week: the price multiple paid beside the speed-up delivered (its interval)."""
    return [
        {
            **w,
            "paid": f"{w['price_multiple']:.2f}×" if w["price_multiple"] is not None else "—",
            "metric_label": CLAIM_METRICS[w["metric"]],
        }
        for w in weeks
    ]


QS = ("p50", "p95")


def ttft_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """TTFT both ways (first token on any channel, first answer token) where a tier streamed
    reasoning first: P50 and P95 of each with n."""
    min_n = report["min_n"]
    rows = []
    for scn, tiers in report["ttft_both"].items():
        for tier, both in tiers.items():
            cells = [percentile(both[k], q, min_n) for k in ("any", "answer") for q in QS]
            rows.append({
                "scenario": scn,
                "tier": tier,
                "n": both["n"],
                "n_reasoning": both["n_reasoning"],
                "cells": cells,
            })  # fmt: skip
    return rows


@requires(VIEW_RUN)
@require_GET
def speed_page(request: HttpRequest, name: str) -> HttpResponse:
    pair = selectors.get_pair_for_user(request.user, name)
    computed = page_figures.figures("speed", pair)
    report = computed["report"]
    context = {
        "pair": pair,
        "simulated": report["simulated"],
        **computed,
        "metric_labels": [label for _, _, label in METRICS],
        "claim_check": report["claim_check"],
        "gating": report["gating"],
        "hourly": hourly_rows(report["downgrades_by_hour"]),
        "premium_rows": premium_rows(report["premium"]),
        "ttft_rows": ttft_rows(report),
        "speedup_rows": speedup_rows(report),
        "otps_labels": [label for _, label in OTPS],
        "otps_rows": speedup_rows(report, "otps", tuple(key for key, _ in OTPS)),
        "timing_labels": [label for _, label in TIMINGS],
        "quantiles": [q.upper() for q in QUANTILES],
        "percentile_rows": percentile_rows(report),
        "breakdown_labels": [label for _, label in BREAKDOWN],
        "breakdown_rows": breakdown_rows(report),
        "goodput_rows": goodput_rows(report),
        "load_rows": load_rows(report),
        "tiers": TIERS,
    }
    return render(request, "monitor/speed.html", context)
