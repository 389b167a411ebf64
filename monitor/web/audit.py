"""The audit log page: configuration changes, newest first, with who, where from and the
fields that changed. Readable by operators and admins (``monitor.change_alert``, which the
viewer role lacks): it names people, and it is the evidence in an SLA dispute."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from monitor.models import ConfigChange
from monitor.web.access import CHANGE_ALERT, requires

PAGE_SIZE = 50


@requires(CHANGE_ALERT)
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    changes = ConfigChange.objects.select_related("user")
    model = request.GET.get("model", "")
    if model:
        changes = changes.filter(model=model)
    page = Paginator(changes, PAGE_SIZE).get_page(request.GET.get("page"))
    models = ConfigChange.objects.order_by("model").values_list("model", flat=True).distinct()
    return render(
        request, "monitor/audit.html", {"page": page, "model": model, "models": list(models)}
    )
