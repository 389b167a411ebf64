"""``Authorization: Bearer TOKEN`` → the token's user (else 401); then the permission the
endpoint needs (else 403): the same model permissions the pages check."""

from __future__ import annotations

from django.http import HttpRequest
from ninja.errors import HttpError
from ninja.security import HttpBearer

from monitor.setup.api_tokens import user_for_token


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str):
        return user_for_token(token)


def require(request: HttpRequest, perm: str) -> None:
    if not request.auth.has_perm(perm):
        raise HttpError(403, f"this needs the permission {perm} (see manage.py roles)")
