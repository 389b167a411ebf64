"""The SLA report as PDF (WeasyPrint, SVG charts), monthly reports, the error budget, and the
reports archive: its page, downloads and the beat tasks that fill it. The PDF is checked as
text (pdftotext) and as an image of its first page (pdftoppm)."""

from __future__ import annotations

import shutil
import subprocess
from datetime import date, timedelta

import pytest
from django.core.management import CommandError, call_command
from django_celery_beat.models import PeriodicTask
from PIL import Image

from evals.latency import error_budget
from monitor.derived.rollups import record_run
from monitor.models import ReportArchive, Run, Sample
from monitor.reporting.archive import archive_report
from monitor.reporting.pdf import render_pdf
from monitor.reporting.sla import build_sla_report, last_complete_month, month_bounds
from monitor.setup.schedules import ensure_weekly_report_schedule
from monitor.tasks import monthly_report_task, weekly_report_task
from tests.support import IN_WEEK, WEEK

POPPLER = shutil.which("pdftoppm") and shutil.which("pdftotext")
needs_poppler = pytest.mark.skipif(not POPPLER, reason="poppler-utils (pdftoppm) not installed")


@pytest.fixture
def served(world):
    """A week of fast runs over four days whose samples report their tier: 2 of 12 downgraded.
    One run a day: the report counts a run in the day it started (its rollup)."""
    fast = world["fast"]
    fast.expected_tier = "priority"
    fast.save()
    pair = world["run"].pair
    case = pair.suite.cases.first()
    for day in range(4):
        run = Run.objects.create(pair=pair, suite=pair.suite, status="done")
        Run.objects.filter(pk=run.pk).update(created_at=IN_WEEK + timedelta(days=day - 1))
        for i in range(3):
            Sample.objects.create(
                run=run,
                case=case,
                endpoint=fast,
                tier="fast",
                started_at=IN_WEEK + timedelta(days=day - 1, hours=i),
                ok=True,
                ttft_ms=200.0 + 40 * day + i,
                e2e_ms=900.0,
                served_tier="default" if i == 0 and day % 2 else "priority",
            )
        record_run(run=Run.objects.get(pk=run.pk))  # the report reads rollups
    return world


def pdf_text(path) -> str:
    return subprocess.run(
        ["pdftotext", "-layout", str(path), "-"], check=True, capture_output=True, text=True
    ).stdout


@needs_poppler
def test_it_renders_the_pdf_with_accounting_charts_and_downgrade_rate(served, tmp_path):
    pdf = render_pdf(build_sla_report(week=WEEK))
    assert pdf.startswith(b"%PDF-")
    path = tmp_path / "sla.pdf"
    path.write_bytes(pdf)
    text = " ".join(pdf_text(path).split())
    assert f"tierwatch SLA report, week {WEEK}" in text
    for term in (
        "Appendix: definitions and accounting",
        "available",
        "429s",
        "retries",
        "error budget",
        "burn rate",
        "goodput",
        "downgrade rate",
    ):
        assert term in text, term
    assert "acme-fast" in text and "16.67%" in text  # 2 of 12 reported tiers downgraded
    assert "api.acme.test" not in text and "VENDOR_SECRET_KEY" not in text
    assert "sk-live" not in text
    subprocess.run(
        ["pdftoppm", "-png", "-r", "60", "-f", "1", "-l", "1", str(path), str(tmp_path / "page")],
        check=True,
    )
    (png,) = tmp_path.glob("page*.png")
    with Image.open(png) as image:
        width, height = image.size
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert height > width > 400  # A4 portrait
    assert len(colours) > 50  # text drawn, not a blank page
    subprocess.run(["pdftoppm", "-png", "-r", "60", str(path), str(tmp_path / "all")], check=True)
    line_colour = (0xD5, 0x5E, 0x00)  # the first chart line (one endpoint served the week)
    drawn = 0
    for page in tmp_path.glob("all*.png"):
        with Image.open(page) as image:
            drawn += sum(
                n
                for n, rgb in image.convert("RGB").getcolors(maxcolors=1 << 20)
                if all(abs(a - b) < 40 for a, b in zip(rgb, line_colour, strict=True))
            )
    assert drawn > 100, "the charts' lines are not on any page"


