"""The weekly vendor SLA report: per endpoint availability, latency percentiles with n and errors
by class from the week's run rollups (``monitor.rollups``); per pair similarity and pass rates
from the week's run summaries. Rendered as plain text, CSV or HTML, and emailed.

Definitions (DESIGN.md): availability = successes / requests with 429s left out of both and
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

from evals import sketch
from evals.latency import availability
from monitor.env import env_list
from monitor.models import Endpoint, Pair, Run, RunRollup
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
    ttft: dict[str, Any] = field(default_factory=dict)  # evals.sketch.quantiles output
    e2e: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)  # failed samples by class, 429s apart

    @property
    def availability(self) -> float | None:
        """Successes / requests with 429s out of both (SUMMARY.md), formula in evals.latency."""
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
    """From the runs' rollups (``monitor.rollups``), never the samples: counts summed, TTFT and
    E2E sketches merged (percentiles within 1 %, ``evals.sketch``). Availability counts probe
    and audit requests alike (a failed request is a failed request at any temperature); latency
    counts temperature-0 probes only, as ``Run.objects.trend()`` does: audits are short
    temperature-1 prompts (65 % of a week's samples) and would make the SLA figure describe the
    audit mix rather than the pair's workload. Load probes are left out of both."""
    rollups = (RunRollup.objects.filter(at__gte=start, at__lt=end).exclude(trigger="load")
               .values_list("endpoint_id", "kind", "n", "n_ok", "errors", "ttft_sketch",
                            "e2e_sketch"))
    counts: dict[int, Counter] = defaultdict(Counter)
    ttft: dict[int, list[dict]] = defaultdict(list)
    e2e: dict[int, list[dict]] = defaultdict(list)
    for endpoint_id, kind, n, n_ok, errors, ttft_s, e2e_s in rollups:
        c = counts[endpoint_id]
        c["requests"] += n
        c["ok"] += n_ok
        c.update({f"error:{k}": v for k, v in (errors or {}).items()})
        if kind == "probe":
            ttft[endpoint_id].append(ttft_s)
            e2e[endpoint_id].append(e2e_s)
    rows = []
    for endpoint in Endpoint.objects.filter(pk__in=counts).order_by("name"):
        c = counts[endpoint.pk]
        errors = {k[6:]: v for k, v in sorted(c.items())
                  if k.startswith("error:") and k != "error:rate_limited"}
        rows.append(EndpointRow(
            name=endpoint.name, model=endpoint.model, simulated=endpoint.simulated,
            requests=c["requests"], successes=c["ok"], rate_limited=c["error:rate_limited"],
            ttft=sketch.quantiles(sketch.merge(ttft[endpoint.pk]), qs=QS, min_n=min_n),
            e2e=sketch.quantiles(sketch.merge(e2e[endpoint.pk]), qs=QS, min_n=min_n),
            errors=errors,
        ))
    return rows


def _weighted(pairs: list[tuple[float | None, int]]) -> tuple[float | None, int]:
    """Mean of per-run means weighted by their n: the mean over all items of the week."""
    used = [(v, n) for v, n in pairs if v is not None and n]
    total = sum(n for _, n in used)
    return (sum(v * n for v, n in used) / total if total else None), total


def _pair_rows(start: datetime, end: datetime) -> list[PairRow]:
    """The few numbers each run's summary holds, extracted by the database (JSON paths), not
    thousands of summaries decoded in Python."""
    runs = Run.objects.trend().filter(created_at__gte=start, created_at__lt=end).order_by()
    paths = ["summary__similarity__fast_vs_base__mean_ratio",
             "summary__similarity__fast_vs_base__n",
             *[f"summary__tiers__{t}__{k}" for t in TIERS for k in ("pass_rate", "n_tested")]]
    by_pair: dict[int, list[tuple]] = defaultdict(list)
    for pair_id, *values in runs.values_list("pair_id", *paths):
        by_pair[pair_id].append(tuple(values))
    rows = []
    for pair in Pair.objects.filter(pk__in=by_pair).select_related("fast", "base"):
        runs_of_pair = by_pair[pair.pk]
        row = PairRow(name=pair.name, runs=len(runs_of_pair),
                      simulated=pair.fast.simulated or pair.base.simulated)
        row.similarity_mean, row.similarity_n = _weighted([(v[0], v[1] or 0) for v in runs_of_pair])
        for i, tier in enumerate(TIERS):
            row.pass_rate[tier], row.n_tested[tier] = _weighted(
                [(v[2 + 2 * i], v[3 + 2 * i] or 0) for v in runs_of_pair])
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
