"""The weekly SLA report on hand-built samples and runs; its command; its email (real SMTP)."""

from __future__ import annotations

import csv
import io
from datetime import date, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from monitor.derived.rollups import record_run
from monitor.models import Case, Run, Sample
from monitor.reporting.sla import (
    CSV_COLUMNS,
    build_sla_report,
    email_weekly_report,
    last_complete_week,
    render_csv,
    render_html,
    render_text,
)
from tests import factories
from tests.support import IN_WEEK, WEEK


def runs_in_week(pair, *summaries):
    for s in summaries:
        run = Run.objects.create(pair=pair, suite=pair.suite, status="done", summary=s)
        Run.objects.filter(pk=run.pk).update(created_at=IN_WEEK)


def run_summary(similarity, n_sim, pass_fast, n_fast):
    return factories.summary(
        fast=factories.tier(pass_rate=pass_fast, n_tested=n_fast),
        similarity=similarity,
        n_sim=n_sim,
    )


def endpoint_row(report, name):
    return next(e for e in report.endpoints if e.name == name)


def test_it_counts_availability_with_429s_apart(world):
    fast = endpoint_row(build_sla_report(week=WEEK), "acme-fast")
    assert (fast.requests, fast.successes, fast.rate_limited) == (15, 10, 2)
    assert fast.availability == pytest.approx(10 / 13)


def test_it_counts_errors_by_class(world):
    fast = endpoint_row(build_sla_report(week=WEEK), "acme-fast")
    assert fast.errors == {"connect": 1, "timeout": 2}


def test_it_computes_percentiles_with_n(world):
    fast = endpoint_row(build_sla_report(week=WEEK), "acme-fast")
    # numpy's linear interpolation over 100, 200, ..., 1000 ms, within the sketch's 1 %
    assert fast.ttft["n"] == 10
    assert fast.ttft["p50"] == pytest.approx(550, rel=0.01)
    assert fast.e2e["p50"] == pytest.approx(1100, rel=0.01)
    # 10 values: P95 needs 59 and P99 299 (evals.latency.min_n_for), so neither is given
    assert fast.ttft["p95"] is fast.ttft["p99"] is fast.e2e["p99"] is None


def test_audit_samples_count_in_availability_but_not_in_latency(world):
    audit = Run.objects.create(
        pair=world["pair"], suite=world["pair"].suite, status="done", kind="audit", temperature=1.0
    )
    Run.objects.filter(pk=audit.pk).update(created_at=IN_WEEK)
    case = Case.objects.get(key="hello")
    for ok in (True, True, False):
        Sample.objects.create(
            run=audit,
            case=case,
            endpoint=world["fast"],
            tier="fast",
            started_at=IN_WEEK,
            ok=ok,
            ttft_ms=50000.0 if ok else None,
            error_class="" if ok else "timeout",
        )
    record_run(run=Run.objects.get(pk=audit.pk))
    fast = endpoint_row(build_sla_report(week=WEEK), "acme-fast")
    assert (fast.requests, fast.successes, fast.errors["timeout"]) == (18, 12, 3)
    assert fast.ttft["n"] == 10 and fast.ttft["p50"] < 1000


def test_it_shows_no_percentile_below_min_n(world):
    report = build_sla_report(week=WEEK)
    base = endpoint_row(report, "acme-base")
    assert base.ttft["n"] == 3 and base.ttft["p50"] is None
    lines = render_text(report).splitlines()
    assert any(x.startswith("acme-base") and "n too small" in x for x in lines)
    fast = endpoint_row(report, "acme-fast")
    shown = f"{fast.ttft['p50']:.0f} / n<59 / n<299"
    assert any(x.startswith("acme-fast") and shown in x for x in lines)
    assert "n too small" in render_html(report)


def test_it_averages_pair_similarity_and_pass_rate_weighted_by_n(world):
    runs_in_week(world["pair"], run_summary(0.9, 10, 1.0, 10), run_summary(0.6, 30, 0.5, 10))
    outside = Run.objects.create(
        pair=world["pair"],
        suite=world["pair"].suite,
        status="done",
        summary=run_summary(0.0, 100, 0.0, 100),
    )
    Run.objects.filter(pk=outside.pk).update(created_at=IN_WEEK + timedelta(days=7))
    (pair,) = build_sla_report(week=WEEK).pairs
    assert pair.runs == 3  # the fixture's run (no similarity, no tests) and these two
    assert pair.similarity_mean == pytest.approx((0.9 * 10 + 0.6 * 30) / 40)
    assert pair.similarity_n == 40
    assert pair.pass_rate == {"fast": pytest.approx(0.75), "base": None}
    assert pair.n_tested == {"fast": 20, "base": 0}


def slo_pair(k):
    """Pair ``pk``: a TTFT SLO met by 5k of its week's 20 fast answers (TTFT 100…119 ms) and
    by 5 + 5k of 20 base answers (95…114 ms); its audit (all met) and last week's run (all
    met) must not count."""
    pair = factories.pair(
        f"p{k}",
        fast=f"p{k}-fast",
        base=f"p{k}-base",
        suite_row=factories.suite(f"s{k}"),
        slo_ttft_ms=99.5 + 5 * k,
    )
    for at, fields, ms in (
        (IN_WEEK, {}, (100.0, 95.0)),
        (IN_WEEK, {"kind": "audit"}, (0.0, 0.0)),
        (IN_WEEK - timedelta(days=7), {}, (0.0, 0.0)),
    ):
        run = factories.run(pair, **fields)
        Run.objects.filter(pk=run.pk).update(created_at=at)
        run.refresh_from_db()
        record_run(run=run, samples=factories.rollup_rows(run, fast_ms=ms[0], base_ms=ms[1]))