def test_the_report_counts_downgrades_against_the_expected_tier(served):
    fast = next(e for e in build_sla_report(week=WEEK).endpoints if e.name == "acme-fast")
    assert fast.served["expected"] == "priority"
    assert fast.served["n_reported"] == 12 and fast.served["n_downgraded"] == 2
    assert fast.served["n_unreported"] == 10  # the world's samples report no tier
    assert fast.served["downgrade_rate"] == pytest.approx(2 / 12)
    assert [d["day"] for d in fast.daily] == [
        date(2026, 11, 23) + timedelta(days=k) for k in range(4)
    ]


def test_the_error_budget_is_spent_by_failures_but_not_429s(world):
    fast = next(e for e in build_sla_report(week=WEEK).endpoints if e.name == "acme-fast")
    # 10 ok, 2 x 429, 3 failures: eligible 13, allowed 0.13 at 99%
    assert fast.budget["failures"] == 3 and fast.budget["allowed_failures"] == pytest.approx(0.13)
    assert fast.budget["burn_rate"] == pytest.approx((3 / 13) / 0.01)
    assert error_budget(999, 1000, 0.999)["burn_rate"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="between 0 and 1"):
        error_budget(1, 1, 99.9)


def test_a_month_covers_its_days_and_names_its_format(world):
    start, end = month_bounds("2026-12")
    assert (start.date(), end.date()) == (date(2026, 12, 1), date(2027, 1, 1))
    report = build_sla_report(month="2026-11")
    fast = next(e for e in report.endpoints if e.name == "acme-fast")
    assert report.kind == "month" and fast.requests == 16  # the week's 15 and the week before
    assert last_complete_month(date(2026, 1, 15)) == "2025-12"
    with pytest.raises(ValueError, match="YYYY-MM"):
        month_bounds("2026-13")
    with pytest.raises(CommandError, match="YYYY-MM"):
        call_command("sla_report", "--month", "november")


def test_the_month_command_prints_the_monthly_heading(world, capsys):
    call_command("sla_report", "--month", "2026-11")
    assert "tierwatch SLA report, month 2026-11 (2026-11-01 to 2026-11-30, UTC)" in (
        capsys.readouterr().out
    )


def test_archiving_twice_replaces_the_period_and_the_page_lists_downloads(world, admin_client):
    first = archive_report(week=WEEK)
    again = archive_report(week=WEEK)
    assert {r.format for r in again} == {"pdf", "csv"}
    assert ReportArchive.objects.count() == 2 and {r.pk for r in first} == {r.pk for r in again}
    html = admin_client.get("/reports/").content.decode()
    pdf = ReportArchive.objects.get(format="pdf")
    assert WEEK in html and f"/reports/{pdf.pk}/download/" in html
    response = admin_client.get(f"/reports/{pdf.pk}/download/")
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == f'attachment; filename="tierwatch-sla-{WEEK}.pdf"'
    assert response.content.startswith(b"%PDF-") and len(response.content) == pdf.size


def test_the_archive_needs_a_login(client, world):
    (pdf, _) = archive_report(week=WEEK)
    assert client.get("/reports/").status_code == 302
    assert client.get(f"/reports/{pdf.pk}/download/").status_code == 302


def test_beat_archives_weekly_and_monthly_reports(world, monkeypatch):
    ensure_weekly_report_schedule()
    names = set(PeriodicTask.objects.values_list("name", flat=True))
    assert {"sla-report:weekly", "sla-report:monthly"} <= names
    monkeypatch.setattr("monitor.reporting.archive.last_complete_month", lambda: "2026-11")
    assert monthly_report_task.apply().get() == 2
    monkeypatch.delenv("TIERWATCH_REPORT_RECIPIENTS", raising=False)
    weekly_report_task.apply(args=[WEEK]).get()
    periods = set(ReportArchive.objects.values_list("period", "kind"))
    assert periods == {("2026-11", "month"), (WEEK, "week")}


def test_the_command_archives_and_refuses_a_pdf_on_stdout(world):
    call_command("sla_report", "--week", WEEK, "--archive")
    assert ReportArchive.objects.filter(period=WEEK).count() == 2
    with pytest.raises(CommandError, match="--output"):
        call_command("sla_report", "--week", WEEK, "--format", "pdf")
