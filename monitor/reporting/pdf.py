"""The SLA report as PDF: the report's HTML with its accounting and SVG charts, laid out by
WeasyPrint (HTML/CSS to PDF in-process, no browser; it needs Debian's pango)."""

from __future__ import annotations

import base64

from django.conf import settings
from django.template.loader import render_to_string

from monitor.reporting.sla import SlaReport, report_context


def render_report_html(report: SlaReport) -> str:
    """The PDF's HTML: the charts go in as ``data:`` URIs, so nothing is fetched."""
    # imported here: matplotlib is the costliest import on the worker's path, and only a
    # report draws charts (every Celery worker and manage.py process imports this module)
    from monitor.reporting.charts import report_charts

    charts = {
        name: "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()
        for name, svg in report_charts(report).items()
    }
    return render_to_string(
        "reports/sla.html",
        {**report_context(report), "charts": charts, "site_url": settings.SITE_URL},
    )


def render_pdf(report: SlaReport) -> bytes:
    from weasyprint import HTML  # imported here: loading pango takes a moment

    return HTML(string=render_report_html(report), base_url=str(settings.BASE_DIR)).write_pdf()
