"""One template serves a page and its live fragment: an htmx request (``request.htmx``, from
django-htmx) gets only the partial ``"page.html#name"`` (django-template-partials), so polling
and buttons swap in place; a history-restore request wants the whole page back."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def wants_fragment(request: HttpRequest) -> bool:
    htmx = getattr(request, "htmx", None)
    return htmx is not None and bool(htmx) and not htmx.history_restore_request


def render_page(
    request: HttpRequest, template: str, partial: str, context: dict[str, Any]
) -> HttpResponse:
    """The full page, or only its partial for htmx."""
    name = f"{template}#{partial}" if wants_fragment(request) else template
    return render(request, name, context)