def test_goodput_per_pair_and_tier_takes_as_many_queries_for_4_pairs_as_for_2(db):
    def report():
        with CaptureQueriesContext(connection) as queries:
            pairs = build_sla_report(week=WEEK).pairs
        return len(queries), {p.name: (p.goodput, p.n_goodput) for p in pairs}

    def expected(ks):
        return {
            f"p{k}": (
                {"fast": 5 * k / 20, "base": min(5 + 5 * k, 20) / 20},
                {"fast": 20, "base": 20},
            )
            for k in ks
        }

    for k in (1, 2):
        slo_pair(k)
    queries_2, goodput_2 = report()
    for k in (3, 4):
        slo_pair(k)
    queries_4, goodput_4 = report()
    assert (goodput_2, goodput_4) == (expected((1, 2)), expected((1, 2, 3, 4)))
    assert queries_4 == queries_2


def test_it_writes_csv_columns(world):
    runs_in_week(world["pair"], run_summary(0.9, 10, 1.0, 10))
    rows = list(csv.DictReader(io.StringIO(render_csv(build_sla_report(week=WEEK)))))
    assert list(rows[0]) == CSV_COLUMNS
    by_name = {r["name"]: r for r in rows}
    assert by_name["acme-fast"]["kind"] == "endpoint"
    assert float(by_name["acme-fast"]["ttft_p50_ms"]) == pytest.approx(550, rel=0.01)
    assert by_name["acme-fast"]["ttft_p95_ms"] == ""  # withheld below its own minimum n
    assert by_name["acme-fast"]["errors"] == "connect=1;timeout=2"
    assert by_name["acme-base"]["ttft_n"] == "3" and by_name["acme-base"]["ttft_p50_ms"] == ""
    assert by_name["acme"]["kind"] == "pair" and by_name["acme"]["similarity_mean"] == "0.9"


def test_it_labels_simulated_endpoints(world):
    text = render_text(build_sla_report(week=WEEK))
    assert "acme-base (simulated)" in text and "acme-fast (simulated)" not in text


def test_it_never_shows_keys_env_names_or_urls(world):
    runs_in_week(world["pair"], run_summary(0.9, 10, 1.0, 10))
    report = build_sla_report(week=WEEK)
    for rendered in (render_text(report), render_csv(report), render_html(report)):
        for secret in ("sk-live-do-not-print", "VENDOR_SECRET_KEY", "api.acme.test"):
            assert secret not in rendered


@pytest.mark.parametrize("week", ["2026-48", "2026W48", "2026-W54", "2026-W00", "", "W48-2026"])
def test_it_rejects_a_bad_week(db, week):
    with pytest.raises(ValueError, match="expected format YYYY-Www, e.g. 2026-W48"):
        build_sla_report(week=week)


def test_it_defaults_to_the_last_complete_week():
    assert last_complete_week(date(2026, 12, 2)) == "2026-W48"
    assert last_complete_week(date(2026, 1, 1)) == "2025-W52"


def test_it_emails_the_report_with_csv(world, smtp, monkeypatch):
    monkeypatch.setenv("TIERWATCH_REPORT_RECIPIENTS", "a@example.com, b@example.com")
    assert email_weekly_report(week=WEEK) == 2
    assert sorted(r for rcpts, _ in smtp.messages for r in rcpts) == [
        "a@example.com",
        "b@example.com",
    ]
    _, message = smtp.messages[0]
    assert message["Subject"] == f"[tierwatch] SLA report {WEEK}"
    assert "acme-fast" in message.get_body(("plain",)).get_content()
    (attachment,) = message.iter_attachments()
    assert attachment.get_filename() == f"sla-{WEEK}.csv"
    assert attachment.get_content().startswith(",".join(CSV_COLUMNS))


def test_it_sends_nothing_without_recipients(world, smtp, monkeypatch):
    monkeypatch.delenv("TIERWATCH_REPORT_RECIPIENTS", raising=False)
    assert email_weekly_report(week=WEEK) == 0
    assert smtp.messages == []


def test_the_command_prints_csv(world):
    out = io.StringIO()
    call_command("sla_report", "--week", WEEK, "--format", "csv", stdout=out)
    assert out.getvalue().splitlines()[0] == ",".join(CSV_COLUMNS)


def test_the_command_writes_a_file(world, tmp_path):
    target = tmp_path / "report.html"
    call_command(
        "sla_report",
        "--week",
        WEEK,
        "--format",
        "html",
        "--output",
        str(target),
        stderr=io.StringIO(),
    )
    assert "<table" in target.read_text()


def test_the_command_rejects_a_bad_week(db):
    with pytest.raises(CommandError, match="expected format YYYY-Www"):
        call_command("sla_report", "--week", "2026-48")


def test_the_command_emails(world, smtp, monkeypatch):
    monkeypatch.setenv("TIERWATCH_REPORT_RECIPIENTS", "a@example.com")
    err = io.StringIO()
    call_command("sla_report", "--week", WEEK, "--email", stdout=io.StringIO(), stderr=err)
    assert "1 email(s) sent" in err.getvalue() and len(smtp.messages) == 1
