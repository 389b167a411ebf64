"""Page 1 of the SLA report: per pair the answers a lead takes to the vendor.

Why a module of its own: the report's tables (``monitor.reporting.sla``) are accounting per
endpoint; a lead reading it needs first *is the fast tier the same model?* (the period's audit
verdicts and the e-detector across them), *is it as fast as claimed?* (the speed-up with its
interval against the claim, as ``monitor.judging.speed_window`` judges it) and *was it up and
on the tier bought?* (availability, downgrades, goodput). Everything is read from what runs
stored: the audits' verdict blocks (each carrying the e-detector's decision as of that audit,
``monitor.derived.evidence``), the period's rollups, and the speed window; nothing is retested.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from evals.claims import METRICS
from evals.latency import availability, downgrades
from evals.records import TIERS
from evals.stats.labels import LABEL_WORDS
from monitor.judging import speed_window
from monitor.models import Pair, Run, RunKind, RunRollup, RunStatus
from monitor.templatetags.people import evidence  # the pages' wording of an e-value


@dataclass
class SameModel:
    """The period's audits of one pair: how many, their labels, the newest one's sentence,
    and the e-detector across audits (alarmed during the period or not, and its evidence)."""

    audits: int = 0
    labels: dict[str, int] = field(default_factory=dict)  # label words → audits
    newest_label: str = ""  # e.g. "outputs_differ"
    newest_words: str = ""
    newest_sentence: str = ""
    newest_at: datetime | None = None
    newest_run_id: int | None = None
    alarmed: bool = False  # the e-detector was alarmed at any audit of the period
    alarm_run_id: int | None = None  # the first audit of the period found alarmed
    detector: float | None = None  # after the period's newest audit
    threshold: float | None = None


@dataclass
class PairAnswers:
    name: str
    simulated: bool
    same_model: SameModel
    availability: dict[str, float | None]  # per tier, 429s out of both (evals.latency)
    requests: dict[str, int]
    downgrade_rate: float | None  # fast tier, over requests reporting a tier
    n_tier_reported: int
    goodput: dict[str, float | None]  # per tier, from the report's pair rows
    claimed: str | None  # the claim in the vendor's words, e.g. "2.5× output tok/s"
    speed: dict[str, Any]  # speed_window.words: line, claim, tone
    scenarios: list[speed_window.ScenarioSpeed]
    speed_runs: int = 0
    metric: str = "E2E"  # the speed-ups' metric, in words (evals.claims.METRICS)


def same_models(pair_ids: list[int], start: datetime, end: datetime) -> dict[int, SameModel]:
    """Pair id → its period's audits, from one query over all pairs."""
    rows = (
        Run.objects.filter(
            pair_id__in=pair_ids,
            kind=RunKind.AUDIT,
            status=RunStatus.DONE,
            created_at__gte=start,
            created_at__lt=end,
        )
        .order_by("created_at", "id")
        .values_list("pair_id", "id", "finished_at", "summary__verdict")
    )
    out = {pid: SameModel() for pid in pair_ids}
    labels: dict[int, Counter[str]] = {pid: Counter() for pid in pair_ids}
    for pair_id, run_id, finished_at, verdict in rows:
        if not verdict or not verdict.get("label"):
            continue
        s = out[pair_id]
        s.audits += 1
        label = verdict["label"]
        labels[pair_id][LABEL_WORDS.get(label, label)] += 1
        s.newest_label, s.newest_words = label, LABEL_WORDS.get(label, label)
        s.newest_sentence = verdict.get("sentence", "")
        s.newest_at, s.newest_run_id = finished_at, run_id
        monitor = verdict.get("monitor") or {}
        if monitor:
            s.detector, s.threshold = monitor.get("detector"), monitor.get("threshold")
            if monitor.get("alarm") and not s.alarmed:
                s.alarmed, s.alarm_run_id = True, run_id
    for pid, s in out.items():
        s.labels = dict(labels[pid].most_common())
    return out


def _tiers(pair_ids: list[int], start: datetime, end: datetime) -> dict[tuple[int, str], Any]:
    """(pair id, tier) → requests, successes, 429s and reported tiers over the period's
    rollups (probes and audits; load probes left out, as the endpoint tables count); one
    query over all pairs."""
    out: dict[tuple[int, str], dict[str, Any]] = {
        (pid, t): {"n": 0, "ok": 0, "limited": 0, "served": Counter()}
        for pid in pair_ids
        for t in TIERS
    }
    rollups = (
        RunRollup.objects.filter(pair_id__in=pair_ids, at__gte=start, at__lt=end, tier__in=TIERS)
        .exclude(kind=RunKind.LOAD)
        .values_list("pair_id", "tier", "n", "n_ok", "errors", "served")
    )
    for pair_id, tier, n, ok, errors, served in rollups:
        t = out[(pair_id, tier)]
        t["n"] += n
        t["ok"] += ok
        t["limited"] += (errors or {}).get("rate_limited", 0)
        t["served"].update(served or {})
    return out


def pair_claim(pair: Pair) -> speed_window.PairClaim:
    """The pair's claim in the vendor's metric and form, and its gating choice, as the speed
    window reads them."""
    return speed_window.PairClaim(pair.claim, pair.include_downgraded)


