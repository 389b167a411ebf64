"""What a finished run leaves behind for good: one rollup row per tier (counts, errors, goodput,
TTFT/E2E sketches, tokens billed, and per case the capability outcomes) and the model ids /
fingerprints its endpoints returned.

Written once, when the run is summarised (``record_run``), so the SLA report, the verdict page
and the "Is it worse?" page read a few small rows instead of scanning samples, and keep working
after ``monitor.derived.retention`` has emptied old sample payloads. Rows in, rows out: the builders
take dicts with the Sample field names (``case__key``/``case__category`` for the case), so the
backfill migrations can use them too.

``cases`` of a tier's rollup, one entry per case key (what ``monitor.judging.capability``
and the budget read; short keys because a capability run has a thousand cases):

- ``c`` category, ``in``/``out`` the largest prompt / output tokens of the case's answers
  (output: the vendor's count, else our estimate), for every case;
- for a checked case (``tests_passed`` set, batch 0): ``k`` the check's kind, ``n`` answers
  checked, ``p`` passed, ``e`` error classes counted, ``f`` the class of a failed answer
  (``failed_class``: "tests_failed"/"constraint_broken"/"check_failed" when the check named
  none), and for tool-call cases ``t``: per answer
  ``[repetition, correct, called, n_calls, n_schema_valid, error]``; for an agent task
  (``monitor.runs.episodes``: its outcome is on its episode's last sample) ``r``, the most
  requests one of its episodes took (the budget's estimate for the next runs), and ``a``:
  ``[episodes, requests, prompt tokens, output tokens, model ms]`` summed over its scored
  episodes, checked or not (the cost and time per task on the "Is it worse?" page).
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import BigIntegerField, Case, F, Value, When
from django.db.models.functions import Greatest, Least

from evals import sketch
from evals.client import RETRIED_MARKER
from evals.served import counts_for_tier
from monitor.models import Endpoint, ProvenanceEvent, Run, RunKind, RunRollup, RunStatus

log = logging.getLogger(__name__)

ROLLUP_FIELDS = (
    "tier",
    "endpoint_id",
    "ok",
    "error_class",
    "ttft_ms",
    "e2e_ms",
    "tests_passed",
    "model_id",
    "system_fingerprint",
    "started_at",
    "served_tier",
    "headers",
    "prompt_tokens",
    "completion_tokens",
    "estimated_tokens",
    "cached_tokens",
    "case__key",
    "case__category",
    "batch",
    "repetition",
    "tests_detail",
)
FAILED_AS = {"unit_tests": "tests_failed", "constraints": "constraint_broken"}


def failed_class(kind: str | None, error: str | None = None) -> str:
    """The one name of a failed check's class, on every page: the check's own error class
    when it named one, else its kind's ("tests_failed", "constraint_broken"), else
    "check_failed". Why one function: the worse page said ``tests_failed`` and the sample
    page ``failed`` for the same answer."""
    return error or FAILED_AS.get(kind or "", "check_failed")


PROVENANCE = (("model_id", "model_id"), ("system_fingerprint", "fingerprint"))


def _get(row: Any, name: str) -> Any:
    """A field of a ``values()`` row, or of a ``Sample`` (following ``case__key`` to its case)."""
    if isinstance(row, dict):
        return row[name]
    for part in name.split("__"):
        row = getattr(row, part)
    return row


def slo_of(slo_ttft_ms: float | None, slo_e2e_ms: float | None) -> dict[str, float]:
    return {k: v for k, v in (("ttft_ms", slo_ttft_ms), ("e2e_ms", slo_e2e_ms)) if v}


def _met(row: Any, slo: dict[str, float]) -> bool:
    """Goodput's per-request test (``evals.latency.goodput``): ok and every SLO value met."""
    return bool(_get(row, "ok")) and all(
        _get(row, k) is not None and _get(row, k) <= limit for k, limit in slo.items()
    )


