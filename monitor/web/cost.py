"""The pair page's "cost per month" block (``monitor.reporting.cost_month``) and the button
that accepts a border-input discovery's stated cost (``TripwireState.border_allowed``)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from monitor import selectors
from monitor.models import TripwireState
from monitor.reporting import cost_month
from monitor.setup import audit
from monitor.web.access import ADD_RUN, requires
from monitor.web.worse import usd


def context(pair) -> dict[str, Any]:
    """The monthly cost table as words, and whether a border discovery waits for a yes."""
    data = cost_month.schemes(pair)
    schemes = []
    for scheme in data["schemes"]:
        cells = {}
        for row in scheme["rows"]:
            cells[row["kind"]] = cost_month.cell(row)
        total = cost_month.words(scheme)
        schemes.append({"name": scheme["name"], "cells": cells, "total": total})
    state = TripwireState.objects.filter(pair=pair).first()
    discovery = data["discovery"]
    return {
        "schemes": schemes,
        "kinds": [str(k) for k in cost_month.KINDS],
        "per_run": {str(k): v for k, v in data["per_run"].items()},
        "discovery": discovery,
        "discovery_usd": usd(discovery["usd"]) if discovery else "",
        "border_allowed": bool(state and state.border_allowed),
        "hours": data["hours"],
        "probe_every_min": data["probe_every_s"] / 60,
    }


@requires(ADD_RUN)
@require_POST
def allow_border_discovery(request: HttpRequest, name: str) -> HttpResponse:
    """An operator accepted the stated cost: the next tripwire run discovers border inputs.
    Accepting spends money, so the audit log says who accepted which cost (the figures the
    page stated, ``cost_month``), like any other change of a pair's configuration."""
    pair = selectors.get_pair_for_user(request.user, name)
    discovery = cost_month.schemes(pair)["discovery"]
    with transaction.atomic():
        state, _ = TripwireState.objects.select_for_update().get_or_create(pair=pair)
        before = {"border_allowed": state.border_allowed}
        state.border_allowed = True
        state.save(update_fields=["border_allowed", "updated_at"])
        stated = (
            f"{discovery['requests']} one-token requests, {usd(discovery['usd'])}"
            if discovery
            else "none stated"
        )
        audit.record(
            obj=pair,
            before=before,
            after={"border_allowed": True, "accepted cost": stated},
            source=f"pair page {pair.name}: accept border discovery's cost",
            user=request.user,
            action="changed",
        )
    return redirect(f"{pair_url(pair)}#cost-month")


def pair_url(pair) -> str:
    return reverse("monitor:pair", args=[pair.name])
