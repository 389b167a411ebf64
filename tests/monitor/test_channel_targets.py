"""A channel's target is checked when it is configured: a webhook needs an http(s) URL with a
host (``file:///etc/passwd`` is refused), an email channel needs addresses."""

import pytest
from django.core.exceptions import ValidationError

from monitor.models import Channel

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("kind", "target"),
    [
        ("webhook", "file:///etc/passwd"),
        ("webhook", "gopher://10.0.0.1/x"),
        ("webhook", "/hooks/local"),
        ("webhook", "http://hooks.example.com/x"),  # in clear across the internet
        ("email", "<script>@x"),
        ("email", '"<b>"@example.com'),
        ("email", "ops@example.com, not-an-address"),
    ],
)
def test_a_bad_target_is_refused_naming_the_field(kind, target):
    with pytest.raises(ValidationError, match="target"):
        Channel(name="c", kind=kind, target=target).full_clean()


def test_good_targets_are_accepted():
    Channel(
        name="w", kind="webhook", target="https://hooks.example.com/x", secret_env="HOOK_SECRET"
    ).full_clean()
    Channel(  # a receiver beside tierwatch may be plain http on this machine
        name="l", kind="webhook", target="http://127.0.0.1:9/x", secret_env="HOOK_SECRET"
    ).full_clean()
    Channel(name="e", kind="email", target="ops@example.com, oncall@example.com").full_clean()


def test_a_webhook_without_its_signing_secret_is_refused():
    """Unsigned, a receiver cannot tell tierwatch's alert from anyone's POST: refused."""
    with pytest.raises(ValidationError, match="secret_env.*HMAC"):
        Channel(name="w", kind="webhook", target="https://hooks.example.com/x").full_clean()
