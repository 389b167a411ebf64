"""The add-a-pair page cannot aim the server at its own network (issue 31, finding 2): an
operator is not offered "self-hosted" and is refused when the box is sent anyway; a name that
resolves to 127.0.0.1 is refused after resolution; a redirect is not followed; and neither the
page nor the audit log echoes the body of whatever answered. Real servers on 127.0.0.1: a
capture server that counts every connection (nothing may reach it from the operator's path),
an admin's local endpoints that answer with a metadata-like body or a redirect; only the DNS
step is patched (``socket.getaddrinfo``), since DNS would leave the machine."""

from __future__ import annotations

import html
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from monitor.models import ConfigChange, Endpoint, Pair, Suite
from tests import factories
from tests.evals import test_client_addresses
from tests.evals.test_client_addresses import NAME

capture = test_client_addresses.capture  # the capture server, as a fixture here
name_to_loopback = test_client_addresses.name_to_loopback  # NAME resolves to 127.0.0.1

pytestmark = pytest.mark.django_db

SECRET_BODY = "ami-id: i-0abc AccessKeyId ASIA-META-SECRET-7f3c"  # what a metadata port says


def form(fast_url: str, base_url: str, **changes: str) -> dict[str, str]:
    return {
        "name": "acme",
        "preset": "openai",
        "fast_base_url": fast_url,
        "fast_model": "m",
        "fast_key_env": "",
        "base_base_url": base_url,
        "base_model": "m",
        "base_key_env": "",
        "suite": str((Suite.objects.filter(name="smoke").first() or factories.suite()).pk),
        "repeat": "2",
        "action": "test",
        **changes,
    }


def page_text(response) -> str:
    return html.unescape(response.content.decode())


@pytest.fixture
def operator(client):
    client.force_login(factories.user("olga", "operator"))
    return client


@pytest.fixture
def admin(client):
    client.force_login(factories.user("ada", "admin"))
    return client


class Answers(BaseHTTPRequestHandler):
    """``/meta/v1``: 200 text/plain with a metadata-like body; ``/html/v1``: 500 with it in an
    HTML page; ``/json/v1``: a vendor's JSON error; ``/redirect/v1``: 302 to ``target``."""

    target = ""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("content-length") or 0))
        kind = self.path.split("/")[1]
        status, ctype, body = {
            "meta": (200, "text/plain", SECRET_BODY),
            "html": (500, "text/html", f"<html><pre>{SECRET_BODY}</pre></html>"),
            "json": (400, "application/json", json.dumps({"error": {"message": "no such model"}})),
            "redirect": (302, "text/plain", SECRET_BODY),
        }[kind]
        self.send_response(status)
        self.send_header("content-type", ctype)
        if kind == "redirect":
            self.send_header("location", Answers.target)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def answers() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Answers)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_self_hosted_is_offered_to_an_admin_and_not_to_an_operator(operator, client):
    assert 'name="local"' not in operator.get("/pairs/add/").content.decode()
    client.force_login(factories.user("ada", "admin"))
    assert 'name="local"' in client.get("/pairs/add/").content.decode()


def test_an_operator_who_sends_self_hosted_anyway_is_refused_and_nothing_is_sent(
    operator, capture, monkeypatch
):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-canary-secret")
    url = f"http://127.0.0.1:{capture.port}/v1"
    data = form(url, url, local="on", fast_key_env="AWS_SECRET_ACCESS_KEY")
    tested = page_text(operator.post("/pairs/add/", data, HTTP_HX_REQUEST="true"))
    assert "self-hosted: only an admin may add an endpoint on this machine" in tested
    saved = operator.post("/pairs/add/", {**data, "action": "save"})
    assert saved.status_code == 422 and "only an admin may add" in page_text(saved)
    assert capture.received == []
    assert not Endpoint.objects.exists() and not Pair.objects.exists()
    assert not ConfigChange.objects.filter(action="tested").exists()


def test_a_name_that_resolves_to_loopback_is_refused_after_resolution(
    operator, capture, name_to_loopback, monkeypatch
):
    monkeypatch.setenv("ACME_API_KEY", "acme-canary-key")
    url = f"https://{NAME}:{capture.port}/v1"  # passes the save-time check: a public-looking name
    page = page_text(operator.post("/pairs/add/", form(url, url, fast_key_env="ACME_API_KEY")))
    said = f"refused before connecting: {NAME} resolves to 127.0.0.1, a loopback address"
    assert page.count(said) == 2, page[-3000:]
    assert capture.received == []
    logged = repr(list(ConfigChange.objects.filter(action="tested").values_list("diff")))
    assert said in logged and "acme-canary-key" not in logged
    operator.post("/pairs/add/", {**form(url, url), "action": "save"})  # saved: not local
    assert [e.local for e in Endpoint.objects.all()] == [False, False]
    assert all(e.spec().public_only for e in Endpoint.objects.all())  # so runs are refused too


def test_a_redirect_is_not_followed(admin, answers, capture):
    Answers.target = f"http://127.0.0.1:{capture.port}/v1/chat/completions"
    url = f"{answers}/redirect/v1"
    page = page_text(admin.post("/pairs/add/", form(url, url, local="on")))
    assert page.count("failed: HTTP 302") == 2
    assert capture.received == []


def test_a_reply_body_is_neither_shown_nor_stored_but_a_vendors_error_message_is(admin, answers):
    data = form(f"{answers}/meta/v1", f"{answers}/html/v1", local="on")
    page = page_text(admin.post("/pairs/add/", data))
    assert "ASIA-META-SECRET" not in page and "ami-id" not in page
    assert "failed: the reply is not a usable chat stream: malformed_stream (HTTP 200)" in page
    assert "failed: HTTP 500" in page
    vendor = form(f"{answers}/json/v1", f"{answers}/json/v1", local="on")
    assert page_text(admin.post("/pairs/add/", vendor)).count("HTTP 400: no such model") == 2
    logged = repr(list(ConfigChange.objects.filter(action="tested").values_list("diff")))
    assert "ASIA-META-SECRET" not in logged and "ami-id" not in logged
    assert "no such model" not in logged and logged.count("failed: HTTP 400") == 2
