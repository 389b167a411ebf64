"""The add-a-pair page through Django's test client: operators only, the models' validators on
each field with the typed values kept and nothing written, a saved pair with its schedules,
"outputs differ" rule and audit entries, and Test connection against real servers."""

from __future__ import annotations

import json

import pytest
from django_celery_beat.models import PeriodicTask

from monitor.models import AlertRule, Channel, ConfigChange, Endpoint, Pair
from tests import factories
from tests.monitor import test_vendor_failures
from tests.monitor.test_vendor_failures import NO_KEY

refusing_url = test_vendor_failures.refusing_url  # the 401 server, as a fixture here

pytestmark = pytest.mark.django_db


def form(url: str, **changes: str) -> dict[str, str]:
    data = {
        "name": "acme",
        "preset": "openai",
        "fast_base_url": url,
        "fast_model": "demo-fast",
        "fast_key_env": "",
        "base_base_url": url,
        "base_model": "demo-base",
        "base_key_env": "",
        "repeat": "2",
        "probe_every_minutes": "15",
        "audit_every_hours": "6",
        "action": "save",
    }
    if url.startswith("http://127.0.0.1"):  # a server of the test's own: a local endpoint,
        data["local"] = "on"  # which only an admin may add (test_onboarding_network.py)
    return {**data, **changes}


@pytest.fixture
def operator(client):
    client.force_login(factories.user("olga", "operator"))
    return client


@pytest.fixture
def admin(client):
    client.force_login(factories.user("ada", "admin"))
    return client


def test_only_operators_open_it(client):
    client.force_login(factories.user("vera", "viewer"))
    assert client.get("/pairs/add/").status_code == 403
    client.force_login(factories.user("olga", "operator"))
    page = client.get("/pairs/add/")
    assert page.status_code == 200 and b"Test connection" in page.content
    assert b'value="2"' in page.content  # repeat 2 by default: the noise floor


def test_a_bad_field_is_named_the_values_stay_and_nothing_is_written(operator):
    suite = factories.suite("smoke")
    data = form("api.acme.example/v1", base_key_env="sk-live-123", repeat="0", suite=str(suite.pk))
    page = operator.post("/pairs/add/", data)
    html = page.content.decode()
    assert page.status_code == 422 and "Not saved." in html
    assert "fast base URL: &#x27;api.acme.example/v1&#x27; has no scheme: write it out" in html
    assert "base key variable: &#x27;sk-live-123&#x27;: an endpoint&#x27;s key variable" in html
    assert "Repeat: Ensure this value is greater than or equal to 1." in html
    assert 'value="api.acme.example/v1"' in html and 'value="demo-base"' in html
    assert not Endpoint.objects.exists() and not Pair.objects.exists()


def test_a_saved_pair_gets_its_schedules_rule_and_audit_entries(admin):
    operator = admin  # the pair's servers are local
    Channel.objects.create(name="ops", kind="email", target="ops@example.com")
    suite = factories.suite("smoke")
    page = operator.post("/pairs/add/", form("http://127.0.0.1:9/v1", suite=str(suite.pk)))
    assert page.status_code == 302 and page["Location"] == "/pairs/acme/"
    pair = Pair.objects.select_related("fast", "base").get(name="acme")
    assert (pair.fast.name, pair.base.name, pair.repeat) == ("acme-fast", "acme-base", 2)
    tasks = {t.name: t for t in PeriodicTask.objects.filter(name__endswith=":acme")}
    assert tasks["probe:acme"].interval.every == 900 and tasks["probe:acme"].enabled
    assert tasks["audit:acme"].interval.every == 21600
    assert json.loads(tasks["probe:acme"].args) == ["acme", "probe"]
    rule = AlertRule.objects.get(name="acme-outputs-differ")
    assert rule.metric == "verdict_different" and [c.name for c in rule.channels.all()] == ["ops"]
    logged = set(ConfigChange.objects.values_list("model", "object_repr"))
    assert {("endpoint", "acme-fast"), ("pair", "acme")} <= logged
    again = operator.post("/pairs/add/", form("http://127.0.0.1:9/v1", suite=str(suite.pk)))
    assert again.status_code == 422 and "a pair named &#x27;acme&#x27; exists already" in (
        again.content.decode()
    )


def test_test_connection_says_what_each_endpoint_answered(admin, demo_vendor_url, refusing_url):
    operator = admin  # the pair's servers are local
    data = form(demo_vendor_url, base_base_url=refusing_url, action="test")
    page = operator.post("/pairs/add/", data, HTTP_HX_REQUEST="true")
    html = page.content.decode()
    assert page.status_code == 200 and html.lstrip().startswith('<div class="connection"')
    assert 'data-tier="fast"' in html and "answered" in html and "HTTP 200" in html
    assert f"failed: HTTP 401: {NO_KEY}" in html.replace("&#x27;", "'")
    assert not Pair.objects.exists()  # testing stores nothing but the audit entries
    assert ConfigChange.objects.filter(action="tested").count() == 2


def test_the_pair_page_tests_its_connection(operator, demo_vendor_url):
    pair = factories.vendor_pair(demo_vendor_url, suite="smoke")
    page = operator.post(f"/pairs/{pair.name}/test-connection/", HTTP_HX_REQUEST="true")
    html = page.content.decode()
    assert page.status_code == 200 and html.count('class="check answered"') == 2


def test_a_vendor_preset_fills_each_tier_from_its_own_preset(operator):
    """Anthropic fast mode chosen, URLs and keys left empty: each endpoint gets its tier's
    preset (URL, key variable, body, beta header, served-tier field, expected tier), the typed
    model kept; a generic choice with no URL is refused on that field instead."""
    suite = factories.suite("smoke")
    blank = {"fast_base_url": "", "base_base_url": "", "suite": str(suite.pk)}
    page = operator.post(
        "/pairs/add/",
        form("", preset="anthropic-fast", fast_model="claude-x", base_model="claude-x", **blank),
    )
    assert page.status_code == 302, page.content.decode()[:2000]
    pair = Pair.objects.select_related("fast", "base").get(name="acme")
    fast, base = pair.fast, pair.base
    assert (fast.preset, base.preset) == ("anthropic-fast", "anthropic-standard")
    assert fast.base_url == "https://api.anthropic.com/v1" and fast.protocol == "anthropic"
    assert fast.api_key_env == "ANTHROPIC_API_KEY" and fast.model == "claude-x"
    assert fast.extra_body == {"speed": "fast"} and base.extra_body == {"speed": "standard"}
    assert fast.extra_headers.get("anthropic-beta") == "fast-mode-2026-02-01"
    assert (fast.expected_tier, base.expected_tier) == ("fast", "standard")
    # the vendor's own claim, in its metric: "up to 2.5x output tokens/s"
    assert pair.claim is not None and pair.claim.text() == "2.5× output tok/s"
    generic = operator.post("/pairs/add/", form("", name="acme2", **blank))
    assert generic.status_code == 422 and not Pair.objects.filter(name="acme2").exists()
