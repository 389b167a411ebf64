"""The verdict page of a pair and the per-case diff viewer.

The verdict page reads the stored verdicts of the pair's audit runs (their summaries' verdict
block) and the pair's stored evidence and CUSUM state; it never recomputes a test. The diff
viewer reads one run's samples of one case: base and fast side by side, the first divergence
marked, the top logprobs there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from evals.logprobs import logprob_gap
from evals.similarity import DEFAULT_PREFIX_K, first_divergence, indel_ratio
from evals.stats import error_budget
from evals.stats.labels import LABEL_WORDS
from monitor import selectors
from monitor.derived import evidence, rebaseline, tripwire
from monitor.derived.tripwire import REFERENCE_RUNS
from monitor.models import Run, RunKind, RunStatus, Sample, TripwireState
from monitor.runs import budget
from monitor.runs.steps import RunAlreadyQueued
from monitor.tasks import enqueue_run
from monitor.web import page_figures
from monitor.web.access import ADD_RUN, CHANGE_ALERT, VIEW_RUN, VIEW_SAMPLE, requires
from monitor.web.htmx import render_page, wants_fragment
from monitor.web.verdict_charts import fmt_stat
from monitor.web.worse import usd

MAX_DIVERGENCES_SHOWN = 40
LABEL_MEANING = {
    "no_detectable_difference": (
        "This run found no difference between the tiers' outputs. That is not proof of the "
        "same model: the run had 80% power only for differences above the MMD² named."
    ),
    "outputs_differ": (
        "The two tiers' output distributions differ on these prompts. The test does not say "
        "why (another model, quantization, kernels, a system prompt): the evidence is below."
    ),
    "capability_difference": (
        "This run's own unit tests pass at different rates on the two tiers, beyond chance."
    ),
    "inconclusive": "This run cannot support a statement; the reasons are below.",
}
SERIES_LABELS = {
    "ttft_p50:fast": "TTFT P50, fast (log ms)",
    "ttft_p50:base": "TTFT P50, base (log ms)",
    "similarity:fast_vs_base": "similarity fast vs base (temperature 0)",
    "ttft_ratio:fast_vs_base": "TTFT P50 ratio fast / base (log)",
}


def _pct(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}%"


def _capability_rows(cap: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not cap:
        return None
    groups = sorted({g for t in cap["pass_at_1"].values() for g in t}, key=lambda g: g != "all")
    pass1 = [
        (g, [_pct(cap["pass_at_1"].get(t, {}).get(g), 0) for t in ("fast", "base")]) for g in groups
    ]
    return {**cap, "pass1_rows": pass1}


def _t0_rows(t0: Mapping[str, Any] | None) -> list[tuple[str, list[str], bool]]:
    """Fast vs base beside the base-vs-base floor, formatted (never recomputed)."""
    rows = []
    for key, label in (("fast_vs_base", "fast vs base"), ("base_vs_base", "base vs base (floor)")):
        s = (t0 or {}).get(key) or {}
        if not s.get("n"):
            rows.append((label, ["0", "—", "—", "—", "—"], True))
            continue
        div = s.get("first_divergence_p50")
        rows.append(
            (
                label,
                [
                    str(s["n"]),
                    _pct(s.get("median_ratio")),
                    _pct(s.get("exact_match_rate"), 0),
                    _pct(s.get("prefix_match_rate"), 0),
                    "—" if div is None else f"{div:,.0f} chars",
                ],
                key == "base_vs_base",
            )
        )
    return rows


def _drift(pair) -> dict[str, Any]:
    """The pair's stored CUSUM state as of its latest probe, and its frozen baseline."""
    probe = selectors.newest_trend_run(pair)
    block = probe.summary_obj.drift if probe else None
    baseline = evidence.active_baseline(pair)
    rows = []
    if block is not None:
        for key, s in block.series.items():
            rows.append(
                {
                    "label": SERIES_LABELS.get(key, key),
                    "z": fmt_stat(s.z),
                    "s": fmt_stat(s.s),
                    "alarm": key in block.drifting,
                }
            )
    return {
        "block": block,
        "rows": rows,
        "baseline": baseline,
        "probe": probe,
        "h": fmt_stat(block.h) if block and block.h is not None else None,
        "budget": evidence.budget_words(pair, RunKind.PROBE),
        "share": error_budget.share_words("drift"),
    }


