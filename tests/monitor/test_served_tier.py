"""The served tier: recorded from the vendor's own report (OpenAI ``service_tier``, Anthropic
``usage.service_tier``, or a header / JSON key named on the endpoint), the downgrade rate per
run, its alert metric, and output-tokens-per-second in both vendor definitions."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evals.client import make_client, stream_chat
from evals.latency import downgrades, output_tps
from evals.records import ChatRequest, EndpointSpec, TimingRecord
from evals.vendors.simulated import serve_in_thread
from monitor.alerting.alerts import read_metric
from monitor.models import Alert, AlertRule
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from tests.factories import vendor_pair

ASK = ChatRequest(
    messages=[{"role": "user", "content": "Explain connection pooling"}], max_tokens=40
)


def fetch(ep: EndpointSpec, n: int = 1) -> list[TimingRecord]:
    async def go() -> list[TimingRecord]:
        async with make_client() as client:
            return await asyncio.gather(*(stream_chat(client, ep, ASK) for _ in range(n)))

    return asyncio.run(go())


def spec(url: str, model: str, protocol: str = "openai", **kw) -> EndpointSpec:
    return EndpointSpec(name=model, protocol=protocol, base_url=url, model=model, **kw)


def test_it_records_the_service_tier_each_protocol_reports():
    with serve_in_thread(time_scale=0.0) as url:
        (fast,) = fetch(spec(url, "demo-fast"))
        (base,) = fetch(spec(url, "demo-base"))
        (anthropic,) = fetch(spec(url, "demo-fast", "anthropic"))
    assert fast.ok and fast.served_tier == "priority"
    assert base.ok and base.served_tier == "default"
    assert anthropic.ok and anthropic.served_tier == "priority"


def test_the_demo_vendor_downgrades_a_share_of_fast_streams_under_load():
    with serve_in_thread(time_scale=0.3, downgrade_share=1.0, downgrade_above=2) as url:
        records = fetch(spec(url, "demo-fast"), n=8)
        (alone,) = fetch(spec(url, "demo-fast"))
    served = [r.served_tier for r in records]
    assert all(r.ok for r in records)
    assert served.count("priority") >= 2 and served.count("default") >= 1, served
    assert alone.served_tier == "priority"  # no load, no downgrade


class TierHeaderVendor(BaseHTTPRequestHandler):
    """Reports its tier in a header and in a nested JSON key, as some vendors do."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("X-Served-Tier", "flex")
        self.end_headers()
        for delta in ("Hello", " there", " friend"):
            chunk = {
                "model": "m",
                "meta": {"tier": "scale"},
                "choices": [{"index": 0, "delta": {"content": delta}}],
            }
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        done = {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self.wfile.write(b"data: " + json.dumps(done).encode() + b"\n\ndata: [DONE]\n\n")
        self.close_connection = True

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def tier_vendor():
    server = ThreadingHTTPServer(("127.0.0.1", 0), TierHeaderVendor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


def test_it_reads_the_tier_from_a_configured_header_or_json_key(tier_vendor):
    (by_header,) = fetch(spec(tier_vendor, "m", served_tier_fields=("x-served-tier", "meta.tier")))
    (by_key,) = fetch(spec(tier_vendor, "m", served_tier_fields=("meta.tier",)))
    (unset,) = fetch(spec(tier_vendor, "m"))
    assert by_header.ok and by_header.served_tier == "flex"
    assert by_key.served_tier == "scale"
    assert unset.ok and unset.served_tier == ""


def test_the_downgrade_rate_counts_unreported_requests_apart():
    block = downgrades(["priority", "default", "", "priority", "default"], "priority")
    assert block["n_reported"] == 4 and block["n_unreported"] == 1
    assert block["n_downgraded"] == 2 and block["downgrade_rate"] == 0.5
    assert downgrades(["default"], "")["downgrade_rate"] is None  # nothing expected
    assert downgrades(["", ""], "priority")["downgrade_rate"] is None  # nothing reported


def test_output_tokens_per_second_in_both_definitions():
    rec = TimingRecord(ok=True, ttft_ms=500.0, e2e_ms=2500.0, completion_tokens=101)
    assert output_tps(rec, definition="generation") == pytest.approx(101 / 2.0)
    assert output_tps(rec, definition="e2e") == pytest.approx(101 / 2.5)
    assert output_tps(TimingRecord(ok=False, ttft_ms=1, e2e_ms=2, completion_tokens=9)) is None
    with pytest.raises(ValueError, match="definition"):
        output_tps(rec, definition="tpot")


@pytest.mark.django_db
def test_a_run_stores_the_served_tier_and_alerts_on_the_downgrade_rate():
    with serve_in_thread(time_scale=0.0, downgrade_share=1.0, downgrade_above=0) as url:
        pair = vendor_pair(url, suite="smoke", repeat=1, fast_fields={"expected_tier": "priority"})
        rule = AlertRule.objects.create(
            name="downgraded",
            metric="downgrade_rate",
            tier="fast",
            op="gt",
            threshold=0.1,
            last_k=1,
            min_n=3,
        )
        run = execute_run(run_id=create_run(pair=pair, seed=3).id, cases_limit=4)
    assert run.status == "done", run.error
    fast = run.samples.filter(tier="fast")
    assert set(fast.values_list("served_tier", flat=True)) == {"default"}
    assert set(run.samples.filter(tier="base").values_list("served_tier", flat=True)) == {"default"}
    block = run.summary_obj.tier("fast").served_tier
    assert block["expected"] == "priority" and block["downgrade_rate"] == 1.0
    assert block["n_reported"] == fast.count()
    reading = read_metric(run.summary_obj, "downgrade_rate", "fast")
    assert reading.value == 1.0 and reading.n == fast.count()
    (alert,) = Alert.objects.filter(run=run)  # the pipeline evaluated the rules
    assert alert.rule == rule and "downgrade rate is 100.0%" in alert.message


@pytest.mark.django_db
def test_an_undowngraded_run_reads_zero_and_the_pair_page_charts_it(demo_vendor_url, admin_client):
    pair = vendor_pair(
        demo_vendor_url, suite="smoke", repeat=1, fast_fields={"expected_tier": "priority"}
    )
    run = execute_run(run_id=create_run(pair=pair, seed=3).id, cases_limit=3)
    assert run.summary_obj.tier("fast").downgrade_rate == 0.0
    assert run.summary_obj.tier("base").downgrade_rate is None  # none expected
    html = admin_client.get("/pairs/p/").content.decode()
    data = html.split('id="chart-downgrade-data">')[1].split("</script>")[0]
    figure = json.loads(data)
    assert figure["data"][0]["y"] == [0.0] and figure["data"][0]["customdata"] == [3]
    assert figure["layout"]["yaxis"]["title"]["text"] == "downgraded (%)"
