"""Page 1 of the SLA report: per pair the same-model verdict with the e-detector, the speed-up
against the claim, availability, downgrades and goodput; a week still running marked partial;
definitions in an appendix. Runs are made through the product's path (``execute_run``)
against the simulated demo vendor, then the report is built as beat and the Generate button
build it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator

import pytest
from django.db import transaction
from django.utils import timezone

from monitor.models import Pair, Run
from monitor.reporting.pdf import render_pdf
from monitor.reporting.sla import build_sla_report, render_html, render_text
from tests.factories import measured_pair

# one worker for the module: its tests read one measured pair, made once (``measured``)
pytestmark = [pytest.mark.django_db, pytest.mark.xdist_group("sla_answers")]
needs_poppler = pytest.mark.skipif(
    not (shutil.which("pdftoppm") and shutil.which("pdftotext")), reason="poppler-utils missing"
)


def this_week() -> str:
    year, week, _ = timezone.now().date().isocalendar()
    return f"{year}-W{week:02d}"


@pytest.fixture(scope="module")
def measured(django_db_setup, django_db_blocker, demo_vendor_url) -> Iterator[Pair]:
    """The measured pair, made once for the module's tests, which only read it: inside a
    transaction each test's own nests in and that is rolled back after the last one (Django's
    ``setUpTestData``)."""
    with django_db_blocker.unblock(), transaction.atomic():
        yield measured_pair(demo_vendor_url, suite="smoke", probe_cases=3)
        transaction.set_rollback(True)


def test_the_report_answers_same_model_and_speed_against_the_claim_per_pair(measured):
    report = build_sla_report(week=this_week())
    (answer,) = report.answers
    audit = Run.objects.get(pair=measured, kind="audit")
    label = audit.summary["verdict"]["label"]
    assert answer.same_model.audits == 1 and answer.same_model.newest_label == label
    assert answer.same_model.newest_run_id == audit.pk
    assert answer.claimed == "2× E2E"  # the claim in its metric and form
    assert answer.scenarios and all(s.n > 0 for s in answer.scenarios)
    assert answer.speed["claim"].startswith("claim 2× E2E: ")
    assert answer.availability["fast"] == 1.0 and answer.requests["fast"] > 0
    assert answer.goodput["fast"] is not None  # the pair has an SLO

    text = render_text(report)
    head, _, appendix = text.partition("Appendix: definitions and accounting")
    assert "same model? inconclusive" in head or f"same model? {label.replace('_', ' ')}" in head
    assert "e-detector" in head and "how much faster? " in head and "claim 2× E2E: " in head
    assert "× E2E" in head
    # definitions are in the appendix, not ahead of the answers
    assert "- available: " in appendix and "- available: " not in head
    assert "- e-detector: adds up" in appendix


def test_a_week_still_running_is_marked_partial_and_a_past_one_is_not(measured):
    assert build_sla_report(week=this_week()).partial
    html = render_html(build_sla_report(week=this_week()))
    assert 'id="partial"' in html and "Partial week" in html
    assert (
        render_text(build_sla_report(week=this_week()))
        .splitlines()[1]
        .startswith("PARTIAL week: generated ")
    )
    past = build_sla_report(week="2020-W10")
    assert not past.partial and "PARTIAL" not in render_text(past)


def test_the_html_report_puts_the_answers_before_the_tables_and_the_appendix(measured):
    html = render_html(build_sla_report(week=this_week()))
    answers = html.index("The answers, per pair")
    assert answers < html.index("Availability (429s") < html.index("Appendix: definitions")
    assert "Same model?" in html and "How much faster?" in html and "claim 2× E2E: " in html


@needs_poppler
def test_the_pdf_carries_the_verdict_and_the_speed_against_the_claim_on_page_1(measured, tmp_path):
    path = tmp_path / "sla.pdf"
    path.write_bytes(render_pdf(build_sla_report(week=this_week())))
    page1 = subprocess.run(
        ["pdftotext", "-layout", "-f", "1", "-l", "1", str(path), "-"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    flat = " ".join(page1.split())
    assert "Partial week" in flat
    assert "Same model?" in flat and "e-detector" in flat
    assert "How much faster?" in flat and "claim 2× E2E:" in flat
    assert "demo-fast-vs-base" in flat
    everything = subprocess.run(
        ["pdftotext", str(path), "-"], check=True, capture_output=True, text=True
    ).stdout
    assert "Appendix: definitions and accounting" in everything
    assert "Appendix" not in page1
