"""A preset in a config file and in the admin: the same method fills the endpoint, the
user's fields win, an unknown name is refused with file, line and field."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from monitor.models import Endpoint
from monitor.setup.config import ConfigError, apply_config_text

pytestmark = pytest.mark.django_db

CONFIG = """\
endpoints:
  - name: claude-fast
    preset: anthropic-fast
    model: claude-opus-5-5
    extra_body: {metadata: {user_id: team}}
  - name: gpt-fast
    preset: openai-fast
    model: gpt-6-astra
    expected_tier: fast
    api_key_env: TEAM_OPENAI_KEY
"""


def test_a_config_preset_fills_the_endpoint_and_the_file_s_fields_win():
    assert apply_config_text(CONFIG, source="team.yaml")["endpoints"] == 2
    claude = Endpoint.objects.get(name="claude-fast")
    assert (claude.preset, claude.protocol) == ("anthropic-fast", "anthropic")
    assert claude.base_url == "https://api.anthropic.com/v1"
    assert claude.extra_body == {"speed": "fast", "metadata": {"user_id": "team"}}
    assert claude.extra_headers == {"anthropic-beta": "fast-mode-2026-02-01"}
    assert claude.served_tier_fields == ["usage.speed", "message.usage.speed"]
    assert (claude.expected_tier, claude.api_key_env) == ("fast", "ANTHROPIC_API_KEY")
    gpt = Endpoint.objects.get(name="gpt-fast")
    assert (gpt.expected_tier, gpt.api_key_env) == ("fast", "TEAM_OPENAI_KEY")
    assert gpt.extra_body == {"service_tier": "priority"}
    apply_config_text(CONFIG, source="team.yaml")  # again: nothing changes
    assert Endpoint.objects.get(name="claude-fast").extra_body == claude.extra_body


def test_an_unknown_preset_is_refused_with_file_line_and_field_and_nothing_is_written():
    bad = CONFIG.replace("preset: openai-fast", "preset: openai-turbo")
    with pytest.raises(ConfigError) as err:
        apply_config_text(bad, source="team.yaml")
    assert "team.yaml:7: endpoints[1].preset: unknown preset 'openai-turbo' (known: " in str(
        err.value
    )
    assert not Endpoint.objects.exists()


def _admin(client):
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def _form(**fields):
    form = {
        "name": "e",
        "protocol": "openai",
        "base_url": "",
        "model": "gemini-3.5-flash",
        "api_key_env": "",
        "max_concurrency": 4,
        "timeout_s": 120,
        "extra_body": "{}",
        "extra_headers": "{}",
        "max_tokens_field": "max_tokens",
        "send_temperature": "on",
        "served_tier_fields": "[]",
        "expected_tier": "",
    }
    return {**form, **fields}


def test_the_admin_form_applies_the_chosen_preset_on_save(client):
    form = _form(preset="gemini-priority", extra_body='{"seed": 7}', api_key_env="MY_GEMINI_KEY")
    response = _admin(client).post("/admin/monitor/endpoint/add/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    ep = Endpoint.objects.get(name="e")
    assert ep.preset == "gemini-priority"
    assert ep.base_url == "https://generativelanguage.googleapis.com/v1beta/openai"
    assert ep.extra_body == {"service_tier": "priority", "seed": 7}
    assert ep.served_tier_fields == ["x-gemini-service-tier"]
    assert (ep.expected_tier, ep.api_key_env) == ("priority", "MY_GEMINI_KEY")


def test_the_admin_form_without_a_preset_still_needs_a_base_url(client):
    response = _admin(client).post("/admin/monitor/endpoint/add/", _form())
    assert response.status_code == 200 and not Endpoint.objects.exists()
    assert "Required, unless the chosen preset sets it." in response.content.decode()


def test_reasoning_fields_belong_to_their_vendor_s_protocol():
    bad = """\
endpoints:
  - {name: c, protocol: anthropic, base_url: "https://a.example/v1", model: m,
     reasoning_effort: low}
  - {name: o, base_url: "https://a.example/v1", model: m, thinking_budget: 2048}
  - {name: t, protocol: anthropic, base_url: "https://a.example/v1", model: m,
     thinking_budget: 100}
"""
    with pytest.raises(ConfigError) as err:
        apply_config_text(bad, source="r.yaml")
    lines = str(err.value).splitlines()
    assert lines == [
        "r.yaml:3: endpoints[0].reasoning_effort: OpenAI's field: for Anthropic set "
        "thinking_budget",
        "r.yaml:4: endpoints[1].thinking_budget: Anthropic's field: for OpenAI set "
        "reasoning_effort",
        "r.yaml:6: endpoints[2].thinking_budget: Ensure this value is greater than or equal to "
        "1024.",
    ]
