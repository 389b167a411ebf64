"""A run survives replies that cannot be stored as they are (once, one NUL ended a whole run
on PostgreSQL): every value is made storable, a sample that still cannot be saved is kept as
``store_error``, and the request loop never runs on unread. Meant for PostgreSQL
(``DATABASE_URL``), and holds on SQLite too."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from monitor.models import Run, Sample
from monitor.runs import steps
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run, save_sample
from tests.factories import vendor_pair

CODE = "import sys\nsys.stdout.write('nul:\\x00 surrogate:\\udcff')\ndef fizzbuzz(n):\n  return n\n"


class HostileVendor(BaseHTTPRequestHandler):
    """OpenAI-style streams: ``/negative`` reports usage of -5 completion tokens (which no
    PositiveIntegerField takes); ``/code`` answers code that prints a NUL and a lone
    surrogate, so the sandbox's output carries them."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        content = f"```python\n{CODE}```" if self.path.startswith("/code") else "hello"
        usage = -5 if self.path.startswith("/negative") else 3
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for chunk in (
            {"choices": [{"index": 0, "delta": {"content": content}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": usage}},
        ):
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


@pytest.fixture
def hostile():
    server = ThreadingHTTPServer(("127.0.0.1", 0), HostileVendor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.django_db
def test_a_reply_with_nul_and_a_lone_surrogate_is_stored_and_the_run_finishes(demo_vendor_url):
    pair = vendor_pair(demo_vendor_url, fast_model="demo-nul", suite="smoke", repeat=2)
    run = execute_run(run_id=create_run(pair=pair).id, cases_limit=3)
    assert run.status == "done", run.error
    assert run.planned == run.completed == Sample.objects.filter(run=run).count() == 12
    fast = list(Sample.objects.filter(run=run, tier="fast"))
    assert len(fast) == 6 and all(s.ok for s in fast)
    assert all(s.text.startswith("NUL\ufffd and lone surrogate \ufffd: ") for s in fast)
    assert Sample.objects.filter(run=run, tier="base", ok=True).count() == 6


@pytest.mark.django_db
def test_sandbox_output_with_nul_and_a_lone_surrogate_is_stored(hostile):
    pair = vendor_pair(f"{hostile}/code/v1", suite="coding", repeat=1)
    run = execute_run(run_id=create_run(pair=pair).id, cases_limit=1)
    assert run.status == "done", run.error
    samples = list(Sample.objects.filter(run=run))
    assert len(samples) == 2 and all(s.ok and s.tests_passed is False for s in samples)
    assert "nul:\ufffd" in samples[0].tests_detail["output"]


@pytest.mark.django_db
def test_a_sample_that_cannot_be_saved_is_kept_as_store_error_and_the_run_goes_on(
    demo_vendor_url, hostile
):
    pair = vendor_pair(demo_vendor_url, fast_url=f"{hostile}/negative/v1", suite="smoke", repeat=1)
    run = execute_run(run_id=create_run(pair=pair).id, cases_limit=3)
    assert run.status == "done", run.error
    fast = Sample.objects.filter(run=run, tier="fast")
    assert fast.count() == 3 and set(fast.values_list("error_class", flat=True)) == {"store_error"}
    assert all(
        m.startswith("not stored: IntegrityError")
        for m in fast.values_list("error_message", flat=True)
    )
    assert Sample.objects.filter(run=run, tier="base", ok=True).count() == 3
    assert run.summary_obj.tier("fast").errors == {"store_error": 3}


@pytest.mark.django_db
def test_the_run_s_progress_counts_each_sample_in_the_transaction_that_stores_it(
    demo_vendor_url, hostile, monkeypatch
):
    """Stored rows and store errors alike: after each save the run's ``completed`` equals its
    samples, before the recount at the end of the measuring."""
    seen = []

    def watched(**kw):
        sample = save_sample(**kw)
        run = Run.objects.get(id=kw["run"].id)
        seen.append((run.completed, run.samples.count()))
        return sample

    monkeypatch.setattr(steps, "save_sample", watched)
    pair = vendor_pair(demo_vendor_url, fast_url=f"{hostile}/negative/v1", suite="smoke", repeat=1)
    run = execute_run(run_id=create_run(pair=pair).id, cases_limit=3)
    assert run.status == "done", run.error
    assert seen == [(n, n) for n in range(1, 7)]
    assert Sample.objects.filter(run=run, error_class="store_error").count() == 3


@pytest.mark.django_db
def test_the_request_loop_stops_when_the_run_stops_reading(demo_vendor_url, monkeypatch):
    def broken_save(**kw):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(steps, "save_sample", broken_save)
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=2)
    run = execute_run(run_id=create_run(pair=pair).id, cases_limit=5)
    assert run.status == "failed" and "the database went away" in run.error
    assert not [t for t in threading.enumerate() if t.name == f"run-{run.id}-loop"]


@pytest.mark.django_db
def test_empty_streams_count_against_availability(demo_vendor_url):
    pair = vendor_pair(demo_vendor_url, fast_model="demo-empty", suite="smoke", repeat=1)
    run = execute_run(run_id=create_run(pair=pair).id, cases_limit=3)
    fast, base = run.summary_obj.tier("fast"), run.summary_obj.tier("base")
    assert fast.errors == {"empty_stream": 3} and fast.availability == 0.0
    assert base.availability == 1.0