def _tripwire(pair) -> dict[str, Any] | None:
    """Per tier its tripwire's newest state (collecting its reference, tested, skipped and
    why), fast vs base beside its floor, and which tier fired and the audit it triggered."""
    state = TripwireState.objects.filter(pair=pair).first()
    if state is None:
        return None
    rows = []
    for tier in ("fast", "base"):
        block = state.tiers.get(tier) or {}
        last = block.get("last") or {}
        rows.append(
            {
                "tier": tier,
                "skipped": block.get("skipped", ""),
                "collecting": last.get("collecting", False),
                "reference_runs": block.get("reference_runs", 0),
                "reference_of": block.get("reference_of", REFERENCE_RUNS),
                "last": last,
                "alarmed": (block.get("eprocess") or {}).get("alarmed", False),
                "border": block.get("mode") == "border",
                "found": block.get("border"),
            }
        )
    return {
        "state": state,
        "rows": rows,
        "cross": state.cross,
        "probe": tripwire.escalated_probe(state),
    }


def _context(pair) -> dict[str, Any]:
    runs = selectors.audit_runs(pair)
    latest = next((r for r in runs if r.status == RunStatus.DONE and r.summary_obj.verdict), None)
    verdict = latest.summary_obj.verdict if latest else None
    history = selectors.verdict_history(runs)
    for h in history:
        h["label_words"] = LABEL_WORDS.get(h["label"], h["label"])
    t0 = verdict.t0 if verdict else None
    divergences = [
        {**d, "ratio_pct": _pct(d.get("ratio"))}
        for d in ((t0 or {}).get("divergences") or [])[:MAX_DIVERGENCES_SHOWN]
    ]
    events = selectors.endpoint_events(endpoints=[pair.fast, pair.base])
    simulated = pair.simulated
    state = evidence.state_of(pair)
    return {
        "pair": pair,
        "simulated": simulated,
        "latest": latest,
        # the verdict is one audit's: its cost (rollups' tokens at the endpoints' prices)
        "verdict_cost": usd(budget.runs_costs(pair, [latest])[latest.id]) if latest else None,
        "verdict": verdict.data if verdict else None,
        "meaning": LABEL_MEANING.get(verdict.label if verdict else "", ""),
        "capability": _capability_rows(verdict.capability if verdict else None),
        "t0_rows": _t0_rows(t0),
        "t0_default_temperature": list((t0 or {}).get("default_temperature") or []),
        "divergences": divergences,
        "prefix_k": DEFAULT_PREFIX_K,
        "reject_wealth": f"{1 / (verdict.alpha if verdict else 0.05):g}",
        "charts": page_figures.figures("verdict", pair),
        "history": list(reversed(history)),
        "drift": _drift(pair),
        "tripwire": _tripwire(pair),
        "evidence": evidence.eprocess_state(state),
        "evidence_threshold": evidence.eprocess_threshold(pair),
        "audit_budget": evidence.budget_words(pair, RunKind.AUDIT),
        "monitor_state": state,
        "events": events,
        "audits": runs[:10],
        "polling": selectors.has_active_run(runs),
        # A done audit without a stored verdict: its run.verdict says why (an error).
        "unverdicted": next(
            (r for r in runs if r.status == RunStatus.DONE and not r.summary_obj.verdict), None
        ),
    }


@requires(VIEW_RUN)
@require_GET
def verdict_page(request: HttpRequest, name: str) -> HttpResponse:
    pair = selectors.get_pair_for_user(request.user, name)
    return render_page(request, "monitor/verdict.html", "live", _context(pair))


