"""The maintenance-window form on the pair page: a one-off window for this pair (start, end,
reason). Recurring and vendor-wide windows are made in the admin, which shows the cron field.
Needs ``monitor.add_maintenancewindow``; the window is written to the audit log."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from monitor import selectors
from monitor.models import MaintenanceWindow
from monitor.setup import audit
from monitor.web.access import ADD_MAINTENANCE, requires
from monitor.web.forms import WindowForm
from monitor.web.pair import pair_context


@requires(ADD_MAINTENANCE)
@require_POST
def add_window(request: HttpRequest, name: str) -> HttpResponse:
    pair = selectors.get_pair_for_user(request.user, name)
    form = WindowForm(request.POST, instance=MaintenanceWindow(pair=pair, created_by=request.user))
    if not form.is_valid():  # the page again, the form open with each error by its field
        return _invalid(request, pair, form)
    try:
        window = form.save()
    except ValidationError as exc:
        form.add_error(None, exc)
        return _invalid(request, pair, form)
    audit.record(
        obj=window, before={}, after=audit.snapshot(window), source="pair page", user=request.user
    )
    messages.success(request, f"Maintenance window saved: {window}")
    return redirect("monitor:pair", name=pair.name)


def _invalid(request: HttpRequest, pair, form: WindowForm) -> HttpResponse:
    """The pair page with the typed values kept and the errors in words, not a redirect that
    loses both."""

    messages.error(request, "Maintenance window not saved: see the form below.")
    context = pair_context(pair, maintenance_form=form)
    return render(request, "monitor/pair.html", context, status=400)
