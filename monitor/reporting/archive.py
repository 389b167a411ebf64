"""Generated SLA reports kept in the archive (``ReportArchive``): what beat writes every week and
month, and what the reports page lists for download."""

from __future__ import annotations

import time

from django.db import transaction

from monitor.models import ReportArchive
from monitor.reporting.pdf import render_pdf
from monitor.reporting.sla import (
    build_sla_report,
    last_complete_month,
    last_complete_week,
    render_csv,
    render_html,
    render_text,
)

RENDERERS = {
    "pdf": render_pdf,
    "csv": lambda r: render_csv(r).encode(),
    "html": lambda r: render_html(r).encode(),
    "text": lambda r: render_text(r).encode(),
}


def archive_report(
    *, week: str | None = None, month: str | None = None, formats: tuple[str, ...] = ("pdf", "csv")
) -> list[ReportArchive]:
    """Render the period's report in each format and store it, replacing an earlier rendering
    of the same period and format. ValueError for a bad period or format."""
    unknown = set(formats) - set(RENDERERS)
    if unknown:
        raise ValueError(f"unknown report format(s) {sorted(unknown)}; known: {sorted(RENDERERS)}")
    report = build_sla_report(week=week, month=month)
    rendered = []
    for fmt in formats:
        started = time.perf_counter()
        content = RENDERERS[fmt](report)
        rendered.append((fmt, content, (time.perf_counter() - started) * 1000.0))
    rows = []
    with transaction.atomic():  # every format of the period, or none
        for fmt, content, ms in rendered:
            row, _ = ReportArchive.objects.update_or_create(
                period=report.period,
                format=fmt,
                defaults={
                    "kind": report.kind,
                    "content": content,
                    "size": len(content),
                    "render_ms": ms,
                },
            )
            rows.append(row)
    return rows


def archive_last_period(*, kind: str) -> list[ReportArchive]:
    """The last complete ISO week (kind "week") or month (kind "month"), as beat runs it."""
    if kind == "week":
        return archive_report(week=last_complete_week())
    if kind == "month":
        return archive_report(month=last_complete_month())
    raise ValueError(f"unknown report kind {kind!r}; expected week or month")
