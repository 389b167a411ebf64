"""The speed page through Django's test client, with samples built by the ORM and summarised by
the runs' own summariser: login, the speed-up table and its charts, "n too small" when thin,
skipped cases with their reason, the load curve, the simulated label."""

from __future__ import annotations

import json
import re

import pytest
from django.utils import timezone

from monitor.models import Case, Pair, Run, Suite
from monitor.runs.steps import summarise_run
from tests import factories

pytestmark = pytest.mark.django_db

SCENARIOS = {"long_cached": 0.2, "short_long_out": 0.5}  # fast/base time ratio per scenario


@pytest.fixture
def pair() -> Pair:
    suite = Suite.objects.create(name="speed-matrix")
    for scenario in SCENARIOS:
        for i in range(2):
            Case.objects.create(
                suite=suite,
                key=f"{scenario}-{i}",
                scenario=scenario,
                messages=[{"role": "user", "content": "hi"}],
            )
    return factories.pair(suite_row=suite, claim_value=4, slo_ttft_ms=400, slo_e2e_ms=5000)


def make_run(pair: Pair, repeat: int, **blocks) -> Run:
    """A finished probe run: every case × repetition on both tiers, timings that vary; extra
    summary blocks (skipped, load) are merged in by the summary's one writer."""
    run = factories.run(pair, repeat=repeat, finished_at=timezone.now())
    seq = 0
    for case in pair.suite.cases.all():
        factor = SCENARIOS[case.scenario]
        for rep in range(repeat):
            jitter = 1 + 0.1 * ((seq * 7) % 5)
            for tier in ("base", "fast"):
                scale = jitter * (factor if tier == "fast" else 1.0)
                factories.sample(
                    run,
                    case,
                    tier,
                    repetition=rep,
                    seq=seq,
                    connect_ms=2.0,
                    headers_ms=20.0,
                    ttft_ms=500 * scale,
                    e2e_ms=3000 * scale,
                    tpot_ms=20 * scale,
                    chunk_gaps_ms=[10.0, 30.0, 10.0],
                    chunk_tokens=[1, 3, 1, 2],
                    text="same answer",
                    completion_tokens=7,
                    estimated_tokens=7,
                )
                seq += 1
    summarise_run(run_id=run.id)
    if blocks:
        Run.objects.merge_summary(run.id, **blocks)
    run.refresh_from_db()
    return run


def test_it_requires_login(client, pair):
    response = client.get("/pairs/demo/speed/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_it_handles_an_unknown_pair_with_404(admin_client):
    assert admin_client.get("/pairs/nope/speed/").status_code == 404


def test_it_shows_the_speedup_table_and_charts_against_the_claim(admin_client, pair):
    make_run(pair, repeat=10)  # 20 pairs per scenario: the fewest an interval is given for
    html = admin_client.get("/pairs/demo/speed/").content.decode()
    assert 'id="speedup-table"' in html and 'id="percentile-table"' in html
    assert "simulated" in html
    table = html.split('id="speedup-table"')[1].split("</table>")[0]
    assert "long_cached" in table and "short_long_out" in table
    assert "claimed 4x: confirmed for long_cached (5.0x [5.0, 5.0])" in html
    assert "contradicted for short_long_out (2.0x [2.0, 2.0])" in html
    assert "claim confirmed" in table and "claim contradicted" in table
    percentiles = html.split('id="percentile-table"')[1].split("</table>")[0]
    assert "n&lt;59" in percentiles and "n&lt;299" in percentiles  # 20 values: P95, P99 withheld
    otps = html.split('id="otps-table"')[1].split("</table>")[0]
    assert "tokens / (E2E − TTFT)" in otps and "tokens / E2E" in otps and "short_long_out" in otps
    charts = dict(
        re.findall(r'<script type="application/json" id="([\w-]+)-data">(.*?)</script>', html, re.S)
    )
    for role in ("speedup", "ttft-bands", "e2e-bands", "breakdown"):
        assert f'data-plotly-figure="speed-{role}-data"' in html
        layout = json.loads(charts[f"speed-{role}"])["layout"]
        assert layout["title"]["text"] and "n =" in layout["title"]["text"]
        assert layout["yaxis"]["title"]["text"]
    assert 'id="hints"' in html and "prefix cache" in html


def test_it_says_n_too_small_when_thin(admin_client, pair):
    make_run(pair, repeat=1)  # two pairs per scenario: below the minimum n of 5
    html = admin_client.get("/pairs/demo/speed/").content.decode()
    assert "5.0x (n = 2 &lt; 20 pairs)" in html  # the estimate, but no interval
    # no empty 0–4 ms panel: the page says why instead of drawing one
    assert 'data-plotly-figure="speed-ttft-bands-data"' not in html
    assert "TTFT over time, not drawn for: long_cached (n = 2 &lt; 5: not enough samples)" in html


def test_it_shows_skipped_cases_with_their_reason(admin_client, pair):
    reason = "needs ~16,384 tokens but the context window is smaller (demo-base: 8,192)"
    run = make_run(
        pair, repeat=1, skipped=[{"case": "xl-0", "scenario": "xl_context", "reason": reason}]
    )
    html = admin_client.get("/pairs/demo/speed/").content.decode()
    skipped = html.split('id="skipped-table"')[1].split("</table>")[0]
    assert "xl-0" in skipped and "demo-base: 8,192" in skipped and f"#{run.id}" in skipped


def test_it_shows_the_newest_load_probe_apart_from_the_probes(admin_client, pair):
    probe = make_run(pair, repeat=4)
    stat = {"n": 8, "too_small": False, "p50": 100.0, "p90": 150.0, "p95": 160.0, "p99": 170.0}
    block = {
        "n": 8,
        "n_ok": 8,
        "ttft_ms": stat,
        "e2e_ms": stat,
        "goodput": 0.75,
        "wall_s": 2.0,
        "throughput_rps": 4.0,
    }
    load = make_run(
        pair, repeat=1, load={str(c): {"fast": block, "base": block} for c in (1, 4, 16)}
    )
    Run.objects.filter(id=load.id).update(kind="load")
    html = admin_client.get("/pairs/demo/speed/").content.decode()
    assert 'id="load-table"' in html and 'data-plotly-figure="speed-load-data"' in html
    assert "75.0% (n=8)" in html and "4.0 req/s" in html
    facts = html.split('class="facts"')[1].split("</dl>")[0]
    assert f"#{probe.id}" in facts and f"#{load.id}" not in facts


def test_it_explains_an_empty_pair(admin_client, pair):
    html = admin_client.get("/pairs/demo/speed/").content.decode()
    assert "No finished probe runs" in html and "load_probe demo" in html
