"""An endpoint's key comes only from a variable named like a key, never from the project's own
settings (the database URL, the secret key, the metrics token): refused when the endpoint is
validated (config file, admin) and again when the key would be read."""

import pytest
from django.core.exceptions import ValidationError

from monitor.models import Endpoint

pytestmark = pytest.mark.django_db

REFUSED = [
    "DATABASE_URL",
    "REDIS_URL",
    "TIERWATCH_SECRET_KEY",
    "TIERWATCH_METRICS_TOKEN",
    "DJANGO_SECRET_KEY",
    "HOME",
]


@pytest.mark.parametrize("name", REFUSED)
def test_a_settings_variable_is_refused_as_an_endpoint_key(name, monkeypatch):
    monkeypatch.setenv(name, "internal-secret-value")
    endpoint = Endpoint(name="e", base_url="https://api.example.com/v1", model="m")
    endpoint.api_key_env = name
    with pytest.raises(ValidationError, match="api_key_env"):
        endpoint.full_clean()
    with pytest.raises(ValueError, match=name):
        endpoint.api_key()


def test_a_key_variable_is_accepted(monkeypatch):
    monkeypatch.setenv("ACME_API_KEY", "sk-x")
    endpoint = Endpoint(name="e", base_url="https://api.example.com/v1", model="m")
    endpoint.api_key_env = "ACME_API_KEY"
    endpoint.full_clean()
    assert endpoint.api_key() == "sk-x"
