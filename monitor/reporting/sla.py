"""The vendor SLA report, weekly or monthly: per endpoint availability, error budget, latency
percentiles with n, errors by class and the served-tier downgrade rate from the period's run
rollups (``monitor.derived.rollups``, never the samples); per pair goodput against its SLOs,
similarity
and pass rates from the period's rollups and run summaries. Rendered as plain text, CSV or HTML
(emailed), and as PDF with charts (``monitor.reporting.pdf``); the accounting it applies
is stated in ``ACCOUNTING``.

Definitions: availability = successes / requests with 429s left out of both and
counted apart; percentiles only from at least ``settings.TIERWATCH_MIN_N`` values, else
"n too small". The report names endpoints and models only: never base URLs, API keys, or the
names of the environment variables that hold them.
"""

from __future__ import annotations

import csv
import io
import logging
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db.models import Sum
from django.template.loader import render_to_string
from django.utils import timezone

from evals import sketch
from evals.claims import METRICS as CLAIM_METRICS
from evals.latency import availability, downgrades, error_budget, min_n_for
from evals.records import TIERS
from monitor.alerting.transports import render_email
from monitor.derived.rollups import slo_of
from monitor.env import env_list
from monitor.judging.claims import period_claim
from monitor.models import Endpoint, Pair, Run, RunKind, RunRollup
from monitor.reporting import cost_month
from monitor.reporting.exports import safe_cell
from monitor.reporting.sla_answers import APPENDIX, answer_rows, pair_answers
from monitor.runs.budget import priced

logger = logging.getLogger(__name__)

WEEK = re.compile(r"^(\d{4})-W(\d{2})$")
MONTH = re.compile(r"^(\d{4})-(\d{2})$")
QS = (50, 95, 99)
TOO_SMALL = "n too small"


@dataclass
class EndpointRow:
    name: str
    model: str
    simulated: bool
    requests: int = 0
    successes: int = 0
    rate_limited: int = 0
    ttft: dict[str, Any] = field(default_factory=dict)  # evals.sketch.quantiles output
    e2e: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)  # failed samples by class, 429s apart
    retried: int = 0  # re-sent once after a stale pooled connection died (counted once)
    served: dict[str, Any] = field(default_factory=dict)  # evals.latency.downgrades output
    budget: dict[str, Any] = field(default_factory=dict)  # evals.latency.error_budget output
    daily: list[dict[str, Any]] = field(default_factory=list)  # per UTC day, for the charts

    @property
    def availability(self) -> float | None:
        """Successes / requests with 429s out of both, formula in evals.latency."""
        shares = availability(self.successes, self.requests, self.rate_limited)
        return shares["availability_excl_rate_limited"]


@dataclass
class PairRow:
    name: str
    simulated: bool
    runs: int = 0
    similarity_mean: float | None = None  # fast vs base, mean ratio weighted by pairs compared
    similarity_n: int = 0
    pass_rate: dict[str, float | None] = field(default_factory=dict)  # weighted by cases tested
    n_tested: dict[str, int] = field(default_factory=dict)
    slo: dict[str, float] = field(default_factory=dict)  # the pair's TTFT / E2E limits, ms
    goodput: dict[str, float | None] = field(default_factory=dict)  # per tier, errors included
    n_goodput: dict[str, int] = field(default_factory=dict)


@dataclass
class ClaimRow:
    """A pair's claim as the vendor words it, checked over the period, and per ISO week the
    price multiple paid beside the speed-up delivered (``monitor.judging.claims``)."""

    name: str
    simulated: bool
    claim: str  # "2.5× output tok/s", "99 % of requests ≥ 80 tok/s"; "" without a claim
    word: str  # confirmed / contradicted / not yet; "" without a claim
    line: str
    weeks: list[dict[str, Any]] = field(default_factory=list)  # premium_by_week rows
    left_out: int = 0  # downgraded samples left out (evals.served)
    note: str = ""  # the tier never confirmed


