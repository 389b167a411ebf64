"""The weekly vendor SLA report: per endpoint availability, latency percentiles with n and errors
by class from the week's samples; per pair similarity and pass rates from the week's run
summaries. Rendered as plain text, CSV or HTML, and emailed.

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
from django.template.loader import render_to_string
from django.utils import timezone

from evals.latency import availability, percentiles
from monitor.env import env_list
from monitor.models import Endpoint, Pair, Run, Sample
from monitor.run_summary import RunSummary
from monitor.transports import render_email

logger = logging.getLogger(__name__)

WEEK = re.compile(r"^(\d{4})-W(\d{2})$")
QS = (50, 95, 99)
TOO_SMALL = "n too small"
TIERS = ("fast", "base")


@dataclass
class EndpointRow:
    name: str
    model: str
    simulated: bool
    requests: int = 0
    successes: int = 0
    rate_limited: int = 0
    ttft: dict[str, Any] = field(default_factory=dict)  # evals.latency.percentiles output
    e2e: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)  # failed samples by class, 429s apart

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


@dataclass
class SlaReport:
    week: str
    start: datetime  # Monday 00:00 UTC
    end: datetime  # the next Monday 00:00 UTC (excluded)
    min_n: int
    endpoints: list[EndpointRow]
    pairs: list[PairRow]


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


def last_complete_week(today: date | None = None) -> str:
    year, week, _ = ((today or timezone.now().date()) - timedelta(days=7)).isocalendar()
    return f"{year}-W{week:02d}"


def _endpoint_rows(start: datetime, end: datetime, min_n: int) -> list[EndpointRow]:
    samples = Sample.objects.filter(started_at__gte=start, started_at__lt=end)
    ids = set(samples.values_list("endpoint_id", flat=True).distinct())
    endpoints = {e.pk: e for e in Endpoint.objects.filter(pk__in=ids)}
    counts: dict[int, Counter] = defaultdict(Counter)
    ttft: dict[int, list[float]] = defaultdict(list)
    e2e: dict[int, list[float]] = defaultdict(list)
    fields = ("endpoint_id", "ok", "error_class", "ttft_ms", "e2e_ms")
    for endpoint_id, ok, error_class, ttft_ms, e2e_ms in samples.values_list(*fields).iterator():
        counts[endpoint_id][("ok" if ok else error_class or "unknown")] += 1
        if ok and ttft_ms is not None:
            ttft[endpoint_id].append(ttft_ms)
        if ok and e2e_ms is not None:
            e2e[endpoint_id].append(e2e_ms)
    rows = []
    for pk, endpoint in sorted(endpoints.items(), key=lambda item: item[1].name):
        c = counts[pk]
        errors = {k: v for k, v in sorted(c.items()) if k not in ("ok", "rate_limited")}
        rows.append(EndpointRow(
            name=endpoint.name, model=endpoint.model, simulated=endpoint.simulated,
            requests=sum(c.values()), successes=c["ok"], rate_limited=c["rate_limited"],
            ttft=percentiles(ttft[pk], qs=QS, min_n=min_n),
            e2e=percentiles(e2e[pk], qs=QS, min_n=min_n), errors=errors,
        ))
    return rows


def _weighted(pairs: list[tuple[float | None, int]]) -> tuple[float | None, int]:
    """Mean of per-run means weighted by their n: the mean over all items of the week."""
    used = [(v, n) for v, n in pairs if v is not None and n]
    total = sum(n for _, n in used)
    return (sum(v * n for v, n in used) / total if total else None), total


def _pair_rows(start: datetime, end: datetime) -> list[PairRow]:
    runs = Run.objects.trend().filter(created_at__gte=start, created_at__lt=end)
    by_pair: dict[int, list[RunSummary]] = defaultdict(list)
    for pair_id, summary in runs.values_list("pair_id", "summary"):
        by_pair[pair_id].append(RunSummary.from_json(summary))
    rows = []
    for pair in Pair.objects.filter(pk__in=by_pair).select_related("fast", "base"):
        summaries = by_pair[pair.pk]
        sims = [s.similar("fast_vs_base") for s in summaries]
        row = PairRow(name=pair.name, runs=len(summaries), simulated=pair.simulated)
        row.similarity_mean, row.similarity_n = _weighted(
            [(x.mean_ratio, x.n) for x in sims if x is not None])
        for tier in TIERS:
            blocks = [s.tier(tier) for s in summaries]
            row.pass_rate[tier], row.n_tested[tier] = _weighted(
                [(b.pass_rate, b.n_tested) for b in blocks])
        rows.append(row)
    return sorted(rows, key=lambda r: r.name)


def build_sla_report(*, week: str) -> SlaReport:
    start, end = week_bounds(week)
    min_n = settings.TIERWATCH_MIN_N
    return SlaReport(week=week.strip(), start=start, end=end, min_n=min_n,
                     endpoints=_endpoint_rows(start, end, min_n), pairs=_pair_rows(start, end))


# Rendering ------------------------------------------------------------------------------------

def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}%"


def _ms(block: dict[str, Any]) -> str:
    if block.get("p50") is None:
        return TOO_SMALL
    return " / ".join(f"{block[f'p{q}']:.0f}" for q in QS)


def _errors(errors: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in errors.items()) or "none"


def _label(name: str, simulated: bool) -> str:
    return name + (" (simulated)" if simulated else "")


def tables(report: SlaReport) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of display cells, shared by the text and HTML renderings."""
    availability = [
        [_label(e.name, e.simulated), e.model, str(e.requests), str(e.successes),
         str(e.rate_limited), _pct(e.availability), _errors(e.errors)]
        for e in report.endpoints
    ]
    latency = [
        [_label(e.name, e.simulated), str(e.ttft.get("n", 0)), _ms(e.ttft),
         str(e.e2e.get("n", 0)), _ms(e.e2e)]
        for e in report.endpoints
    ]
    pairs = [
        [_label(p.name, p.simulated), str(p.runs),
         "-" if p.similarity_mean is None else f"{p.similarity_mean:.3f}", str(p.similarity_n),
         *[f"{_pct(p.pass_rate[t])} (n={p.n_tested[t]})" for t in TIERS]]
        for p in report.pairs
    ]
    return [
        ("Availability (429s counted apart, not in availability)",
         ["endpoint", "model", "requests", "ok", "429s", "availability", "errors by class"],
         availability),
        ("Latency, ms: P50 / P95 / P99",
         ["endpoint", "TTFT n", "TTFT P50 / P95 / P99", "E2E n", "E2E P50 / P95 / P99"], latency),
        ("Pairs: fast vs base",
         ["pair", "runs", "similarity (mean)", "similarity n", "pass rate fast",
          "pass rate base"], pairs),
    ]


