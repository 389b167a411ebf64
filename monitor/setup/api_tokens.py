"""API tokens: made once, stored as a SHA-256 digest, looked up by digest.

A token is 32 random bytes (``secrets.token_urlsafe``), so a fast hash is enough: there is no
password to guess, only a digest to compare, and the lookup is an indexed equality.
"""

from __future__ import annotations

import hashlib
import secrets

from django.utils import timezone

from monitor.models import ApiToken

PREFIX = "tw_"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(*, user, name: str = "") -> tuple[ApiToken, str]:
    """A new token row for the user and the token itself, which is not stored anywhere."""
    token = PREFIX + secrets.token_urlsafe(32)
    row = ApiToken.objects.create(user=user, name=name, digest=digest(token), prefix=token[:10])
    return row, token


def user_for_token(token: str):
    """The active user owning the token, or None; notes when the token was last used."""
    row = (
        ApiToken.objects.select_related("user")
        .filter(digest=digest(token))
        .only("id", "user")
        .first()
    )
    if row is None or not row.user.is_active:
        return None
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now())
    return row.user
