"""One validation for an endpoint's base URL, a pair and a channel, whoever writes them: the
rules (``monitor.setup.validation``), then the same refusal through ``apply_config`` (with the
file's line) and through the admin's add form, with nothing written either way."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from monitor.models import Endpoint, Pair
from monitor.setup.config import ConfigError, apply_config_text
from monitor.setup.validation import base_url_problem
from tests import factories

REFUSED = [
    ("api.openai.com/v1", "has no scheme: write it out, e.g. https://api.openai.com/v1"),
    ("ftp://api.vendor.com/v1", "ftp:// is not allowed"),
    ("file:///etc/passwd", "file:// is not allowed"),
    ("http://api.vendor.com/v1", "http:// sends the key in clear"),
    ("https://127.0.0.1:5432/v1", "'127.0.0.1' is a loopback address"),
    ("https://[::1]/v1", "'::1' is a loopback address"),
    ("https://10.1.2.3/v1", "'10.1.2.3' is a private address"),
    ("https://192.168.0.9/v1", "is a private address"),
    ("https://169.254.169.254/latest", "'169.254.169.254' is a link-local address"),
    ("https://2130706433/v1", "'2130706433' is a loopback address"),  # 127.0.0.1 as a number
    ("https://0x7f.1/v1", "is a loopback address"),
    ("https://[::ffff:10.0.0.1]/v1", "is an IPv4-mapped address of 10.0.0.1, a private address"),
    ("https://0.0.0.0/v1", "is a private address"),
    ("https://[ff02::1]/v1", "is a multicast address"),
    # IPv6 addresses that deliver to an IPv4 one, judged by it (issue 31, finding 7)
    ("https://[64:ff9b::7f00:1]/v1", "is a NAT64 address of 127.0.0.1, a loopback address"),
    ("https://[64:ff9b::a9fe:a9fe]/x", "NAT64 address of 169.254.169.254, a link-local"),
    ("https://[64:ff9b:1::a00:1]/v1", "is a local-use NAT64 address"),
    ("https://[::127.0.0.1]/v1", "is an IPv4-compatible address of 127.0.0.1"),
    ("https://[::8.8.8.8]/v1", "is an IPv4-compatible address of 8.8.8.8 (deprecated)"),
    ("https://[2002:7f00:1::]/v1", "is a 6to4 address of 127.0.0.1, a loopback address"),
    ("https://[2002:a00:1::1]/v1", "is a 6to4 address of 10.0.0.1, a private address"),
    ("https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/v1", "is a Teredo address of 127.0.0.1"),
    ("https://100.64.0.1/v1", "is a non-public address"),  # shared address space (CGNAT)
    ("https://localhost:8080/v1", "'localhost' is this machine"),
    ("https://metadata.google.internal/x", "is this machine or the local network"),
    ("https://user:pw@api.vendor.com/v1", "no user or password in the URL"),
    ("https:///v1", "has no host"),
]


@pytest.mark.parametrize(("url", "problem"), REFUSED)
def test_a_base_url_that_is_not_https_to_a_public_host_is_refused(url, problem):
    said = base_url_problem(url, local=False)
    assert said is not None and problem in said


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8811/v1", "https://[::1]/v1", "http://llm.local/v1", "http://10.0.0.5"],
)
def test_a_local_endpoint_may_use_http_and_private_addresses(url):
    assert base_url_problem(url, local=True) is None
    assert base_url_problem(url, local=False) is not None


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com/v1",
        "https://api.anthropic.com",
        "https://8.8.8.8/v1",
        "https://[64:ff9b::808:808]/v1",  # NAT64 of a public address: DNS64 networks use it
        "https://[2606:4700::1111]/v1",
    ],
)
def test_https_to_a_public_host_is_accepted(url):
    assert base_url_problem(url, local=False) is None


def test_a_local_endpoint_still_needs_a_scheme_and_http():
    assert "ftp:// is not allowed" in base_url_problem("ftp://127.0.0.1/", local=True)
    assert "has no scheme" in base_url_problem("127.0.0.1:8811/v1", local=True)


@pytest.mark.django_db
def test_the_model_refuses_it_and_a_simulated_endpoint_counts_as_local():
    with pytest.raises(ValidationError, match="base_url.*loopback"):
        Endpoint(name="e", base_url="https://127.0.0.1/v1", model="m").full_clean()
    Endpoint(name="e", base_url="http://127.0.0.1/v1", model="m", local=True).full_clean()
    Endpoint(name="s", base_url="http://127.0.0.1/v1", model="m", simulated=True).full_clean()


CONFIG = """\
endpoints:
  - name: fast
    base_url: {url}
    model: m{local}
  - name: base
    base_url: https://api.vendor.example/v1
    model: m
pairs:
  - name: p
    fast: fast
    base: {base}
    suite: smoke
"""


@pytest.mark.django_db
def test_apply_config_names_the_line_and_writes_nothing():
    text = CONFIG.format(url="http://169.254.169.254/latest", local="", base="base")
    with pytest.raises(ConfigError) as caught:
        apply_config_text(text, source="t.yaml")
    assert "t.yaml:3: endpoints[0].base_url: 'http://169.254.169.254/latest'" in str(caught.value)
    assert not Endpoint.objects.exists()
    text = CONFIG.format(url="http://127.0.0.1:9/v1", local="\n    local: true", base="base")
    apply_config_text(text, source="t.yaml")
    assert Endpoint.objects.get(name="fast").local


@pytest.mark.django_db
def test_apply_config_refuses_a_pair_of_one_endpoint_with_its_line():
    text = CONFIG.format(url="https://api.vendor.example/v1", local="", base="fast")
    with pytest.raises(ConfigError, match=r"t.yaml:11: pairs\[0\].base: fast and base must be"):
        apply_config_text(text, source="t.yaml")
    assert not Endpoint.objects.exists() and not Pair.objects.exists()


@pytest.mark.django_db
def test_the_admin_add_form_shows_the_problem_and_saves_nothing(client):
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    form = {
        "name": "meta",
        "protocol": "openai",
        "base_url": "https://169.254.169.254/latest",
        "model": "m",
        "max_concurrency": 4,
        "timeout_s": 30,
        "extra_body": "{}",
        "extra_headers": "{}",
        "max_tokens_field": "max_tokens",
        "served_tier_fields": "[]",
    }
    response = client.post("/admin/monitor/endpoint/add/", form)
    assert response.status_code == 200
    assert "is a link-local address" in response.content.decode()
    assert not Endpoint.objects.exists()
    response = client.post("/admin/monitor/endpoint/add/", {**form, "base_url": "api.x.com/v1"})
    assert "has no scheme: write it out, e.g. https://api.x.com/v1" in response.content.decode()
    assert not Endpoint.objects.exists()  # not saved as a guessed http://api.x.com/v1
    response = client.post("/admin/monitor/endpoint/add/", {**form, "local": "on"})
    assert response.status_code == 302
    assert Endpoint.objects.get(name="meta").local


@pytest.mark.django_db
def test_the_admin_refuses_repeat_zero_and_one_endpoint_twice(client):
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    pair = factories.pair()
    form = {"name": "demo", "fast": pair.fast_id, "suite": pair.suite_id, "active": "on"}
    response = client.post(
        f"/admin/monitor/pair/{pair.pk}/change/", {**form, "base": pair.fast_id, "repeat": "0"}
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert "fast and base must be different endpoints" in html and "must be ≥ 1" in html
    pair.refresh_from_db()
    assert pair.base_id != pair.fast_id and pair.repeat >= 1
