"""API keys: read from the named environment variable at request time, sent to the vendor,
and found nowhere in the database afterwards, even when the request fails."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import serializers

from monitor.models import Endpoint, Pair, Run, Sample
from monitor.services.pipeline import execute_run
from monitor.services.runs import create_run
from monitor.services.suites import sync_builtin_suite

SECRET = "sk-test-7f3a9c1e5b2d4f6a8c0e"


class VendorRecordingAuth(BaseHTTPRequestHandler):
    """A tiny OpenAI-style vendor: answers the right key with a stream, others with 401."""

    seen: list[str] = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        auth = self.headers.get("authorization", "")
        VendorRecordingAuth.seen.append(auth)
        if auth != f"Bearer {SECRET}" or "fail" in self.path:
            body = json.dumps({"error": {"message": f"bad key {auth}"}}).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for chunk in (
            {"choices": [{"delta": {"content": "hi"}, "index": 0}]},
            {"choices": [{"delta": {}, "finish_reason": "stop", "index": 0}]},
            {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}},
        ):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


@pytest.fixture
def vendor():
    server = ThreadingHTTPServer(("127.0.0.1", 0), VendorRecordingAuth)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.django_db
def test_it_sends_the_key_from_the_environment_and_stores_it_nowhere(vendor, monkeypatch):
    monkeypatch.setenv("ACME_TEST_KEY", SECRET)
    ok = Endpoint.objects.create(
        name="ok", base_url=f"{vendor}/v1", model="m", api_key_env="ACME_TEST_KEY"
    )
    bad = Endpoint.objects.create(
        name="bad", base_url=f"{vendor}/fail/v1", model="m", api_key_env="ACME_TEST_KEY"
    )
    pair = Pair.objects.create(name="s", fast=bad, base=ok, suite=sync_builtin_suite(name="smoke"))
    run = execute_run(run_id=create_run(pair=pair).id, cases_limit=2)
    assert f"Bearer {SECRET}" in VendorRecordingAuth.seen
    assert Sample.objects.filter(run=run, tier="base", ok=True).count() == 2
    assert set(
        Sample.objects.filter(run=run, tier="fast").values_list("error_class", flat=True)
    ) == {"http_status"}
    dump = serializers.serialize(
        "json", [*Endpoint.objects.all(), *Run.objects.all(), *Sample.objects.all()]
    )
    assert SECRET not in dump