def pair_answers(
    start: datetime, end: datetime, goodput: dict[str, dict[str, float | None]]
) -> list[PairAnswers]:
    """The answers for every pair that ran in [start, end); ``goodput``: pair name → per tier
    goodput, from the report's pair rows (``sla._pair_rows``), so both pages say one number."""
    pair_ids = set(
        Run.objects.filter(created_at__gte=start, created_at__lt=end)
        .exclude(kind=RunKind.LOAD)
        .values_list("pair_id", flat=True)
    )
    pairs = list(
        Pair.objects.filter(pk__in=pair_ids).select_related("fast", "base").order_by("name")
    )
    claims = {p.pk: pair_claim(p) for p in pairs}
    speeds = speed_window.window_speedups(claims) if pairs else {}
    ids = [p.pk for p in pairs]
    counts, verdicts = _tiers(ids, start, end), same_models(ids, start, end)
    out = []
    for pair in pairs:
        tiers = {t: counts[(pair.pk, t)] for t in TIERS}
        served = downgrades(tiers["fast"]["served"].elements(), pair.fast.expected_tier)
        speed = speeds[pair.pk]
        out.append(
            PairAnswers(
                name=pair.name,
                simulated=pair.simulated,
                same_model=verdicts[pair.pk],
                availability={
                    t: availability(v["ok"], v["n"], v["limited"])["availability_excl_rate_limited"]
                    for t, v in tiers.items()
                },
                requests={t: v["n"] for t, v in tiers.items()},
                downgrade_rate=served["downgrade_rate"],
                n_tier_reported=served["n_reported"],
                goodput=goodput.get(pair.name, {}),
                claimed=pair.claim.text() if pair.claim else None,
                speed=speed_window.words(speed, pair.claim),
                scenarios=[s for s in speed.scenarios if s.estimate is not None],
                speed_runs=speed.runs,
                metric=METRICS[speed.metric],
            )
        )
    return out


# Words ---------------------------------------------------------------------------------------


def _pct(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def same_model_words(s: SameModel) -> tuple[str, str]:
    """(the answer, the e-detector across the period's audits), in a lead's words."""
    if not s.audits:
        return "no audit with a verdict in this period", "e-detector: no audit to add"
    when = f"{s.newest_at:%Y-%m-%d %H:%M} UTC" if s.newest_at else "-"
    counts = ", ".join(f"{n} {words}" for words, n in s.labels.items())
    answer = (
        f"{s.newest_words} (newest audit #{s.newest_run_id}, {when}; "
        f"{s.audits} audit{'s' * (s.audits != 1)} this period: {counts})"
    )
    if s.alarmed:
        detector = (
            "e-detector ALARM: the audits together say the outputs differ "
            f"(from audit #{s.alarm_run_id})"
        )
    elif s.detector is not None:
        detector = f"e-detector: no alarm, {evidence(s.detector, s.threshold)}"
    else:
        detector = "e-detector: not yet folded"
    return answer, detector


def speed_words(a: PairAnswers) -> list[str]:
    """The speed-up line, the claim's verdict, and one line per scenario with its interval."""
    lines = [a.speed["line"], a.speed["claim"] or "no claim stated"]
    for s in a.scenarios:
        interval = f"[{s.low:.2f}, {s.high:.2f}]" if s.low is not None else "(no interval: n < 20)"
        claim = f"; claim: {s.claim}" if s.claim else ""
        lines.append(f"{s.scenario}: {s.estimate:.2f}× {a.metric} {interval}, n = {s.n}{claim}")
    return lines


def answer_rows(answers: list[PairAnswers]) -> list[dict[str, Any]]:
    """Display dicts of ``pair_answers`` for the HTML, PDF and text renderings."""
    rows = []
    for a in answers:
        same, detector = same_model_words(a.same_model)
        rows.append(
            {
                "pair": a.name + (" (simulated)" if a.simulated else ""),
                "label": a.same_model.newest_label or "none",
                "same_model": same,
                "detector": detector,
                "alarmed": a.same_model.alarmed,
                "speed": speed_words(a),
                "tone": a.speed["tone"],
                "availability": " · ".join(
                    f"{t} {_pct(a.availability[t])} (n = {a.requests[t]})" for t in TIERS
                ),
                "downgrades": (
                    f"fast tier: {_pct(a.downgrade_rate, 1)} of {a.n_tier_reported} requests "
                    "reporting a tier"
                    if a.downgrade_rate is not None
                    else "fast tier: no expected tier set or none reported"
                ),
                "goodput": " · ".join(f"{t} {_pct(a.goodput.get(t), 1)}" for t in TIERS)
                if any(a.goodput.get(t) is not None for t in TIERS)
                else "no SLO set on the pair",
            }
        )
    return rows


APPENDIX = [
    (
        "verdict",
        "what one audit (both tiers sampled at temperature 1 on the same prompts, compared by "
        "the MMD two-sample test of Gao, Liang & Guestrin, ICLR 2025) could and could not "
        "detect: no detectable difference, outputs differ, capability difference, or "
        "inconclusive. It never says 'same model'.",
    ),
    (
        "e-detector",
        "adds up the audits' evidence (each p-value turned into an e-value, Vovk & Wang 2021) "
        "and alarms past a threshold set for at most 0.5 false alarms per pair per quarter "
        "(Shin, Ramdas & Rinaldo 2023). One audit that differs is not an alarm; the "
        "e-detector's alarm is.",
    ),
    (
        "speed-up",
        "median base time / median fast time (E2E), per scenario, over the pair's newest "
        "comparable probe runs at the report's generation, with a 95% cluster-bootstrap "
        "interval over runs; failed requests count as the slowest.",
    ),
    (
        "claim",
        "confirmed when the interval's lower bound reaches the claimed factor, contradicted when "
        "its upper bound is below it, otherwise not yet.",
    ),
]
