"""Onboarding in the browser, for operators: add a pair from a preset with Test connection on
each endpoint before saving, and Test connection on a pair's page (``monitor.setup.connection``:
one request per endpoint, nothing stored but an audit-log entry in words). An operator's
endpoints reach public addresses only; "self-hosted" is offered to admins alone
(``monitor.web.pair_form``), so the page cannot be used to probe the server's own network."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from monitor import selectors
from monitor.setup import connection
from monitor.web.access import ADD_PAIR, ADD_RUN, requires
from monitor.web.htmx import wants_fragment
from monitor.web.pair_form import TIERS, AddPairForm

TEMPLATE = "monitor/add_pair.html"


@requires(ADD_PAIR)
@require_http_methods(["GET", "POST"])
def add_pair(request: HttpRequest) -> HttpResponse:
    """GET: the form. POST ``action=test``: Test connection of each endpoint whose fields are
    valid (the results fragment). POST ``action=save``: the pair saved, then its page; the form
    again with its values and each field's message when something is wrong (422)."""
    if request.method == "GET":
        return render(request, TEMPLATE, {"form": AddPairForm(user=request.user)})
    form = AddPairForm(request.POST, user=request.user)
    valid = form.is_valid()
    if request.POST.get("action") == "test":
        ready = [t for t in TIERS if t in form.endpoints]
        checks = [(tier, connection.check(form.endpoints[tier])) for tier in ready]
        connection.record([c for _, c in checks], user=request.user, source="add pair page")
        untested = [t for t in TIERS if t not in ready]
        context = {"form": form, "checks": checks, "untested": untested}
        name = f"{TEMPLATE}#connection" if wants_fragment(request) else TEMPLATE
        return render(request, name, context)
    if not valid:
        return render(request, TEMPLATE, {"form": form}, status=422)
    pair = form.save(user=request.user)
    url = reverse("monitor:pair", args=[pair.name])
    if wants_fragment(request):
        response = HttpResponse(status=204)
        response["HX-Redirect"] = url
        return response
    return redirect(url)


@requires(ADD_RUN)
@require_POST
def test_pair_connection(request: HttpRequest, name: str) -> HttpResponse:
    """Test connection of the pair's two endpoints, from its page."""
    pair = selectors.get_pair_for_user(request.user, name)
    checks = [("fast", connection.check(pair.fast)), ("base", connection.check(pair.base))]
    connection.record([c for _, c in checks], user=request.user, source=f"pair page {pair.name}")
    return render(request, "monitor/_connection.html", {"checks": checks})
