"""The chart builders' inputs as plain JSON and the figures they build, for the golden test of
``test_chart_json``: the builders read runs (unsaved ``Run`` objects here, no database), a speed
report, a verdict with its history and events, and a capability window report.

``python -m tests.monitor.web.chart_golden capture`` (DATABASE_URL of a populated database, read
only) stores pair00's inputs in ``data/chart_inputs.json``; ``... golden`` writes the figures the
checked-out code builds from them, and from them with a few blocks added (``LOAD``,
``_with_downgrades``: pair00 has no load probe nor downgrades), to ``data/chart_golden.json``.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
INPUTS, GOLDEN = DATA / "chart_inputs.json", DATA / "chart_golden.json"
RUN_FIELDS = ("id", "status", "kind", "created_at", "started_at", "finished_at")


def _run_json(run: Any) -> dict[str, Any]:
    row = {f: getattr(run, f) for f in RUN_FIELDS}
    return {
        **{k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()},
        "summary": run.summary,
    }


def _run(row: dict[str, Any]) -> Any:
    from monitor.models import Run

    times = {
        k: datetime.fromisoformat(row[k]) if row[k] else None
        for k in ("created_at", "started_at", "finished_at")
    }
    return Run(
        id=row["id"], status=row["status"], kind=row["kind"], summary=row["summary"], **times
    )


def capture(pair_name: str = "pair00") -> dict[str, Any]:
    """pair00's chart inputs, read as the pages read them (``monitor.web.page_figures``)."""
    from monitor import selectors
    from monitor.judging.speed import default_runs, speed_report
    from monitor.models import Pair

    pair = Pair.objects.select_related("fast", "base").get(name=pair_name)
    runs = default_runs(pair)
    events = selectors.endpoint_events(endpoints=[pair.fast, pair.base])
    return {
        "simulated": pair.simulated,
        "trend_runs": [_run_json(r) for r in selectors.pair_trend_runs(pair)],
        "speed_runs": [_run_json(r) for r in runs],
        "speed_report": json.loads(json.dumps(speed_report(pair=pair, runs=runs))),
        "audit_runs": [_run_json(r) for r in selectors.audit_runs(pair)],
        "events": [
            {
                **e,
                "first_seen": e["first_seen"].isoformat(),
                "last_seen": e["last_seen"].isoformat(),
            }
            for e in events
        ],
    }


def window_report() -> Any:
    """A capability window of three categories, one without a paired difference."""
    from evals.stats.capability_paired import PairedResult
    from monitor.judging.capability import Rate, WindowReport

    rates = {
        "coding": {"base": Rate(40, 50, 0.67, 0.88), "fast": Rate(31, 50, 0.48, 0.74)},
        "long_tail/multi_step_debugging": {
            "base": Rate(9, 10, 0.6, 0.98),
            "fast": Rate(9, 10, 0.6, 0.98),
        },
        "tools": {"base": Rate(0, 0, None, None), "fast": Rate(3, 4, 0.3, 0.95)},
    }
    results = [
        PairedResult("coding", 25, 50, 50, 0.62, 0.8, -18.0, 0.01, 0.02, 12.5, 0.05),
        PairedResult(
            "long_tail/multi_step_debugging", 5, 10, 10, 0.9, 0.9, 0.0, 1.0, None, None, 0.05
        ),
        PairedResult("tools", 0, 4, 0, None, None, None, None, None, None, 0.05),
    ]
    return WindowReport(
        runs=7,
        results=results,
        advice={},
        rates=rates,
        benchmarks={},
        tools=None,
        schema_valid={},
        errors={},
    )


# What pair00 lacks, so every figure is built: a load probe's levels, downgrades, pass rates.
_STAT = {"n": 8, "too_small": False, "p50": 100.0, "p90": 150.0, "p95": 160.0, "p99": 170.0}
_LEVEL = {"n": 8, "n_ok": 8, "ttft_ms": _STAT, "e2e_ms": {**_STAT, "p95": 900.0}}
LOAD = {"run": 7, "levels": {str(c): {"fast": _LEVEL, "base": _LEVEL} for c in (1, 4, 16)}}


def _with_downgrades(row: dict[str, Any], i: int) -> dict[str, Any]:
    tiers = row["summary"]["tiers"]
    fast = {
        **tiers["fast"],
        "pass_rate": 0.25 * (i % 5),
        "n_tested": 4,
        "served_tier": {"downgrade_rate": 0.1 * (i % 3), "n_reported": 6},
    }
    return {**row, "summary": {**row["summary"], "tiers": {**tiers, "fast": fast}}}


def build(inputs: dict[str, Any]) -> dict[str, Any]:
    """Every chart of the pair, speed, verdict and worse pages (title, div height, parsed
    figure) by page and DOM id."""
    from monitor import selectors
    from monitor.models import RunStatus
    from monitor.web.pair_charts import pair_charts
    from monitor.web.speed_charts import speed_charts
    from monitor.web.verdict_charts import verdict_charts
    from monitor.web.worse_charts import worse_charts

    sim = inputs["simulated"]
    audits = [_run(r) for r in inputs["audit_runs"]]
    latest = next((r for r in audits if r.status == RunStatus.DONE and r.summary_obj.verdict), None)
    events = [
        {
            **e,
            "first_seen": datetime.fromisoformat(e["first_seen"]),
            "last_seen": datetime.fromisoformat(e["last_seen"]),
        }
        for e in inputs["events"]
    ]
    charts = {
        "pair": pair_charts([_run(r) for r in inputs["trend_runs"]], simulated=sim),
        "speed": list(
            speed_charts(inputs["speed_report"], [_run(r) for r in inputs["speed_runs"]]).values()
        ),
        "verdict": verdict_charts(
            latest.summary_obj.verdict if latest else None,
            selectors.verdict_history(audits),
            None,
            events,
            simulated=sim,
        ),
        "worse": worse_charts(window_report()),
        "pair_more": pair_charts(
            [_run(_with_downgrades(r, i)) for i, r in enumerate(inputs["trend_runs"])],
            simulated=sim,
        ),
        "speed_load": list(
            speed_charts(
                {**inputs["speed_report"], "load": LOAD},
                [_run(r) for r in inputs["speed_runs"][:3]],
            ).values()
        ),
    }
    return {
        page: {
            c.id: {
                "title": c.title,
                "height": getattr(c, "height", None),
                "figure": json.loads(c.json),
            }
            for c in cs
        }
        for page, cs in charts.items()
    }


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")
    django.setup()
    DATA.mkdir(exist_ok=True)
    if sys.argv[1] == "capture":
        INPUTS.write_text(json.dumps(capture(), indent=None, sort_keys=True))
    else:
        GOLDEN.write_text(json.dumps(build(json.loads(INPUTS.read_text())), sort_keys=True))
