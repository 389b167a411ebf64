"""The Reports page's Generate button: operators build a report now (POST, CSRF), viewers see
no button and get 403; a period still running is marked partial in the archive."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from monitor.models import ReportArchive
from monitor.reporting.archive import archive_report
from tests import factories
from tests.support import WEEK

pytestmark = pytest.mark.django_db


def login(role: str, **kw) -> Client:
    client = Client(**kw)
    client.force_login(factories.user(f"u-{role}", role))
    return client


def this_week() -> str:
    year, week, _ = timezone.now().date().isocalendar()
    return f"{year}-W{week:02d}"


def test_an_operator_generates_this_weeks_report_and_finds_it_marked_partial():
    pair = factories.pair()
    factories.run(pair, summary=factories.summary())
    client = login("operator")
    assert 'id="generate-report"' in client.get("/reports/").content.decode()
    response = client.post("/reports/generate/", {"period": "this-week"})
    assert response.status_code == 302
    assert response["Location"] == f"/reports/#period-{this_week()}"
    assert set(
        ReportArchive.objects.filter(period=this_week()).values_list("format", flat=True)
    ) == {
        "pdf",
        "csv",
        "html",
    }
    html = client.get("/reports/").content.decode()
    row = html[html.index(f'id="period-{this_week()}"') :].split("</tr>")[0]
    assert 'class="badge partial"' in row
    assert f"Generated the SLA report of week {this_week()}" in html
    body = bytes(ReportArchive.objects.get(period=this_week(), format="html").content).decode()
    assert "Partial week" in body


def test_a_past_week_is_not_marked_partial():
    archive_report(week=WEEK)  # 2026-W48, generated now: after it ended
    html = login("viewer").get("/reports/").content.decode()
    row = html[html.index(f'id="period-{WEEK}"') :].split("</tr>")[0]
    assert "partial" not in row


def test_a_viewer_sees_no_button_and_cannot_generate():
    client = login("viewer")
    assert 'id="generate-report"' not in client.get("/reports/").content.decode()
    assert client.post("/reports/generate/", {"period": "this-week"}).status_code == 403
    assert not ReportArchive.objects.exists()


def test_generate_needs_a_post_with_the_csrf_token_and_a_known_period():
    client = login("operator", enforce_csrf_checks=True)
    assert client.get("/reports/generate/").status_code == 405
    assert client.post("/reports/generate/", {"period": "this-week"}).status_code == 403
    assert not ReportArchive.objects.exists()
    client = Client()
    client.force_login(factories.user("u-operator-2", "operator"))
    response = client.post("/reports/generate/", {"period": "1999-W01"}, follow=True)
    assert "Choose a period" in response.content.decode()
    assert not ReportArchive.objects.exists()
