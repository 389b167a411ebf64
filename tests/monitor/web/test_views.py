"""The browser pages, through Django's test client, with rows built by the ORM.

Runs carry summaries built by ``tests.factories`` (the stored shape); the pages must show them
(never recompute), hide percentiles below the minimum n, label simulated endpoints and load no
remote script.
"""

from __future__ import annotations

import json
import re

import pytest
from django.utils import timezone

from monitor.models import Alert, AlertRule, Pair, Run, Sample
from monitor.web import sparkline
from tests import factories
from tests.monitor.web.pages import make_run, summary

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair(db) -> Pair:
    return factories.pair(claim_value=6)


@pytest.fixture
def runs(pair: Pair) -> list[Run]:
    return [
        make_run(pair, minutes_ago=30, summary=summary(fast_ttft=120.0)),
        make_run(pair, minutes_ago=20, summary=summary(n=3)),  # below min n
        make_run(pair, minutes_ago=10, summary=summary(fast_ttft=111.0)),
    ]


def figures(html: str) -> dict[str, dict]:
    found = re.findall(
        r'<script type="application/json" id="([\w-]+)-data">(.*?)</script>', html, re.S
    )
    return {cid: json.loads(body) for cid, body in found}


def test_it_requires_login(client, pair):
    for url in ("/", "/pairs/demo/", "/metrics/"):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/")


