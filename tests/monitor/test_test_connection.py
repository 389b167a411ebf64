"""Test connection: one request per endpoint through the product's client against real
servers on 127.0.0.1 (the simulated vendor, a server answering 401, a closed port); what it
says, that it sends nothing without its key, and that only words without the key are kept."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from monitor.models import ConfigChange, Endpoint
from monitor.setup import connection
from tests.factories import free_port, vendor_pair
from tests.monitor import test_vendor_failures
from tests.monitor.test_vendor_failures import NO_KEY, Refusing
from tests.support import CANARY

refusing_url = test_vendor_failures.refusing_url  # the 401 server, as a fixture here

pytestmark = pytest.mark.django_db


def test_an_answering_endpoint_shows_status_model_usage_and_ttft(demo_vendor_url):
    pair = vendor_pair(demo_vendor_url, suite="smoke")
    got = connection.check(pair.fast)
    assert got.ok and got.status == 200 and got.message == ""
    assert got.model_id.startswith("demo-fast") and got.completion_tokens
    assert got.ttft_ms is not None and got.ttft_ms > 0
    assert got.summary.startswith("ok · HTTP 200 · model demo-fast")
    assert "TTFT" in got.summary and "tokens" in got.summary


def test_a_refusal_and_a_closed_port_say_what_the_vendor_said(refusing_url):
    # unsaved (the form's), and local: the test's own servers on 127.0.0.1
    refused = Endpoint(name="acme-fast", base_url=refusing_url, model="m", local=True)
    closed_url = f"http://127.0.0.1:{free_port()}/v1"
    closed = Endpoint(name="acme-base", base_url=closed_url, model="m", local=True)
    assert connection.check(refused).summary == f"failed: HTTP 401: {NO_KEY}"
    down = connection.check(closed)
    assert not down.ok
    assert down.message.startswith("vendor unreachable: cannot connect to 127.0.0.1")


def test_an_unset_key_variable_is_named_and_nothing_is_sent(refusing_url, monkeypatch):
    monkeypatch.delenv("ACME_API_KEY", raising=False)
    endpoint = Endpoint(name="acme", base_url=refusing_url, model="m", api_key_env="ACME_API_KEY")
    got = connection.check(endpoint)
    assert not got.ok and "ACME_API_KEY" in got.message and "nothing was sent" in got.message
    assert Refusing.seen == []


def test_the_command_prints_each_tier_exits_non_zero_and_logs_no_key(
    demo_vendor_url,
    refusing_url,
    monkeypatch,
):
    monkeypatch.setenv("ECHO_API_KEY", CANARY)
    pair = vendor_pair(demo_vendor_url, suite="smoke")
    fast = Endpoint.objects.filter(pk=pair.fast.pk)
    fast.update(model="demo-echokey", api_key_env="ECHO_API_KEY")
    out = StringIO()
    call_command("test_connection", pair.name, stdout=out)  # both answered: exit 0
    assert "fast fast: ok · HTTP 200" in out.getvalue() and "base base: ok" in out.getvalue()
    Endpoint.objects.filter(pk=pair.base.pk).update(base_url=refusing_url)
    with pytest.raises(CommandError, match="test connection failed: base"):
        call_command("test_connection", pair.name, stdout=out)
    assert f"base base: failed: HTTP 401: {NO_KEY[:40]}" in out.getvalue()
    logged = list(ConfigChange.objects.filter(action="tested").values_list("object_id", "diff"))
    assert [name for name, _ in logged] == ["base", "fast", "base", "fast"]
    assert CANARY not in out.getvalue() and CANARY not in repr(logged)
    assert CANARY[8:20] not in repr(logged)  # nor a piece of it


def test_an_unknown_name_is_refused_by_name():
    with pytest.raises(CommandError, match="no pair or endpoint named 'nope'"):
        call_command("test_connection", "nope")


def test_the_endpoint_admin_tests_the_selected_endpoints(
    admin_client, demo_vendor_url, refusing_url
):
    pair = vendor_pair(demo_vendor_url, suite="smoke")
    Endpoint.objects.filter(pk=pair.base.pk).update(base_url=refusing_url)
    page = admin_client.post(
        "/admin/monitor/endpoint/",
        {"action": "test_connection", "_selected_action": [pair.fast.pk, pair.base.pk]},
        follow=True,
    )
    html = page.content.decode().replace("&#x27;", "'")
    assert "Fast: ok · HTTP 200 · model demo-fast" in html  # the admin capitalises
    assert f"Base: failed: HTTP 401: {NO_KEY}" in html
    assert ConfigChange.objects.filter(action="tested", source="admin").count() == 2