def tier_rollups(
    samples: Iterable[Any],
    slo: dict[str, float],
    expected: dict[int, str] | None = None,
    include_downgraded: bool = True,
) -> dict[str, dict[str, Any]]:
    """Per tier: the RunRollup field values of these samples. The capability figures
    (``n_tested``, ``n_passed``, ``cases``) count only the samples ``evals.served`` keeps for
    the tier (``expected``: endpoint id → its expected tier); every other figure counts all."""
    by_tier: dict[str, list[Any]] = defaultdict(list)
    for s in samples:
        by_tier[_get(s, "tier")].append(s)
    out = {}
    for tier, rows in by_tier.items():
        ok = [s for s in rows if _get(s, "ok")]
        failed = [s for s in rows if not _get(s, "ok")]
        errors = Counter(str(_get(s, "error_class") or "unknown") for s in failed)
        gated = [
            s
            for s in rows
            if counts_for_tier(
                _get(s, "served_tier"),
                (expected or {}).get(_get(s, "endpoint_id"), ""),
                include_downgraded=include_downgraded,
            )
        ]
        tested = [_get(s, "tests_passed") for s in gated if _get(s, "tests_passed") is not None]
        out[tier] = {
            "endpoint_id": _get(rows[0], "endpoint_id"),
            "n": len(rows),
            "n_ok": len(ok),
            "rate_limited": errors.get("rate_limited", 0),
            "errors": dict(sorted(errors.items())),
            "ttft_sketch": sketch.sketch(_get(s, "ttft_ms") for s in ok),
            "e2e_sketch": sketch.sketch(_get(s, "e2e_ms") for s in ok),
            "goodput_met": sum(_met(s, slo) for s in rows) if slo else 0,
            "n_tested": len(tested),
            "n_passed": sum(bool(t) for t in tested),
            # the tier each successful request reported ("" = none): evals.latency.downgrades
            "served": dict(sorted(Counter(str(_get(s, "served_tier") or "") for s in ok).items())),
            "retried": sum(RETRIED_MARKER in (_get(s, "headers") or {}) for s in rows),
            **billed_tokens(rows),
            "cases": case_outcomes(gated),
        }
    return out


def output_tokens(row: Any) -> int | None:
    """The vendor's completion count, else our tokenizer estimate (``monitor.runs.budget``)."""
    done = _get(row, "completion_tokens")
    return done if done is not None else _get(row, "estimated_tokens")


def billed_tokens(rows: Iterable[Any]) -> dict[str, int]:
    """Token sums over the answers the vendor reported a prompt count for: cost is linear in
    them, so ``budget.sample_cost`` of the sums is the run's cost at the endpoint's prices."""
    out = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0}
    for r in rows:
        prompt = _get(r, "prompt_tokens")
        if prompt is None:
            continue  # failed before usage: nothing billed that we can see
        out["prompt_tokens"] += prompt
        out["completion_tokens"] += output_tokens(r) or 0
        out["cached_tokens"] += min(_get(r, "cached_tokens") or 0, prompt)
    return out