def test_it_serves_the_login_form(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert b'name="username"' in response.content and b'name="password"' in response.content


def test_it_lists_the_pair_with_numbers_from_the_newest_summary(admin_client, runs):
    html = admin_client.get("/").content.decode()
    assert '<a class="strong" href="/pairs/demo/">demo</a>' in html
    assert "simulated" in html
    assert "111 ms (n=20)" not in html  # P95 of fast, not P50
    assert "222 ms (n=20)" in html  # fast TTFT P95 of the newest run
    assert "987 ms (n=20)" in html  # base TTFT P95
    assert "5.00×" in html  # TTFT speed-up 555 / 111
    assert "91.2% (n=20)" in html and "98.7% (n=20)" in html  # similarity and noise floor
    assert "75.0% (n=4)" in html and "100.0% (n=4)" in html  # pass rate per tier
    assert 'hx-trigger="every 5s"' in html


def test_it_counts_open_alerts_only(admin_client, runs, pair):
    rule = AlertRule.objects.create(name="slow", metric="ttft_p95", threshold=100)
    Alert.objects.create(rule=rule, pair=pair, message="open one", value=222)
    Alert.objects.create(rule=rule, pair=pair, message="closed", resolved_at=timezone.now())
    html = admin_client.get("/").content.decode()
    assert 'href="/pairs/demo/timeline/#alerts">1</a>' in html
    page = admin_client.get("/pairs/demo/").content.decode()
    assert "open one" in page and "closed" not in page


def test_it_handles_htmx_with_the_partial_only(admin_client, runs):
    response = admin_client.get("/", headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html and "<nav" not in html
    assert html.lstrip().startswith('<div id="pairs-table"')
    assert "222 ms (n=20)" in html


def test_it_shows_n_too_small_below_min_n(admin_client, pair):
    make_run(pair, minutes_ago=1, summary=summary(n=3))
    html = admin_client.get("/").content.decode()
    assert "n too small (n=3)" in html
    run = Run.objects.get()
    assert "n too small (n=3)" in admin_client.get(f"/runs/{run.pk}/").content.decode()


def test_it_draws_the_pair_charts_with_titles_axes_and_n(admin_client, runs):
    html = admin_client.get("/pairs/demo/").content.decode()
    figs = figures(html)
    assert set(figs) == {"chart-ttft", "chart-e2e", "chart-similarity", "chart-pass-rate"}
    for cid in figs:
        assert f'id="{cid}" data-plotly-figure="{cid}-data"' in html
    ttft = figs["chart-ttft"]["layout"]
    assert ttft["yaxis"]["title"]["text"] == "TTFT (ms)"
    assert ttft["xaxis"]["title"]["text"] == "run time (UTC)"
    assert "n = 20" in ttft["title"]["text"] and "simulated" in ttft["title"]["text"]
    assert "below min n left out" in ttft["title"]["text"]
    assert figs["chart-e2e"]["layout"]["yaxis"]["title"]["text"] == "E2E (ms)"
    assert figs["chart-similarity"]["layout"]["yaxis"]["title"]["text"].endswith("(%)")
    assert figs["chart-pass-rate"]["layout"]["yaxis"]["title"]["text"] == "pass rate (%)"
    names = [t["name"] for t in figs["chart-ttft"]["data"]]
    # runs of 20 requests per tier, no rollups: P95 (n ≥ 59) is neither drawn nor promised
    assert names == ["base P50", "fast P50"]
    assert "no P95: needs n ≥ 59 in 12 runs" in ttft["title"]["text"]
    fast_p50 = next(t for t in figs["chart-ttft"]["data"] if t["name"].startswith("fast P50"))
    assert fast_p50["y"] == [120.0, None, 111.0]  # the n=3 run is a gap, not a number
    sim = {t["name"].split("<br>")[0]: t["y"] for t in figs["chart-similarity"]["data"]}
    assert sim["base vs base"][0] == pytest.approx(98.7)


def test_it_polls_the_pair_page_only_while_a_run_is_active(admin_client, runs, pair):
    assert 'hx-trigger="every 10s"' not in admin_client.get("/pairs/demo/").content.decode()
    make_run(pair, minutes_ago=0, status="running")
    html = admin_client.get("/pairs/demo/", headers={"HX-Request": "true"}).content.decode()
    assert html.lstrip().startswith('<div id="pair-live"') and 'hx-trigger="every 10s"' in html
    assert "<html" not in html


def test_it_leaves_audits_and_load_probes_out_of_the_trend(admin_client, runs, pair):
    make_run(pair, minutes_ago=5, kind="audit", summary=summary(fast_ttft=5000.0))
    make_run(pair, minutes_ago=4, kind="load", summary=summary(fast_ttft=7000.0))
    html = admin_client.get("/").content.decode()
    assert "222 ms (n=20)" in html and "10,000 ms" not in html and "14,000 ms" not in html
    ttft = figures(admin_client.get("/pairs/demo/").content.decode())["chart-ttft"]
    fast_p50 = next(t for t in ttft["data"] if t["name"] == "fast P50")
    assert fast_p50["y"] == [120.0, None, 111.0]


def test_it_says_so_when_no_run_has_finished(admin_client, pair):
    html = admin_client.get("/pairs/demo/").content.decode()
    assert "No finished probe runs yet" in html and "application/json" not in html


def test_it_404s_on_unknown_pair_and_run(admin_client, pair):
    assert admin_client.get("/pairs/nope/").status_code == 404
    assert admin_client.get("/runs/999999/").status_code == 404


def test_it_lists_the_samples_of_a_run(admin_client, runs, pair):
    run = runs[-1]
    case = pair.suite.cases.get()
    Sample.objects.create(
        run=run,
        case=case,
        endpoint=pair.fast,
        tier="fast",
        seq=0,
        started_at=timezone.now(),
        ok=True,
        ttft_ms=101.4,
        e2e_ms=900.2,
        tpot_ms=12.25,
        completion_tokens=64,
        estimated_tokens=66,
        finish_reason="stop",
        model_id="demo-fast-1",
        system_fingerprint="fp_sim_fast",
        tests_passed=True,
        text="SECRET TEXT",
    )
    Sample.objects.create(
        run=run,
        case=case,
        endpoint=pair.base,
        tier="base",
        seq=1,
        started_at=timezone.now(),
        ok=False,
        error_class="timeout",
    )
    html = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert "demo-fast-1" in html and "fp_sim_fast" in html and ">timeout<" in html
    assert ">101<" in html and ">900<" in html and "64 / 66" in html
    assert "SECRET TEXT" not in html  # texts load on demand
    assert "222 ms (n=20)" in html and "timeout: 1" in html  # the summary table
    sample = Sample.objects.get(seq=0)
    row = admin_client.get(f"/samples/{sample.pk}/", headers={"HX-Request": "true"})
    assert row.content.decode().lstrip().startswith('<tr class="sample-text">')
    assert "SECRET TEXT" in row.content.decode()
    assert "SECRET TEXT" in admin_client.get(f"/samples/{sample.pk}/").content.decode()


def test_it_polls_progress_while_a_run_runs(admin_client, pair):
    run = make_run(pair, minutes_ago=0, status="running")
    html = admin_client.get(f"/runs/{run.pk}/", headers={"HX-Request": "true"}).content.decode()
    assert html.lstrip().startswith('<div id="run-live"') and 'hx-trigger="every 3s"' in html
    assert '<progress max="40" value="7">' in html and "7 / 40 requests (17%)" in html
    done = make_run(pair, minutes_ago=0)
    assert "hx-trigger" not in admin_client.get(f"/runs/{done.pk}/").content.decode()


def test_it_states_the_metric_definitions(admin_client):
    html = admin_client.get("/metrics/").content.decode()
    for phrase in (
        "monotonic clock just before the request is sent",
        "first SSE event carrying a generated token on any channel",
        "last token-bearing event − t0",
        "usage.completion_tokens",
        "(E2E − TTFT) / (output tokens − 1)",
        "1 / TPOT",
        "Successes / requests in a window; 429s",
        "meeting every SLO, errors in the denominator",
        "none is shown below a minimum n",
        "system_fingerprint",
        "Indel",
        "First divergence",
        "Null calibration",
        "Timing fidelity",
        "Beside vLLM's benchmark client",
    ):
        assert phrase in html, phrase
    assert 'class="placeholder"' not in html, "the client overhead is measured, not a placeholder"


def test_it_loads_no_script_or_style_from_the_network(admin_client, runs):
    for url in ("/", "/pairs/demo/", f"/runs/{runs[-1].pk}/", "/metrics/"):
        html = admin_client.get(url).content.decode()
        # Attributes only: a random CSRF token may well contain the letters "cdn".
        assert not re.search(r'(src|href)="[^"]*cdn', html, re.I), url
        assert not re.search(r'(src|href)="(https?:)?//', html), url
    pair_html = admin_client.get("/pairs/demo/").content.decode()
    assert 'src="/static/js/plotly.min.js"' in pair_html
    assert 'src="/static/js/htmx.min.js"' in pair_html


def test_it_puts_the_csrf_token_in_htmx_headers(admin_client, runs):
    html = admin_client.get("/pairs/demo/").content.decode()
    assert re.search(r"<body hx-headers='\{\"X-CSRFToken\": \"\w+\"\}'>", html)


def test_it_queues_a_manual_probe(admin_client, pair):
    pytest.importorskip("monitor.runs.steps")  # the skip names the import error
    response = admin_client.post("/pairs/demo/probe/", headers={"HX-Request": "true"})
    run = Run.objects.get(pair=pair)
    assert run.trigger == "manual" and run.status == "queued"
    html = response.content.decode()
    assert f'Run <a href="/runs/{run.pk}/">#{run.pk}</a> queued.' in html
    assert 'hx-trigger="every 10s"' in html  # the page polls until the run finishes
    assert admin_client.get("/pairs/demo/probe/").status_code == 405


def test_it_reads_pages_in_a_bounded_number_of_queries(
    admin_client, runs, pair, django_assert_max_num_queries
):
    for i in range(3):  # more pairs must not mean more queries
        other = Pair.objects.create(
            name=f"other-{i}", fast=pair.fast, base=pair.base, suite=pair.suite
        )
        make_run(other, minutes_ago=i)
    # session, user, pairs, runs; statuses: maintenance windows, schedules; the pairs'
    # monitoring states (e-BH); building the pairs' cells (overview_cells): verdicts, the
    # trends' cutoff per pair and their runs, the rollups of the TTFT P95 window, the newest
    # comparable runs' summaries, the speed window's cutoff per pair and its samples
    with django_assert_max_num_queries(14):
        admin_client.get("/")
    with django_assert_max_num_queries(7):  # the cells now come from the cache
        admin_client.get("/")
    # + the pair's data version (figure cache); the run costs: rollups, then samples for the
    # runs without one (these factory runs have none); its schedules; the cost per month
    # (monitor.reporting.cost_month): the tripwire state, the newest billed probes and audits
    # with their rollups, the schedules it prices. A fixed number: none grows with the runs.
    with django_assert_max_num_queries(17):
        admin_client.get("/pairs/demo/")


def test_the_sparklines_read_each_pairs_newest_trend_runs_oldest_first(pair):
    other = Pair.objects.create(name="other", fast=pair.fast, base=pair.base, suite=pair.suite)
    for minutes_ago, ttft in ((50, 100.0), (40, 200.0), (30, 300.0), (20, 400.0)):
        make_run(pair, minutes_ago=minutes_ago, summary=summary(fast_ttft=ttft))
    make_run(pair, minutes_ago=5, status="failed")  # the newest, but not a trend run
    make_run(other, minutes_ago=60, summary=summary(fast_ttft=500.0))  # fewer than asked: all
    trends = sparkline.ttft_trends([pair.pk, other.pk], runs=2)
    assert trends[pair.pk].fast == [300.0, 400.0]
    assert trends[other.pk].fast == [500.0]


def test_it_serves_the_page_assets_without_collectstatic(client, settings, tmp_path):
    """A fresh checkout (``./run demo``, DEBUG off) has run no collectstatic: WhiteNoise must
    still find plotly.js, htmx and the CSS, or no chart is ever drawn."""
    settings.STATIC_ROOT = tmp_path  # empty, as on a fresh machine
    for asset in ("js/plotly.min.js", "js/htmx.min.js", "js/charts.js", "css/tierwatch.css"):
        assert client.get(f"/static/{asset}").status_code == 200, asset
