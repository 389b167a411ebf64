"""``Authorization: Bearer TOKEN`` → the token's user (else 401); then the permission the
endpoint needs (else 403): the same model permissions the pages check.

The schema and its docs page (``/api/openapi.json``, ``/api/docs``) are public by default: they
describe the routes and their fields and hold no data (every route that returns some needs a
token), as most products publish their API reference. ``TIERWATCH_API_DOCS_PUBLIC=false`` puts
both behind the API's own sign-in (a token, or the browser's signed-in session) for a
deployment that keeps even its API's shape private (``docs_access``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja.errors import HttpError
from ninja.security import HttpBearer

from monitor.setup.api_tokens import user_for_token


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        return user_for_token(token)


def require(request: HttpRequest, perm: str) -> None:
    if not request.auth.has_perm(perm):
        raise HttpError(403, f"this needs the permission {perm} (see manage.py roles)")


def docs_access(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The docs and the schema: anyone, or with ``TIERWATCH_API_DOCS_PUBLIC`` off a signed-in
    user or a valid bearer token (else 401), read at each request."""

    @functools.wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if settings.TIERWATCH_API_DOCS_PUBLIC or request.user.is_authenticated:
            return view(request, *args, **kwargs)
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token and user_for_token(token.strip()) is not None:
            return view(request, *args, **kwargs)
        detail = "the API's docs need a token or a signed-in session on this deployment"
        return JsonResponse({"detail": detail}, status=401)

    return guarded