def case_outcomes(rows: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """The ``cases`` map of one tier (module docstring)."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        entry = out.setdefault(_get(r, "case__key"), {"c": _get(r, "case__category")})
        for name, value in (("in", _get(r, "prompt_tokens")), ("out", output_tokens(r))):
            if value is not None:
                entry[name] = max(entry.get(name, 0), value)
        passed = _get(r, "tests_passed")
        detail = _get(r, "tests_detail") or {}
        if detail.get("kind") == "agent" and "requests" in detail and not _get(r, "batch"):
            entry["r"] = max(entry.get("r", 0), detail["requests"])
            spent = entry.setdefault("a", [0, 0, 0, 0, 0.0])
            for i, name in enumerate(("requests", "prompt_tokens", "output_tokens", "model_ms")):
                spent[i + 1] += detail.get(name) or 0
            spent[0] += 1
        if passed is None or _get(r, "batch"):
            continue
        kind, error = detail.get("kind"), detail.get("error_class")
        entry["k"] = kind
        entry["n"] = entry.get("n", 0) + 1
        entry["p"] = entry.get("p", 0) + bool(passed)
        if error:
            entry.setdefault("e", {})[error] = entry.get("e", {}).get(error, 0) + 1
        if not passed and "f" not in entry:
            entry["f"] = failed_class(kind, error)
        if kind == "tool_call":
            entry.setdefault("t", []).append(
                [
                    _get(r, "repetition"),
                    bool(passed),
                    bool(detail.get("called")),
                    detail.get("n_calls", 0),
                    detail.get("n_schema_valid", 0),
                    error,
                ]
            )
    return out


def provenance_counts(samples: Iterable[Any]) -> dict[tuple[int, str, str], list]:
    """(endpoint id, kind, value) → [first seen, last seen, count] over these samples."""
    out: dict[tuple[int, str, str], list] = {}
    for s in samples:
        for field, kind in PROVENANCE:
            value = _get(s, field)
            if not value:
                continue
            at: datetime = _get(s, "started_at")
            seen = out.setdefault((_get(s, "endpoint_id"), kind, value), [at, at, 0])
            seen[0], seen[1], seen[2] = min(seen[0], at), max(seen[1], at), seen[2] + 1
    return out


def upsert_provenance(counts: dict[tuple[int, str, str], list], run_id: int | None) -> None:
    """Add a run's counts: first_seen only moves earlier (and then names this run), last_seen
    only later. get_or_create retries the read when another worker created the row first."""
    for (endpoint_id, kind, value), (first, last, n) in counts.items():
        row, created = ProvenanceEvent.objects.get_or_create(
            endpoint_id=endpoint_id,
            kind=kind,
            value=value[:200],
            defaults={"first_seen": first, "last_seen": last, "count": n, "run_id": run_id},
        )
        if not created:
            ProvenanceEvent.objects.filter(pk=row.pk).update(
                count=F("count") + n,
                run_id=Case(
                    When(first_seen__gt=first, then=Value(run_id)),
                    default=F("run_id"),
                    output_field=BigIntegerField(),
                ),
                first_seen=Least("first_seen", Value(first)),
                last_seen=Greatest("last_seen", Value(last)),
            )


def record_run(*, run: Run, samples: Sequence[Any] | None = None) -> list[RunRollup]:
    """Write the run's rollups (replacing any from an earlier summarise) and, the first time
    only, add its samples to the provenance events. ``samples`` default: read from the run."""
    if samples is None:
        samples = list(run.samples.values(*ROLLUP_FIELDS))
    pair = run.pair
    slo = slo_of(pair.slo_ttft_ms, pair.slo_e2e_ms)
    # capability counts the samples served on the tier bought (evals.served), as the pair was
    # set when the run ended
    expected = dict(
        Endpoint.objects.filter(id__in=(pair.fast_id, pair.base_id)).values_list(
            "id", "expected_tier"
        )
    )
    keep_all = pair.include_downgraded
    with transaction.atomic():
        replaced, _ = RunRollup.objects.filter(run=run).delete()
        rows = RunRollup.objects.bulk_create(
            [
                RunRollup(
                    run=run,
                    pair_id=run.pair_id,
                    tier=tier,
                    kind=run.kind,
                    trigger=run.trigger,
                    at=run.created_at,
                    **values,
                )
                for tier, values in sorted(tier_rollups(samples, slo, expected, keep_all).items())
            ]
        )
        if not replaced:
            upsert_provenance(provenance_counts(samples), run.id)
    return rows


def record_run_safely(*, run_id: int) -> None:
    """For a failed run: its samples still count in availability; never raise from here."""
    try:
        record_run(run=Run.objects.select_related("pair").get(id=run_id))
    except Exception:
        log.exception("rollups of run %s not written", run_id)


def window_sketches(since: datetime) -> dict[tuple[int, str], dict[str, dict[str, int]]]:
    """(pair id, tier) → {"ttft": counts, "e2e": counts}: the sketches of the done probes
    (what the overview's windowed P95 merges) that started since ``since``, merged. One query
    and no samples, so ``/metrics`` can export the window's percentiles that a single probe
    is too small for."""
    merged: dict[tuple[int, str], dict[str, dict[str, int]]] = {}
    rows = RunRollup.objects.filter(
        kind=RunKind.PROBE, at__gte=since, run__status=RunStatus.DONE
    ).values_list("pair_id", "tier", "ttft_sketch", "e2e_sketch")
    for pair_id, tier, *sketches in rows:
        into = merged.setdefault((pair_id, tier), {"ttft": {}, "e2e": {}})
        for name, counts in zip(("ttft", "e2e"), sketches, strict=True):
            for key, n in (counts or {}).items():
                into[name][key] = into[name].get(key, 0) + n
    return merged
