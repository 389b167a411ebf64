"""A vendor that fails the requests fails the run, and every reader says what failed: a real
server on 127.0.0.1 answering 401 with OpenAI's error body, and a closed port."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.management import CommandError, call_command

from monitor.models import Alert, AlertRule, PairMonitorState, Run, Sample
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from tests.factories import free_port, vendor_pair

pytestmark = pytest.mark.django_db

NO_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header."
)


class Refusing(BaseHTTPRequestHandler):
    """OpenAI's answer to a request without a key; counts the requests it got."""

    seen: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("content-length") or 0))
        Refusing.seen.append(self.headers.get("authorization") or "")
        body = json.dumps({"error": {"message": NO_KEY, "type": "invalid_request_error"}})
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def refusing_url() -> Iterator[str]:
    Refusing.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture
def failing_pair(refusing_url):
    """Fast answers 401, base's port is closed: the issue's first hour."""
    pair = vendor_pair(refusing_url, repeat=1)
    pair.base.base_url = f"http://127.0.0.1:{free_port()}/v1"
    pair.base.save()
    AlertRule.objects.create(
        name="fast-pass-rate", pair=pair, metric="pass_rate", tier="fast", op="lt",
        threshold=0.8, last_k=1, min_n=1,
    )  # fmt: skip
    return pair


def test_it_fails_a_run_whose_requests_failed_and_says_what_failed(failing_pair):
    run = execute_run(run_id=create_run(pair=failing_pair).id, cases_limit=3)
    assert run.status == "failed"
    assert f"fast tier: HTTP 401: {NO_KEY} (3 of 3 requests failed)" in run.error
    assert "base tier: vendor unreachable: cannot connect to 127.0.0.1:" in run.error
    assert "(connection refused)" in run.error
    assert not run.error.startswith("VendorFailed")
    assert Sample.objects.filter(run=run).count() == 6  # every sample kept
    fast = run.summary_obj.tier("fast")
    assert fast.top_errors[0]["status"] == 401 and fast.top_errors[0]["n"] == 3


def test_failed_requests_are_not_failed_unit_tests(failing_pair):
    run = execute_run(run_id=create_run(pair=failing_pair).id, cases_limit=3)
    fast = run.summary_obj.tier("fast")
    assert fast.pass_rate is None and fast.n_tested == 0  # the coding suite: unit tests
    assert not Sample.objects.filter(run=run, tests_passed=False).exists()
    assert Sample.objects.filter(run=run, tests_detail__error_class="request_failed").count() == 6


def test_the_one_alert_names_the_vendors_refusal_not_a_pass_rate(failing_pair):
    first = execute_run(run_id=create_run(pair=failing_pair).id, cases_limit=2)
    execute_run(run_id=create_run(pair=failing_pair).id, cases_limit=2)
    alerts = list(Alert.objects.filter(pair=failing_pair))
    assert [a.rule.metric for a in alerts] == ["vendor_failed"]  # one, however many runs fail
    assert f"HTTP 401: {NO_KEY}" in alerts[0].message and alerts[0].run_id == first.id
    assert "pass rate" not in alerts[0].message


def test_an_answered_run_resolves_the_vendor_alert(failing_pair, demo_vendor_url):
    execute_run(run_id=create_run(pair=failing_pair).id, cases_limit=2)
    for endpoint in (failing_pair.fast, failing_pair.base):
        endpoint.base_url = demo_vendor_url
        endpoint.save()
    run = execute_run(run_id=create_run(pair=failing_pair).id, cases_limit=2)
    assert run.status == "done", run.error
    alert = Alert.objects.get(pair=failing_pair, rule__metric="vendor_failed")
    assert alert.resolved_at is not None


def test_probe_exits_non_zero_with_the_vendors_message(failing_pair):
    with pytest.raises(CommandError, match=r"failed: fast tier: HTTP 401: You didn't provide"):
        call_command("probe", failing_pair.name, "--cases", "2")


def test_an_unset_key_variable_fails_the_run_before_any_request(
    failing_pair, refusing_url, monkeypatch
):
    monkeypatch.delenv("ACME_UNSET_API_KEY", raising=False)
    failing_pair.fast.api_key_env = "ACME_UNSET_API_KEY"
    failing_pair.fast.save()
    run = execute_run(run_id=create_run(pair=failing_pair).id, cases_limit=2)
    assert run.status == "failed"
    assert "ACME_UNSET_API_KEY" in run.error and "fast endpoint 'fast'" in run.error
    assert "unset or empty" in run.error
    assert Refusing.seen == [] and not Sample.objects.filter(run=run).exists()


def test_a_failed_run_stays_out_of_the_baseline_and_the_trend(failing_pair):
    run = execute_run(run_id=create_run(pair=failing_pair).id, cases_limit=2)
    assert not Run.objects.trend().filter(id=run.id).exists()
    state = PairMonitorState.objects.filter(pair=failing_pair).first()
    assert state is None or state.last_probe_id != run.id
    assert run.summary_obj.drift is None  # never folded into the CUSUM


def test_run_pair_and_overview_pages_show_the_failure_in_red(failing_pair, admin_client):
    run = execute_run(run_id=create_run(pair=failing_pair).id, cases_limit=2)
    said = "fast tier: HTTP 401: You didn&#x27;t provide an API key"
    page = admin_client.get(f"/runs/{run.id}/").content.decode()
    assert 'class="error run-error"' in page and said in page
    assert "2 × HTTP 401: You didn&#x27;t provide an API key" in page  # status and message
    assert "2 failed requests not counted" in page
    page = admin_client.get(f"/pairs/{failing_pair.name}/").content.decode()
    assert "<strong>Failing:</strong>" in page and said in page
    page = admin_client.get("/").content.decode()
    assert '<span class="pstatus failing">failing</span>' in page and said in page


def test_an_error_rate_rule_still_fires_and_carries_what_failed(failing_pair):
    AlertRule.objects.create(
        name="fast-errors", pair=failing_pair, metric="error_rate", tier="fast", op="gt",
        threshold=0.5, last_k=1, min_n=2,
    )  # fmt: skip
    execute_run(run_id=create_run(pair=failing_pair).id, cases_limit=2)
    (alert,) = Alert.objects.filter(pair=failing_pair)  # no second, vendor_failed alert
    assert alert.rule.name == "fast-errors" and alert.value == 1.0
    assert f"What failed: fast tier: HTTP 401: {NO_KEY}" in alert.message