@dataclass
class SlaReport:
    week: str
    start: datetime  # Monday 00:00 UTC
    end: datetime  # the next Monday 00:00 UTC (excluded)
    min_n: int
    endpoints: list[EndpointRow]
    pairs: list[PairRow]
    kind: str = "week"  # or "month"; ``week`` then holds the month "YYYY-MM"
    target: float = 0.99  # availability SLO
    claims: list[ClaimRow] = field(default_factory=list)
    answers: list[Any] = field(default_factory=list)  # sla_answers.PairAnswers, page 1
    generated_at: datetime | None = None

    @property
    def partial(self) -> bool:
        """Generated before the period ended: its figures cover only part of it."""
        return self.generated_at is not None and self.generated_at < self.end

    @property
    def period(self) -> str:
        return self.week


def week_bounds(week: str) -> tuple[datetime, datetime]:
    """[Monday, next Monday) in UTC of an ISO week "YYYY-Www"; ValueError naming the format."""
    match = WEEK.match(week.strip()) if isinstance(week, str) else None
    try:
        if not match:
            raise ValueError
        monday = date.fromisocalendar(int(match[1]), int(match[2]), 1)
    except ValueError:
        raise ValueError(
            f"week {week!r} is not an ISO week: expected format YYYY-Www, e.g. 2026-W48"
        ) from None
    start = datetime.combine(monday, time.min, tzinfo=UTC)
    return start, start + timedelta(days=7)


