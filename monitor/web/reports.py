"""The reports page: archived SLA reports (weekly and monthly) listed with their downloads, a
period generated before it ended marked partial, and the Generate button for operators."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from monitor.models import ReportArchive
from monitor.reporting import archive
from monitor.reporting.sla import month_bounds, week_bounds
from monitor.web.access import ADD_REPORT, VIEW_REPORT, requires

CONTENT_TYPES = {
    "pdf": "application/pdf",
    "csv": "text/csv; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "text": "text/plain; charset=utf-8",
}
GENERATED_FORMATS = ("pdf", "csv", "html")


def choices() -> dict[str, tuple[str, str]]:
    """The Generate button's periods: key → (kind, period). The current ones are partial."""
    today = timezone.now().date()
    year, week, _ = today.isocalendar()
    last_year, last_week, _ = (today - timedelta(days=7)).isocalendar()
    last_month = today.replace(day=1) - timedelta(days=1)
    return {
        "this-week": ("week", f"{year}-W{week:02d}"),
        "last-week": ("week", f"{last_year}-W{last_week:02d}"),
        "this-month": ("month", f"{today:%Y-%m}"),
        "last-month": ("month", f"{last_month:%Y-%m}"),
    }


def is_partial(kind: str, period: str, generated_at) -> bool:
    """Generated before its period ended: it covers only part of it."""
    bounds = week_bounds if kind == "week" else month_bounds
    try:
        _, end = bounds(period)
    except ValueError:
        return False
    return generated_at < end


@require_GET
@requires(VIEW_REPORT)
def report_list(request: HttpRequest) -> HttpResponse:
    rows = ReportArchive.objects.defer("content").order_by("-created_at", "format")
    periods: dict[tuple[str, str], list[ReportArchive]] = {}
    for row in rows:
        periods.setdefault((row.kind, row.period), []).append(row)
    ordered = sorted(periods.items(), key=lambda item: item[0][1], reverse=True)
    listed = [
        (key, group, is_partial(key[0], key[1], min(r.created_at for r in group)))
        for key, group in ordered
    ]
    return render(
        request,
        "monitor/reports.html",
        {
            "periods": listed,
            "choices": [(k, f"{kind} {period}") for k, (kind, period) in choices().items()],
            "can_generate": request.user.has_perm(ADD_REPORT),
        },
    )


@require_POST
@requires(ADD_REPORT)
def report_generate(request: HttpRequest) -> HttpResponse:
    """Build the chosen period's report inline (PDF, CSV, HTML; seconds, not minutes: it reads
    rollups, never samples), archive it, and send the operator back to its downloads."""
    chosen = choices().get(request.POST.get("period", ""))
    if chosen is None:
        messages.error(request, "Choose a period: this week, last week, this month or last month.")
        return redirect("reports:list")
    kind, period = chosen
    archive.archive_report(**{kind: period}, formats=GENERATED_FORMATS)
    messages.success(request, f"Generated the SLA report of {kind} {period}: download it below.")
    return redirect(reverse("reports:list") + f"#period-{period}")


@require_GET
@requires(VIEW_REPORT)
def report_download(request: HttpRequest, report_id: int) -> HttpResponse:
    row = get_object_or_404(ReportArchive, pk=report_id)
    response = HttpResponse(bytes(row.content), content_type=CONTENT_TYPES[row.format])
    response["Content-Disposition"] = f'attachment; filename="{row.filename}"'
    return response
