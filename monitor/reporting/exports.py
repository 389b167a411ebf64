"""What the CSV/JSON exports and the API hand out: sample, run and speed-up records as flat
mappings with fixed columns.

Columns are listed, never derived from the model, so a new field (a header, a logprob) is not
exported by accident: response headers and error messages stay out (an error message could
quote a request), and texts only when asked for. The export holds no more than the database,
where every value from a vendor or the sandbox was scrubbed of the endpoint's key before it
was stored (``evals.scrub``); keys themselves are never stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from monitor.derived.run_summary import RunSummary
from monitor.judging.speed import METRICS, OTPS
from monitor.models import Pair, Run

SAMPLE_COLUMNS = (
    "id",
    "seq",
    "tier",
    "case",
    "scenario",
    "repetition",
    "batch",
    "turn",  # an agent episode's turn and step (empty and 0 for a one-request case)
    "step",
    "started_at",
    "ok",
    "error_class",
    "http_status",
    "retry_after_s",
    "connect_ms",
    "ttfb_ms",
    "ttft_ms",
    "ttft_answer_ms",
    "e2e_ms",
    "tpot_ms",
    "prompt_tokens",
    "completion_tokens",
    "estimated_tokens",
    "cached_tokens",
    "finish_reason",
    "model_id",
    "system_fingerprint",
    "served_tier",
    "tests_passed",
)
_SAMPLE_SOURCES = {"case": "case__key", "scenario": "case__scenario"}
TEXT_COLUMN = "text"

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula (``=HYPERLINK(...)``, ``+1+1``,
    ``@SUM``; tab and CR too, which some spreadsheets skip before the ``=``) is prefixed with
    ``'``, OWASP's rule for CSV injection: vendor-controlled values (model id, fingerprint,
    served tier, texts) and case keys reach these cells. Numbers are left as numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def sample_columns(include_text: bool = False) -> tuple[str, ...]:
    return SAMPLE_COLUMNS + ((TEXT_COLUMN,) if include_text else ())


def sample_records(run: Run, include_text: bool = False) -> Iterator[dict[str, Any]]:
    """The run's samples in plan order, streamed from the database in chunks."""
    columns = sample_columns(include_text)
    sources = [_SAMPLE_SOURCES.get(c, c) for c in columns]
    rows = run.samples.order_by("seq", "id").values_list(*sources)
    for row in rows.iterator(chunk_size=1000):
        yield dict(zip(columns, row, strict=True))


_TIER_FIGURES = (
    "n",
    "n_ok",
    "availability",
    "error_rate",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "e2e_p50_ms",
    "e2e_p95_ms",
    "tpot_p50_ms",
    "decode_tps_p50",
    "downgrade_rate",
)
RUN_COLUMNS = (
    "id",
    "kind",
    "trigger",
    "status",
    "created_at",
    "finished_at",
    "planned",
    "completed",
    *(f"{tier}_{figure}" for tier in ("fast", "base") for figure in _TIER_FIGURES),
    "speedup_ttft",
    "speedup_e2e",
    "speedup_decode",
    "similarity_fast_vs_base",
    "similarity_base_vs_base",
    "verdict",
)


def run_figures(summary: RunSummary) -> dict[str, Any]:
    """A run's summary figures under flat names (percentiles absent below the run's min n)."""
    out: dict[str, Any] = {}
    for name in ("fast", "base"):
        t = summary.tier(name)
        figures = {
            "n": t.n,
            "n_ok": t.n_ok,
            "availability": t.availability,
            "error_rate": t.error_rate,
            "ttft_p50_ms": t.ttft_ms.p50,
            "ttft_p95_ms": t.ttft_ms.p95,
            "e2e_p50_ms": t.e2e_ms.p50,
            "e2e_p95_ms": t.e2e_ms.p95,
            "tpot_p50_ms": t.tpot_ms.p50,
            "decode_tps_p50": t.decode_tps_p50,
            "downgrade_rate": t.downgrade_rate,
        }
        out.update({f"{name}_{k}": v for k, v in figures.items()})
    sims = {k: summary.similar(k) for k in ("fast_vs_base", "base_vs_base")}
    out.update(
        {
            "speedup_ttft": summary.speedup.ttft,
            "speedup_e2e": summary.speedup.e2e,
            "speedup_decode": summary.speedup.decode,
            **{f"similarity_{k}": s.mean_ratio if s else None for k, s in sims.items()},
            "verdict": summary.verdict.label if summary.verdict else None,
        }
    )
    return out


def run_records(pair: Pair, limit: int = 1000) -> Iterator[dict[str, Any]]:
    """The pair's newest runs (any kind), newest first, each with its summary figures."""
    runs = Run.objects.filter(pair=pair).order_by("-created_at", "-id")[:limit]
    for run in runs.iterator(chunk_size=200):
        yield {
            "id": run.id,
            "kind": run.kind,
            "trigger": run.trigger,
            "status": run.status,
            "created_at": run.created_at,
            "finished_at": run.finished_at,
            "planned": run.planned,
            "completed": run.completed,
            **run_figures(run.summary_obj),
        }


_CI = ("estimate", "low", "high", "n", "status")
SPEEDUP_COLUMNS = (
    "scenario",
    "n_pairs",
    *(f"{key}_{part}" for key, _, _ in METRICS for part in _CI),
    *(f"otps_{key}_{part}" for key, _ in OTPS for part in _CI),
)


def speedup_records(report: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The speed page's per-scenario table (``services.speed.speed_report``): per metric the
    base/fast ratio, its bootstrap CI and its status against the claim."""
    for scn in report["scenarios"]:
        row: dict[str, Any] = {"scenario": scn, "n_pairs": report["n_pairs"].get(scn, 0)}
        for table, keys, prefix in (
            ("speedup", [m[0] for m in METRICS], ""),
            ("otps", [k for k, _ in OTPS], "otps_"),
        ):
            for key in keys:
                ci = report[table].get(scn, {}).get(key) or {}
                row.update({f"{prefix}{key}_{part}": ci.get(part) for part in _CI})
        yield row
