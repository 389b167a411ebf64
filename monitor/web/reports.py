"""The reports page: archived SLA reports (weekly and monthly) listed with their downloads."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from monitor.models import ReportArchive
from monitor.web.access import VIEW_REPORT, requires

CONTENT_TYPES = {
    "pdf": "application/pdf",
    "csv": "text/csv; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "text": "text/plain; charset=utf-8",
}


@require_GET
@requires(VIEW_REPORT)
def report_list(request: HttpRequest) -> HttpResponse:
    rows = ReportArchive.objects.defer("content").order_by("-created_at", "format")
    periods: dict[tuple[str, str], list[ReportArchive]] = {}
    for row in rows:
        periods.setdefault((row.kind, row.period), []).append(row)
    ordered = sorted(periods.items(), key=lambda item: item[0][1], reverse=True)
    return render(request, "monitor/reports.html", {"periods": ordered})


@require_GET
@requires(VIEW_REPORT)
def report_download(request: HttpRequest, report_id: int) -> HttpResponse:
    row = get_object_or_404(ReportArchive, pk=report_id)
    response = HttpResponse(bytes(row.content), content_type=CONTENT_TYPES[row.format])
    response["Content-Disposition"] = f'attachment; filename="{row.filename}"'
    return response