def _text_table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in [header, ["-" * w for w in widths], *rows]]
    return "\n".join(lines)


def _heading(report: SlaReport) -> str:
    last_day = (report.end - timedelta(days=1)).date()
    return (f"tierwatch SLA report, week {report.week} "
            f"({report.start.date()} to {last_day}, UTC)")


def render_text(report: SlaReport) -> str:
    parts = [_heading(report),
             f'Percentiles need at least n = {report.min_n} samples; below that: "{TOO_SMALL}".']
    for title, header, rows in tables(report):
        body = _text_table(header, rows) if rows else "(nothing this week)"
        parts.append(f"\n{title}\n{body}")
    return "\n".join(parts) + "\n"


CSV_COLUMNS = [
    "week", "kind", "name", "simulated", "model", "requests", "successes", "rate_limited",
    "availability", "ttft_n", "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "e2e_n", "e2e_p50_ms",
    "e2e_p95_ms", "e2e_p99_ms", "errors", "runs", "similarity_mean", "similarity_n",
    "pass_rate_fast", "n_tested_fast", "pass_rate_base", "n_tested_base",
]


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def render_csv(report: SlaReport) -> str:
    """One row per endpoint (kind=endpoint) and per pair (kind=pair) under one header.

    Cells a row kind does not have are empty; so is a percentile below the minimum n (its n
    column says why), so that every numeric column parses as a number.
    """
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for e in report.endpoints:
        row: dict[str, Any] = {
            "week": report.week, "kind": "endpoint", "name": e.name, "simulated": e.simulated,
            "model": e.model, "requests": e.requests, "successes": e.successes,
            "rate_limited": e.rate_limited, "availability": _round(e.availability, 6),
            "errors": ";".join(f"{k}={v}" for k, v in e.errors.items()),
        }
        for name, block in (("ttft", e.ttft), ("e2e", e.e2e)):
            row[f"{name}_n"] = block.get("n", 0)
            for q in QS:
                row[f"{name}_p{q}_ms"] = _round(block.get(f"p{q}"), 3)  # µs: below clock noise
        writer.writerow(row)
    for p in report.pairs:
        writer.writerow({
            "week": report.week, "kind": "pair", "name": p.name, "simulated": p.simulated,
            "runs": p.runs, "similarity_mean": _round(p.similarity_mean, 6),
            "similarity_n": p.similarity_n,
            **{f"pass_rate_{t}": _round(p.pass_rate[t], 6) for t in TIERS},
            **{f"n_tested_{t}": p.n_tested[t] for t in TIERS},
        })
    return out.getvalue()


def _context(report: SlaReport) -> dict[str, Any]:
    return {"report": report, "heading": _heading(report), "too_small": TOO_SMALL,
            "tables": tables(report), "text": render_text(report)}


def render_html(report: SlaReport) -> str:
    return render_to_string("emails/report-body.html", _context(report))


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
    subject, text, html = render_email("report", _context(report))
    attachment = render_csv(report)
    messages = []
    for address in recipients:
        message = EmailMultiAlternatives(subject, text, settings.DEFAULT_FROM_EMAIL, [address])
        message.attach_alternative(html, "text/html")
        message.attach(f"sla-{report.week}.csv", attachment, "text/csv")
        messages.append(message)
    return get_connection(fail_silently=False).send_messages(messages) or 0