def _refused(request: HttpRequest, pair, exc: RunAlreadyQueued) -> HttpResponse:
    """As the pair page's: the waiting audit and why (fragment 200 for htmx, full page 409)."""
    context = {**_context(pair), "queued": exc.run, "refused": str(exc)}
    response = render_page(request, "monitor/verdict.html", "live", context)
    if not wants_fragment(request):
        response.status_code = 409
    return response


@requires(ADD_RUN)
@require_POST
def run_audit(request: HttpRequest, name: str) -> HttpResponse:
    """Queue an audit run of the pair now (the scheduled ones run every few hours)."""
    pair = selectors.get_pair_for_user(request.user, name)
    try:
        run = enqueue_run(pair=pair, kind=RunKind.AUDIT)
    except RunAlreadyQueued as exc:
        return _refused(request, pair, exc)
    if not wants_fragment(request):
        return redirect("verdict:page", name=pair.name)
    return render(request, "monitor/verdict.html#live", {**_context(pair), "queued": run})


@requires(CHANGE_ALERT)
@require_POST
def acknowledge(request: HttpRequest, name: str) -> HttpResponse:
    """Acknowledge a change and re-baseline: the pair's evidence, CUSUM and tripwires
    restart, and a new baseline is frozen from the probes after now."""
    pair = selectors.get_pair_for_user(request.user, name)
    rebaseline.rebaseline(pair=pair, user=request.user)  # and its trace in the audit log
    return redirect("verdict:page", name=pair.name)


# --- the diff viewer --------------------------------------------------------------------------


def _split(text: str, pos: int | None) -> dict[str, Any]:
    """The text cut at the divergence: common prefix, the first differing character, rest."""
    if pos is None:
        return {"prefix": text, "char": "", "rest": "", "ended": False}
    return {
        "prefix": text[:pos],
        "char": text[pos : pos + 1],
        "rest": text[pos + 1 :],
        "ended": pos >= len(text),
    }


def _column(title: str, sample: Sample | None, pos: int | None) -> dict[str, Any] | None:
    if sample is None:
        return None
    return {
        "title": title,
        "sample": sample,
        "parts": _split(sample.text, pos),
        "length": len(sample.text),
    }


@requires(VIEW_SAMPLE)
@require_GET
def diff_view(request: HttpRequest, run_id: int, case_key: str) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("pair__fast", "pair__base"), pk=run_id)
    samples = selectors.case_samples(run, case_key)
    if not samples:
        raise Http404(f"run {run_id} has no successful sample of case {case_key!r}")
    by = {(s.tier, s.batch, s.repetition): s for s in samples}
    reps = sorted({s.repetition for s in samples if s.tier == "fast"})
    try:
        rep = int(request.GET.get("rep", reps[0] if reps else 0))
    except ValueError:
        raise Http404("rep must be a number") from None
    base, fast = by.get(("base", 0, rep)), by.get(("fast", 0, rep))
    other_rep = 1 if rep == 0 else 0
    noise = by.get(("base", 1, rep)) or by.get(("base", 0, other_rep))
    pos = first_divergence(base.text, fast.text) if base and fast else None
    noise_pos = first_divergence(base.text, noise.text) if base and noise else None
    context = {
        "run": run,
        "pair": run.pair,
        "case": samples[0].case,
        "simulated": run.pair.simulated,
        "rep": rep,
        "reps": reps,
        "pos": pos,
        "noise_pos": noise_pos,
        "ratio": indel_ratio(base.text, fast.text) if base and fast else None,
        "noise_ratio": indel_ratio(base.text, noise.text) if base and noise else None,
        "columns": [
            c
            for c in (
                _column("base", base, pos),
                _column("fast", fast, pos),
            )
            if c
        ],
        "noise": _column("base, independent draw (noise floor)", noise, noise_pos),
        "gap": (
            logprob_gap(base.logprobs, fast.logprobs, pos)
            if base and fast and pos is not None
            else None
        ),
        "has_logprobs": bool(base and base.logprobs) or bool(fast and fast.logprobs),
    }
    return render(request, "monitor/diff.html", context)
