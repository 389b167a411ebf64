"""API keys: read from the named environment variable at request time, sent to the vendor,
and found nowhere in the database afterwards, even when the request fails."""

import json
import logging
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.core import serializers
from django.db import connection
from django.test import Client
from django.utils import timezone

from evals.vendors.simulated import FAULT_MODELS
from monitor.models import Endpoint, Pair, Run, Sample, Suite
from monitor.reporting.sla import build_sla_report, render_csv, render_html, render_text
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.setup import roles
from monitor.setup.suites import sync_builtin_suite
from tests import factories
from tests.support import CANARY, canary_forms

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
        local=True, name="ok", base_url=f"{vendor}/v1", model="m", api_key_env="ACME_TEST_KEY"
    )
    bad = Endpoint.objects.create(
        local=True, name="bad", base_url=f"{vendor}/fail/v1", model="m", api_key_env="ACME_TEST_KEY"
    )
    pair = Pair.objects.create(
        name="s", fast=bad, base=ok, suite=sync_builtin_suite(name="smoke"), repeat=1
    )
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


FAULTS = [*FAULT_MODELS, "demo-base", "demo-fast"]  # every fault kind, and the plain tiers


def canary_hits(text: str, where: str) -> list[str]:
    """Where the canary shows, in any form the scrubber must cover (``canary_forms``)."""
    low = text.lower()
    return [f"{where}: {form!r}" for form in canary_forms(CANARY) if form.lower() in low]


def database_text() -> str:
    """Everything the database holds: ``pg_dump`` of the test database, or the SQLite file."""
    db = connection.settings_dict
    if connection.vendor == "postgresql":
        dump = subprocess.run(
            [
                "pg_dump",
                "--data-only",
                "-h",
                db["HOST"] or "127.0.0.1",
                "-p",
                str(db["PORT"] or 5432),
                "-U",
                db["USER"] or "postgres",
                db["NAME"],
            ],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PGPASSWORD": db["PASSWORD"] or ""},
        )
        assert "COPY public.monitor_sample" in dump.stdout
        return dump.stdout
    files = [Path(db["NAME"]), Path(f"{db['NAME']}-wal")]
    return "".join(p.read_bytes().decode("utf-8", "replace") for p in files if p.exists())


@pytest.mark.long
@pytest.mark.django_db(transaction=True)  # committed rows, so pg_dump sees them
def test_a_canary_key_through_every_fault_is_found_nowhere(
    demo_vendor_url, vendor, monkeypatch, caplog, capfd
):
    """The fault matrix: each fault of the simulated vendor (and a 401 that echoes the key) as
    the fast tier of its own probe run, with the key read from a variable that ends in a
    newline. Afterwards the key appears in no form in the database dump, the logs, the run,
    sample, pair, speed and verdict pages, or the SLA report in text, CSV and HTML."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("CANARY_KEY", f"{CANARY} \n")
    sync_builtin_suite(name="smoke")
    base = Endpoint.objects.create(
        local=True,
        name="base",
        base_url=demo_vendor_url,
        model="demo-base",
        api_key_env="CANARY_KEY",
    )
    fast_urls = {model: demo_vendor_url for model in FAULTS}
    fast_urls["echo-401"] = f"{vendor}/fail/v1"
    runs = []
    for model, url in fast_urls.items():
        slug = model.replace("demo-", "")
        fast = Endpoint.objects.create(
            local=True,
            name=f"f-{slug}",
            base_url=url,
            model=model,
            api_key_env="CANARY_KEY",
            timeout_s=2,
        )
        pair = Pair.objects.create(
            name=f"p-{slug}", fast=fast, base=base, suite=Suite.objects.get(name="smoke"), repeat=1
        )
        runs.append(execute_run(run_id=create_run(pair=pair).id, cases_limit=2))
    assert f"Bearer {CANARY}" in VendorRecordingAuth.seen  # sent, stripped, to the vendor
    planned = sum(r.planned for r in runs)
    stored = Sample.objects.count()
    classes = set(Sample.objects.filter(tier="fast").values_list("error_class", flat=True))

    client = Client()
    client.force_login(factories.user("ops", roles.VIEWER, password="x-Long-pass-42"))
    pages = ["/", "/metrics/"]
    for run in runs:
        pages += [
            f"/runs/{run.id}/",
            f"/pairs/{run.pair.name}/",
            f"/pairs/{run.pair.name}/speed/",
            f"/pairs/{run.pair.name}/verdict/",
        ]
    pages += [f"/samples/{pk}/" for pk in Sample.objects.values_list("pk", flat=True)]
    hits = []
    for page in pages:
        response = client.get(page)
        assert response.status_code == 200, page
        hits += canary_hits(response.content.decode(), page)
    iso = timezone.now().isocalendar()
    report = build_sla_report(week=f"{iso.year}-W{iso.week:02d}")
    assert report.endpoints, "the report covers this week's samples"
    for render in (render_text, render_csv, render_html):
        hits += canary_hits(render(report), render.__name__)
    hits += canary_hits(database_text(), "database")
    out, err = capfd.readouterr()
    hits += canary_hits(caplog.text + out + err, "logs")

    print(
        f"fault matrix: {len(fast_urls)} faults tried, "
        f"{sum(r.status == 'done' for r in runs)} runs completed, {planned - stored} samples "
        f"lost, {len(hits)} secrets found; fast-tier classes {sorted(classes)}"
    )
    assert hits == []
    # each run ended; one whose fast requests all failed is failed in the vendor's words
    # (``monitor.derived.failures``), never by a crash
    assert all(r.status == "done" or r.error.startswith("fast tier: ") for r in runs)
    assert stored == planned == 4 * len(runs)
    assert {
        "empty_stream",
        "body_too_large",
        "timeout",
        "http_status",
        "rate_limited",
        "malformed_stream",
        "stream_incomplete",
    } <= classes