def month_bounds(month: str) -> tuple[datetime, datetime]:
    """[1st, 1st of next month) in UTC of "YYYY-MM"; ValueError naming the format."""
    match = MONTH.match(month.strip()) if isinstance(month, str) else None
    if not match or not 1 <= int(match[2]) <= 12:
        raise ValueError(f"month {month!r} is not a month: expected format YYYY-MM, e.g. 2026-11")
    year, number = int(match[1]), int(match[2])
    start = datetime(year, number, 1, tzinfo=UTC)
    end = datetime(year + number // 12, number % 12 + 1, 1, tzinfo=UTC)
    return start, end


def last_complete_month(today: date | None = None) -> str:
    first = (today or timezone.now().date()).replace(day=1)
    return f"{(first - timedelta(days=1)):%Y-%m}"


def last_complete_week(today: date | None = None) -> str:
    year, week, _ = ((today or timezone.now().date()) - timedelta(days=7)).isocalendar()
    return f"{year}-W{week:02d}"


def _endpoint_rows(start: datetime, end: datetime, min_n: int) -> list[EndpointRow]:
    """From the runs' rollups (``monitor.derived.rollups``), never the samples: counts summed, TTFT
    and
    E2E sketches merged (percentiles within 1 %, ``evals.sketch``). Availability counts probe
    and audit requests alike (a failed request is a failed request at any temperature); latency
    counts temperature-0 probes only, as ``Run.objects.trend()`` does: audits are short
    temperature-1 prompts (65 % of a week's samples) and would make the SLA figure describe the
    audit mix rather than the pair's workload. Load probes are left out of both. A run counts
    in the day (UTC) and period in which it started."""
    rollups = (
        RunRollup.objects.filter(at__gte=start, at__lt=end)
        .exclude(kind=RunKind.LOAD)
        .values_list(
            "endpoint_id",
            "kind",
            "at",
            "n",
            "n_ok",
            "errors",
            "ttft_sketch",
            "e2e_sketch",
            "served",
            "retried",
        )
    )
    counts: dict[int, Counter] = defaultdict(Counter)
    served: dict[int, Counter] = defaultdict(Counter)
    ttft: dict[int, list[dict]] = defaultdict(list)
    e2e: dict[int, list[dict]] = defaultdict(list)
    days: dict[int, dict[date, list]] = defaultdict(lambda: defaultdict(list))
    for endpoint_id, kind, at, n, n_ok, errors, ttft_s, e2e_s, tiers, retried in rollups:
        c = counts[endpoint_id]
        c["requests"] += n
        c["ok"] += n_ok
        c["retried"] += retried
        c.update({f"error:{k}": v for k, v in (errors or {}).items()})
        served[endpoint_id].update(tiers or {})
        days[endpoint_id][at.astimezone(UTC).date()].append(
            (
                n,
                n_ok,
                (errors or {}).get("rate_limited", 0),
                ttft_s if kind == "probe" else None,
                tiers or {},
            )
        )
        if kind == "probe":
            ttft[endpoint_id].append(ttft_s)
            e2e[endpoint_id].append(e2e_s)
    target = settings.TIERWATCH_SLO_AVAILABILITY
    rows = []
    for endpoint in Endpoint.objects.filter(pk__in=counts).order_by("name"):
        c = counts[endpoint.pk]
        errors = {
            k[6:]: v
            for k, v in sorted(c.items())
            if k.startswith("error:") and k != "error:rate_limited"
        }
        limited = c["error:rate_limited"]
        rows.append(
            EndpointRow(
                name=endpoint.name,
                model=endpoint.model,
                simulated=endpoint.simulated,
                requests=c["requests"],
                successes=c["ok"],
                rate_limited=limited,
                ttft=sketch.quantiles(
                    sketch.merge(ttft[endpoint.pk]), qs=QS, min_n=min_n, per_quantile=True
                ),
                e2e=sketch.quantiles(
                    sketch.merge(e2e[endpoint.pk]), qs=QS, min_n=min_n, per_quantile=True
                ),
                errors=errors,
                retried=c["retried"],
                served=downgrades(served[endpoint.pk].elements(), endpoint.expected_tier),
                budget=error_budget(c["ok"], c["requests"] - limited, target),
                daily=_daily(days[endpoint.pk], endpoint.expected_tier, min_n),
            )
        )
    return rows


def _daily(days: dict[date, list], expected: str, min_n: int) -> list[dict[str, Any]]:
    """Per UTC day, from that day's rollups: availability (429s apart), TTFT P95 of the probes
    (merged sketches; None below min_n), downgrade rate."""
    out = []
    for day, items in sorted(days.items()):
        n, ok, limited = (sum(x[i] for x in items) for i in range(3))
        ttft = sketch.quantiles(
            sketch.merge([x[3] for x in items if x[3] is not None]),
            qs=(95,),
            min_n=min_n,
            per_quantile=True,
        )
        tiers: Counter = Counter()
        for x in items:
            tiers.update(x[4])
        out.append(
            {
                "day": day,
                "n": n,
                "availability": availability(ok, n, limited)["availability_excl_rate_limited"],
                "ttft_p95": ttft.get("p95"),
                "downgrade_rate": downgrades(tiers.elements(), expected)["downgrade_rate"],
            }
        )
    return out


def _weighted(pairs: list[tuple[float | None, int]]) -> tuple[float | None, int]:
    """Mean of per-run means weighted by their n: the mean over all items of the week."""
    used = [(v, n) for v, n in pairs if v is not None and n]
    total = sum(n for _, n in used)
    return (sum(v * n for v, n in used) / total if total else None), total


def _goodput(start: datetime, end: datetime) -> dict[tuple[int, str], tuple[int, int]]:
    """(pair id, tier) → (requests, requests that met every SLO of the pair) over the period's
    finished probe runs (``evals.latency.goodput``'s test, counted into each run's rollup:
    errors and 429s in the denominator). One grouped query for all pairs, not two per pair.
    A rollup's ``pair`` is its run's pair (``record_run``); its ``at`` is the run's created_at:
    bounding the runs too keeps the subquery to the period's runs (unbounded, it read every
    run: 150 ms per pair at 10 M samples)."""
    runs = Run.objects.trend().filter(created_at__gte=start, created_at__lt=end)
    totals = (
        RunRollup.objects.filter(run__in=runs, at__gte=start, at__lt=end, tier__in=TIERS)
        .values_list("pair_id", "tier")
        .order_by()
        .annotate(n=Sum("n"), met=Sum("goodput_met"))
    )
    return {(pair_id, tier): (n or 0, met or 0) for pair_id, tier, n, met in totals}


def _pair_rows(start: datetime, end: datetime) -> list[PairRow]:
    """The few numbers each run's summary holds, extracted by the database (JSON paths), not
    thousands of summaries decoded in Python."""
    runs = Run.objects.trend().filter(created_at__gte=start, created_at__lt=end).order_by()
    paths = [
        "summary__similarity__fast_vs_base__mean_ratio",
        "summary__similarity__fast_vs_base__n",
        *[f"summary__tiers__{t}__{k}" for t in TIERS for k in ("pass_rate", "n_tested")],
    ]
    by_pair: dict[int, list[tuple]] = defaultdict(list)
    for pair_id, *values in runs.values_list("pair_id", *paths):
        by_pair[pair_id].append(tuple(values))
    goodput = _goodput(start, end)
    rows = []
    for pair in Pair.objects.filter(pk__in=by_pair).select_related("fast", "base"):
        runs_of_pair = by_pair[pair.pk]
        row = PairRow(name=pair.name, runs=len(runs_of_pair), simulated=pair.simulated)
        row.similarity_mean, row.similarity_n = _weighted([(v[0], v[1] or 0) for v in runs_of_pair])
        for i, tier in enumerate(TIERS):
            row.pass_rate[tier], row.n_tested[tier] = _weighted(
                [(v[2 + 2 * i], v[3 + 2 * i] or 0) for v in runs_of_pair]
            )
        row.slo = slo_of(pair.slo_ttft_ms, pair.slo_e2e_ms)
        for tier in TIERS:
            n, met = goodput.get((pair.pk, tier), (0, 0))
            row.goodput[tier] = met / n if row.slo and n else None
            row.n_goodput[tier] = n
        rows.append(row)
    return sorted(rows, key=lambda r: r.name)


def build_sla_report(*, week: str | None = None, month: str | None = None) -> SlaReport:
    """The report of an ISO week "YYYY-Www" or of a month "YYYY-MM" (exactly one)."""
    if (week is None) == (month is None):
        raise ValueError("give a week (YYYY-Www) or a month (YYYY-MM), not both or neither")
    start, end = week_bounds(week) if week is not None else month_bounds(month or "")
    min_n = settings.TIERWATCH_MIN_N
    pairs = _pair_rows(start, end)
    return SlaReport(
        week=(week or month or "").strip(),
        start=start,
        end=end,
        min_n=min_n,
        endpoints=_endpoint_rows(start, end, min_n),
        pairs=pairs,
        kind="week" if week is not None else "month",
        target=settings.TIERWATCH_SLO_AVAILABILITY,
        claims=_claim_rows(start, end),
        answers=pair_answers(start, end, {p.name: p.goodput for p in pairs}),
        generated_at=timezone.now(),
    )


def _claim_rows(start: datetime, end: datetime) -> list[ClaimRow]:
    """Per pair with a claim or prices on both endpoints: the claim checked over the period's
    comparable runs on gated samples, and the premium per week (``monitor.judging.claims``)."""
    runs = Run.objects.trend().filter(created_at__gte=start, created_at__lt=end)
    by_pair: dict[int, list[Run]] = defaultdict(list)
    for run in runs.only("id", "pair_id", "created_at", "status", "kind"):
        by_pair[run.pair_id].append(run)
    rows = []
    for pair in Pair.objects.filter(pk__in=by_pair).select_related("fast", "base"):
        if pair.claim is None and not (priced(pair.fast) and priced(pair.base)):
            continue
        found = period_claim(pair, by_pair[pair.pk])
        check = found["check"] or {}
        rows.append(
            ClaimRow(
                name=pair.name,
                simulated=pair.simulated,
                claim=check.get("text", ""),
                word=check.get("word", ""),
                line=check.get("line", ""),
                weeks=found["premium"],
                left_out=found["gating"]["left_out"],
                note=found["gating"]["note"],
            )
        )
    return sorted(rows, key=lambda r: r.name)


def claim_tables(report: SlaReport) -> list[tuple[str, list[str], list[list[str]]]]:
    """The claims block of the report: each claim in the vendor's metric and form with its
    check, and the premium paid beside the speed delivered per week."""
    claims = [
        [
            _label(c.name, c.simulated),
            c.claim or "not stated",
            c.word or "-",
            c.line or "-",
            str(c.left_out),
        ]
        for c in report.claims
    ]
    premium = [
        [
            _label(c.name, c.simulated),
            w["week"],
            str(w["runs"]),
            "-" if w["price_multiple"] is None else f"{w['price_multiple']:.2f}×",
            f"{CLAIM_METRICS[w['metric']]}: {w['speedup_text']}",
        ]
        for c in report.claims
        for w in c.weeks
    ]
    return [
        (
            "Claims as the vendor words them (downgraded samples left out)",
            ["pair", "claim", "check", "measured", "downgraded left out"],
            claims,
        ),
        (
            "Premium paid vs speed delivered, per week",
            ["pair", "week", "runs", "price multiple paid", "speed-up delivered [95% CI]"],
            premium,
        ),
    ]


# Rendering ------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def _ms(block: dict[str, Any]) -> str:
    """ "412 / 980 / n<299": a percentile withheld below its own minimum n says so."""
    if block.get("too_small", block.get("p50") is None):
        return TOO_SMALL
    return " / ".join(
        f"{v:.0f}" if (v := block.get(f"p{q}")) is not None else f"n<{min_n_for(q)}" for q in QS
    )


def _errors(errors: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in errors.items()) or "none"


def _rate(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _label(name: str, simulated: bool) -> str:
    return name + (" (simulated)" if simulated else "")


def tables(report: SlaReport) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of display cells, shared by the text and HTML renderings."""
    availability = [
        [
            _label(e.name, e.simulated),
            e.model,
            str(e.requests),
            str(e.successes),
            str(e.rate_limited),
            _pct(e.availability),
            _errors(e.errors),
            str(e.retried),
        ]
        for e in report.endpoints
    ]
    latency = [
        [
            _label(e.name, e.simulated),
            str(e.ttft.get("n", 0)),
            _ms(e.ttft),
            str(e.e2e.get("n", 0)),
            _ms(e.e2e),
        ]
        for e in report.endpoints
    ]
    budget = [
        [
            _label(e.name, e.simulated),
            str(e.requests - e.rate_limited),
            str(e.budget.get("failures", 0)),
            _rate(e.budget.get("allowed_failures"), 1),
            _pct(e.budget.get("budget_spent")),
            _rate(e.budget.get("burn_rate")),
        ]
        for e in report.endpoints
    ]
    served = [
        [
            _label(e.name, e.simulated),
            e.served.get("expected") or "-",
            ", ".join(f"{k} {v}" for k, v in e.served.get("by_tier", {}).items()) or "none",
            str(e.served.get("n_unreported", 0)),
            _pct(e.served.get("downgrade_rate")),
        ]
        for e in report.endpoints
    ]
    goodput_rows = [
        [
            _label(p.name, p.simulated),
            " and ".join(f"{k[:-3].upper()} ≤ {v:.0f} ms" for k, v in p.slo.items()) or "no SLO",
            *[f"{_pct(p.goodput.get(t))} (n={p.n_goodput.get(t, 0)})" for t in TIERS],
        ]
        for p in report.pairs
    ]
    pairs = [
        [
            _label(p.name, p.simulated),
            str(p.runs),
            "-" if p.similarity_mean is None else f"{p.similarity_mean:.3f}",
            str(p.similarity_n),
            *[f"{_pct(p.pass_rate[t])} (n={p.n_tested[t]})" for t in TIERS],
        ]
        for p in report.pairs
    ]
    return [
        (
            "Availability (429s counted apart, not in availability)",
            [
                "endpoint",
                "model",
                "requests",
                "ok",
                "429s",
                "availability",
                "errors by class",
                "retried",
            ],
            availability,
        ),
        (
            f"Error budget against {100 * report.target:g}% availability",
            [
                "endpoint",
                "eligible requests",
                "failures",
                "allowed failures",
                "budget spent",
                "burn rate",
            ],
            budget,
        ),
        (
            "Served tier (as the vendor reports it)",
            ["endpoint", "expected", "reported tiers", "unreported", "downgrade rate"],
            served,
        ),
        (
            "Latency, ms: P50 / P95 / P99",
            ["endpoint", "TTFT n", "TTFT P50 / P95 / P99", "E2E n", "E2E P50 / P95 / P99"],
            latency,
        ),
        (
            "Goodput: requests meeting every SLO of the pair (errors count against)",
            ["pair", "SLO", "goodput fast", "goodput base"],
            goodput_rows,
        ),
        (
            "Pairs: fast vs base",
            [
                "pair",
                "runs",
                "similarity (mean)",
                "similarity n",
                "pass rate fast",
                "pass rate base",
            ],
            pairs,
        ),
        *claim_tables(report),
    ]


def _text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, ["-" * w for w in widths], *rows]
    ]
    return "\n".join(lines)


def _heading(report: SlaReport) -> str:
    last_day = (report.end - timedelta(days=1)).date()
    return (
        f"tierwatch SLA report, {report.kind} {report.week} "
        f"({report.start.date()} to {last_day}, UTC)"
    )


def partial_words(report: SlaReport) -> str:
    """The mark of a period still in progress ("" once it has ended)."""
    if not (report.partial and report.generated_at):
        return ""
    return (
        f"PARTIAL {report.kind}: generated {report.generated_at:%Y-%m-%d %H:%M} UTC, before the "
        f"{report.kind} ended; the figures cover only the part already measured."
    )


def accounting(report: SlaReport) -> list[tuple[str, str]]:
    """The contract's accounting, stated in every rendering of the report: (term, rule)."""
    return [
        (
            "available",
            "a request is available when it got a complete answer: HTTP 2xx, a "
            "well-formed stream and its end marker. Connect errors, timeouts, other HTTP statuses, "
            "malformed or cut streams are failures. Availability = successes / (requests − 429s).",
        ),
        (
            "429s",
            "an HTTP 429 (rate limited) is the vendor refusing our volume, not an outage: "
            "it is left out of availability and of the error budget, and counted apart; it does "
            "count against goodput.",
        ),
        (
            "retries",
            "tierwatch never retries a failed request: a timeout, 5xx or 429 counts "
            "once as it happened. The one exception: a request whose pooled keep-alive connection "
            "had died before any response byte is re-sent once on a fresh connection and counts "
            "once, with the second attempt's outcome and times (column 'retried').",
        ),
        (
            "SLOs",
            f"availability target {100 * report.target:g}% per endpoint; latency SLOs "
            "per pair (TTFT and E2E limits set on the pair).",
        ),
        (
            "error budget",
            "allowed failures = (1 − target) × eligible requests; budget spent = "
            "failures / allowed failures; burn rate = failure rate / (1 − target), so 1 spends "
            f"the budget exactly over the {report.kind} (Google SRE Workbook).",
        ),
        (
            "goodput",
            "share of the pair's probe requests that succeeded and met every latency "
            "SLO of the pair; failures and 429s count against it.",
        ),
        (
            "downgrade rate",
            "share of successful requests whose reported tier differs from "
            "the tier expected on the endpoint, over requests that reported a tier; requests "
            "reporting none are counted apart.",
        ),
        (
            "percentiles",
            f"linear interpolation, only from at least n = {report.min_n} "
            f'successful requests, else "{TOO_SMALL}".',
        ),
    ]


def render_text(report: SlaReport) -> str:
    parts = [
        _heading(report),
        *([partial_words(report)] if report.partial else []),
        f'Percentiles need at least n = {report.min_n} samples; below that: "{TOO_SMALL}".',
    ]
    parts.append("\nThe answers, per pair")
    for a in answer_rows(report.answers) or []:
        parts.append(
            f"\n{a['pair']}\n- same model? {a['same_model']}\n  {a['detector']}\n"
            f"- how much faster? {'; '.join(a['speed'])}\n- availability: {a['availability']}\n"
            f"- downgrades: {a['downgrades']}\n- goodput: {a['goodput']}"
        )
    if not report.answers:
        parts.append(f"(no pair ran this {report.kind})")
    for title, header, rows in tables(report):
        body = _text_table(header, rows) if rows else f"(nothing this {report.kind})"
        parts.append(f"\n{title}\n{body}")
    title, header, rows = cost_table(report)  # its own block (cost_month)
    if rows:
        parts.append(f"\n{title}\n{_text_table(header, rows)}")
    parts.append(
        "\nAppendix: definitions and accounting\n"
        + "\n".join(f"- {term}: {rule}" for term, rule in [*APPENDIX, *accounting(report)])
    )
    return "\n".join(parts) + "\n"


def cost_table(report: SlaReport) -> tuple[str, list[str], list[list[str]]]:
    """The report's pairs' expected cost per month (``monitor.reporting.cost_month``)."""
    names = [p.name for p in report.pairs]
    pairs = Pair.objects.filter(name__in=names).select_related("fast", "base").order_by("name")
    return cost_month.sla_table(list(pairs))


CSV_COLUMNS = [
    "week",
    "kind",
    "name",
    "simulated",
    "model",
    "requests",
    "successes",
    "rate_limited",
    "availability",
    "ttft_n",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "ttft_p99_ms",
    "e2e_n",
    "e2e_p50_ms",
    "e2e_p95_ms",
    "e2e_p99_ms",
    "errors",
    "runs",
    "similarity_mean",
    "similarity_n",
    "pass_rate_fast",
    "n_tested_fast",
    "pass_rate_base",
    "n_tested_base",
    "retried",
    "burn_rate",
    "budget_spent",
    "expected_tier",
    "n_tier_reported",
    "downgrade_rate",
    "goodput_fast",
    "n_goodput_fast",
    "goodput_base",
    "n_goodput_base",
]


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


class _SafeWriter(csv.DictWriter):
    """Every cell through ``exports.safe_cell``: names and model ids are vendor- or
    config-controlled text a spreadsheet could run as a formula."""

    def writerow(self, rowdict: Any) -> Any:
        return super().writerow({k: safe_cell(v) for k, v in rowdict.items()})


def render_csv(report: SlaReport) -> str:
    """One row per endpoint (kind=endpoint) and per pair (kind=pair) under one header.

    Cells a row kind does not have are empty; so is a percentile below the minimum n (its n
    column says why), so that every numeric column parses as a number.
    """
    out = io.StringIO()
    writer = _SafeWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for e in report.endpoints:
        row: dict[str, Any] = {
            "week": report.week,
            "kind": "endpoint",
            "name": e.name,
            "simulated": e.simulated,
            "model": e.model,
            "requests": e.requests,
            "successes": e.successes,
            "rate_limited": e.rate_limited,
            "availability": _round(e.availability, 6),
            "errors": ";".join(f"{k}={v}" for k, v in e.errors.items()),
            "retried": e.retried,
            "burn_rate": _round(e.budget.get("burn_rate"), 6),
            "budget_spent": _round(e.budget.get("budget_spent"), 6),
            "expected_tier": e.served.get("expected", ""),
            "n_tier_reported": e.served.get("n_reported", 0),
            "downgrade_rate": _round(e.served.get("downgrade_rate"), 6),
        }
        for name, block in (("ttft", e.ttft), ("e2e", e.e2e)):
            row[f"{name}_n"] = block.get("n", 0)
            for q in QS:
                row[f"{name}_p{q}_ms"] = _round(block.get(f"p{q}"), 3)  # µs: below clock noise
        writer.writerow(row)
    for p in report.pairs:
        writer.writerow(
            {
                "week": report.week,
                "kind": "pair",
                "name": p.name,
                "simulated": p.simulated,
                "runs": p.runs,
                "similarity_mean": _round(p.similarity_mean, 6),
                "similarity_n": p.similarity_n,
                **{f"pass_rate_{t}": _round(p.pass_rate[t], 6) for t in TIERS},
                **{f"n_tested_{t}": p.n_tested[t] for t in TIERS},
                **{f"goodput_{t}": _round(p.goodput.get(t), 6) for t in TIERS},
                **{f"n_goodput_{t}": p.n_goodput.get(t, 0) for t in TIERS},
            }
        )
    return out.getvalue()


def report_context(report: SlaReport) -> dict[str, Any]:
    """The templates' context of one report, shared by the e-mail and the PDF."""
    return {
        "report": report,
        "heading": _heading(report),
        "too_small": TOO_SMALL,
        "tables": tables(report),
        "text": render_text(report),
        "accounting": accounting(report),
        "cost_month": cost_table(report),
        "answers": answer_rows(report.answers),
        "appendix": APPENDIX,
    }


def render_html(report: SlaReport) -> str:
    return render_to_string("emails/report-body.html", report_context(report))


def email_weekly_report(*, week: str | None = None, recipients: list[str] | None = None) -> int:
    """Email the week's report (default: the last complete ISO week) to each recipient
    (default: env TIERWATCH_REPORT_RECIPIENTS), the CSV attached; return messages sent."""
    week = week or last_complete_week()
    if recipients is None:
        recipients = env_list("TIERWATCH_REPORT_RECIPIENTS")
    if not recipients:
        logger.info("SLA report %s not emailed: TIERWATCH_REPORT_RECIPIENTS is empty", week)
        return 0
    report = build_sla_report(week=week)
    subject, text, html = render_email("report", report_context(report))
    attachment = render_csv(report)
    messages = []
    for address in recipients:
        message = EmailMultiAlternatives(subject, text, settings.DEFAULT_FROM_EMAIL, [address])
        message.attach_alternative(html, "text/html")
        message.attach(f"sla-{report.week}.csv", attachment, "text/csv")
        messages.append(message)
    return get_connection(fail_silently=False).send_messages(messages) or 0
