"""A vendor that echoes the API key back in every field and encoding it can: after one run of
each kind through the product's path, the key is found in no form in the database, the pages,
the exports, the API or the SLA report."""

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import Client
from django.utils import timezone

from monitor.models import Case, Endpoint, Pair, Sample, Suite
from monitor.reporting.pdf import render_report_html
from monitor.reporting.sla import build_sla_report, render_csv, render_html, render_text
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.setup import roles
from monitor.setup.api_tokens import create_token
from tests import factories
from tests.monitor.test_secrets import database_text
from tests.support import CANARY, key_decoded_hits

K = CANARY
PAD = "p" * 190  # so a cut to 200 characters made before the scrubber leaves 10 of the key
# generated code that prints the key rebuilt from pieces too short to be found in the text
CODE = (
    "```python\ndef f():\n    return 1\n\n"
    "print('sk-' + 'canary-' + 'Zq8xW2v' + 'Lm5Rt9Y' + 'p3Kd7N')\n```"
)
ENCODED = {
    "base64 of Bearer key at 3 alignments": " ".join(
        base64.b64encode(f"{pad}Bearer {K}".encode()).decode() for pad in ("", "x", "xy")
    ),
    "base64 of a JSON object": base64.b64encode(json.dumps({"api_key": K}).encode()).decode(),
    "urlsafe base64": base64.urlsafe_b64encode(f"?{K}".encode()).decode(),
    "hex": K.encode().hex(),
    "reversed": K[::-1],
    "zero-width-joined": "\u200b".join(K),
    "U+2010 hyphens": K.replace("-", "\u2010"),
    "full-width": "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in K),
    "upper case": K.upper(),
}
KINDS = [
    "text",  # every encoding above in the text, and the sandboxed code's output
    "fields",  # service_tier, model, fingerprint, kept headers, finish reason, reasoning
    "tool-call",  # name and arguments
    "logprobs",  # the key split across tokens
    "tier-header",  # a served-tier header the endpoint names
    "tier-dotted",  # a dotted served-tier JSON key the endpoint names
    "401",  # an error body with the key after 190 characters
    "in-stream-error",  # an error event in a 200 stream, the key after 190 characters
]


class EchoVendor(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        kind = self.path.split("/")[1]
        if kind == "401":
            return self._json(401, {"error": {"message": f"{PAD}bad key Bearer {K}"}})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("x-request-id", ENCODED["base64 of a JSON object"])
        self.send_header("x-ratelimit-remaining", ENCODED["hex"])
        self.send_header("x-served-tier", "\xad".join(K))  # soft hyphens: latin-1
        self.end_headers()
        events: list[dict] = []
        if kind == "in-stream-error":
            events.append({"error": {"message": f"{PAD}{K}"}})
        elif kind == "logprobs":
            tokens = [CODE, " key: ", *(K[i : i + 3] for i in range(0, len(K), 3))]
            events += [
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"content": t},
                            "logprobs": {
                                "content": [{"token": t, "logprob": -0.1, "top_logprobs": []}]
                            },
                        }
                    ]
                }
                for t in tokens
            ]
        elif kind == "tool-call":
            call = {
                "index": 0,
                "id": "c1",
                "type": "function",
                "function": {"name": f"f_{K}", "arguments": json.dumps({"q": K})},
            }
            events.append({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
        else:
            text = CODE + "\n" + "\n".join(f"{name}: {v}" for name, v in ENCODED.items())
            events.append({"choices": [{"index": 0, "delta": {"content": text}}]})
        if kind == "fields":
            events[0].update(
                model="m" + ENCODED["zero-width-joined"],
                system_fingerprint=ENCODED["reversed"],
                service_tier="t-" + K,
            )
            events[0]["choices"][0]["delta"]["reasoning_content"] = ENCODED["full-width"]
        events.append(
            {
                "choices": [{"index": 0, "delta": {}, "finish_reason": f"s{K}"}],
                "tier_info": {"tier": f"{PAD[:20]}{K}"},
            }
        )
        events.append({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 9}})
        for event in events:
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def _json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def echo_vendor():
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoVendor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def hits(text: str, where: str) -> list[str]:
    return [f"{where}: {h}" for h in key_decoded_hits(text)]


@pytest.mark.django_db(transaction=True)  # committed rows, so pg_dump sees them
def test_a_key_echoed_in_every_field_and_encoding_is_found_nowhere(echo_vendor, monkeypatch):
    monkeypatch.setenv("CANARY_KEY", K)
    suite = Suite.objects.create(name="echo")
    Case.objects.create(
        suite=suite,
        key="code",
        category="coding",
        messages=[{"role": "user", "content": "write f"}],
        unit_tests="assert f() == 1\n",
        entry_point="f",
    )
    tier_fields = {"tier-header": ["x-served-tier"], "tier-dotted": ["tier_info.tier"]}
    base = Endpoint.objects.create(
        local=True,
        name="base",
        base_url=f"{echo_vendor}/text/v1",
        model="m",
        api_key_env="CANARY_KEY",
    )
    runs = []
    for kind in KINDS:
        fast = Endpoint.objects.create(
            local=True,
            name=f"f-{kind}",
            base_url=f"{echo_vendor}/{kind}/v1",
            model="m",
            api_key_env="CANARY_KEY",
            served_tier_fields=tier_fields.get(kind, []),
        )
        pair = Pair.objects.create(name=f"p-{kind}", fast=fast, base=base, suite=suite, repeat=1)
        runs.append(execute_run(run_id=create_run(pair=pair).id))
    # a vendor that answers every request with an error fails its run, in its own words
    assert all(
        r.status == "done" or (r.status == "failed" and "fast tier" in r.error) for r in runs
    )
    assert any(r.status == "done" for r in runs)
    fast_rows = Sample.objects.filter(tier="fast")
    assert {s.endpoint.name for s in fast_rows} == {f"f-{k}" for k in KINDS}
    # the echoes reached the fields they were aimed at (else the test proves nothing)
    assert Sample.objects.filter(endpoint__name="f-tier-header").exclude(served_tier="").exists()
    assert Sample.objects.exclude(tests_detail__output="").filter(tier="base").exists()

    client = Client()
    viewer = factories.user("ops", roles.VIEWER, password="x-Long-pass-42")
    client.force_login(viewer)
    _, token = create_token(user=viewer)
    found: list[str] = []
    pages = []
    for run in runs:
        pages += [
            f"/runs/{run.id}/",
            f"/runs/{run.id}/samples.csv?text=1",
            f"/runs/{run.id}/samples.json?text=1",
            f"/pairs/{run.pair.name}/",
            f"/pairs/{run.pair.name}/runs.csv",
        ]
    pages += [f"/samples/{pk}/" for pk in Sample.objects.values_list("pk", flat=True)]
    for page in pages:
        response = client.get(page)
        assert response.status_code == 200, page
        body = b"".join(response.streaming_content) if response.streaming else response.content
        found += hits(body.decode(), page)
    for run in runs:
        url = f"/api/runs/{run.id}/samples?include_text=true"
        response = client.get(url, HTTP_AUTHORIZATION=f"Bearer {token}")
        assert response.status_code == 200, url
        found += hits(response.content.decode(), url)
    iso = timezone.now().isocalendar()
    report = build_sla_report(week=f"{iso.year}-W{iso.week:02d}")
    for render in (render_text, render_csv, render_html, render_report_html):
        found += hits(render(report), render.__name__)
    found += hits(database_text(), "database")
    print(f"key echoes: {len(KINDS)} kinds, {len(ENCODED)} encodings, {len(found)} hits")
    assert found == []
