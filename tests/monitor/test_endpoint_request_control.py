"""An endpoint's request control, as validated for the admin and config files: extra_body may
not override the probe's own fields, extra_headers may not replace the client's own, and
``{env:NAME}`` in a header value is read at request time (unset: refused by name)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from monitor.env import EnvError
from monitor.models import Endpoint
from monitor.setup.config import ConfigError, apply_config_text
from tests.monitor.configs import GOOD

pytestmark = pytest.mark.django_db


def _endpoint(**kw) -> Endpoint:
    return Endpoint(name="e", base_url="https://api.example/v1", model="m", **kw)


@pytest.mark.parametrize("field", ["model", "stream", "messages", "temperature", "max_tokens"])
def test_extra_body_cannot_override_a_probe_field(field):
    with pytest.raises(ValidationError, match=rf"extra_body\.{field}: set by the probe itself"):
        _endpoint(extra_body={field: 1, "service_tier": "priority"}).full_clean()
    _endpoint(extra_body={"service_tier": "priority", "logprobs": True}).full_clean()


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ({"Authorization": "Bearer x"}, r"extra_headers\.Authorization: set by the client"),
        ({"Accept-Encoding": "gzip"}, r"extra_headers\.Accept-Encoding: set by the client"),
        ({"bad header": "x"}, r"'bad header' is not a header name"),
        ({"x-k": "a\r\nX-Injected: 1"}, r"extra_headers\.x-k: must be text on one line"),
        ({"x-k": "{env:lower-case}"}, r"extra_headers\.x-k: \{env:lower-case\} must name"),
        # issue 31, finding 1: a header template reads only a key-named variable, never a setting
        ({"X-Leak": "{env:DATABASE_URL}"}, r"extra_headers\.X-Leak: 'DATABASE_URL': an endpoint"),
        ({"X-Leak": "{env:TIERWATCH_METRICS_TOKEN}"}, r"X-Leak: 'TIERWATCH_METRICS_TOKEN': names"),
        ({"X-Leak": "k {env:AWS_SECRET_ACCESS_KEY}"}, r"X-Leak: 'AWS_SECRET_ACCESS_KEY': names"),
        ({"Proxy-Authorization": "Basic x"}, r"Proxy-Authorization: carries credentials"),
        ({"proxy-foo": "x"}, r"proxy-foo: carries credentials"),
        ({"Cookie": "s=1"}, r"extra_headers\.Cookie: carries credentials"),
    ],
)
def test_extra_headers_are_refused_naming_the_header(headers, problem):
    with pytest.raises(ValidationError, match=problem):
        _endpoint(extra_headers=headers).full_clean()


def test_a_row_saved_before_the_rule_cannot_send_a_setting(monkeypatch):
    """The rule holds at request time too: a template saved earlier is refused by name, unread."""
    monkeypatch.setenv("TIERWATCH_SECRET_KEY", "canary-secret-key")
    ep = _endpoint(extra_headers={"x-leak": "{env:TIERWATCH_SECRET_KEY}"})
    with pytest.raises(EnvError, match=r"extra_headers\.x-leak: 'TIERWATCH_SECRET_KEY': names"):
        ep.request_headers()


def test_env_placeholders_are_read_at_request_time_and_kept_as_secrets(monkeypatch):
    ep = _endpoint(
        extra_headers={"x-gateway-key": "Bearer {env:TW_GATEWAY_KEY}", "anthropic-beta": "b1"},
        max_tokens_field="max_completion_tokens",
        send_temperature=False,
    )
    ep.full_clean()
    monkeypatch.setenv("TW_GATEWAY_KEY", "gw-rotated-123\n")
    spec = ep.spec()
    assert spec.extra_headers == {"x-gateway-key": "Bearer gw-rotated-123", "anthropic-beta": "b1"}
    assert spec.secrets == ("gw-rotated-123",)
    assert (spec.max_tokens_field, spec.send_temperature) == ("max_completion_tokens", False)
    monkeypatch.delenv("TW_GATEWAY_KEY")
    with pytest.raises(EnvError, match=r"extra_headers\.x-gateway-key: TW_GATEWAY_KEY is not set"):
        ep.spec()


def test_a_config_file_sets_request_control_and_names_a_bad_field():
    text = GOOD.replace(
        "    api_key_env: ACME_API_KEY\n  - name: acme-base",
        "    api_key_env: ACME_API_KEY\n"
        "    max_tokens_field: max_completion_tokens\n"
        "    send_temperature: false\n"
        "    extra_headers: {x-team: tierwatch, x-gw: '{env:ACME_GATEWAY_KEY}'}\n"
        "  - name: acme-base",
    )
    apply_config_text(text, source="team.yaml")
    fast = Endpoint.objects.get(name="acme-fast")
    assert (fast.max_tokens_field, fast.send_temperature) == ("max_completion_tokens", False)
    assert fast.extra_headers == {"x-team": "tierwatch", "x-gw": "{env:ACME_GATEWAY_KEY}"}
    bad = text.replace("    send_temperature: false\n", "    extra_body: {stream: false}\n")
    with pytest.raises(ConfigError) as err:
        apply_config_text(bad, source="team.yaml")
    assert "team.yaml:" in str(err.value)
    assert "extra_body.stream: set by the probe itself" in str(err.value)
