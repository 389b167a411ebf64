"""The speed page through Django's test client, with samples built by the ORM and summarised by
the runs' own summariser: login, the speed-up table and its charts, "n too small" when thin,
skipped cases with their reason, the load curve, the simulated label."""

from __future__ import annotations

import json
import re

import pytest
from django.utils import timezone

from monitor.derived.run_end import record_run_end
from monitor.judging.speed import speed_report
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


def make_run(pair: Pair, repeat: int, served=None, reasoning_ms: float = 0.0, **blocks) -> Run:
    """A finished probe run: every case × repetition on both tiers, timings that vary; extra
    summary blocks (skipped, load) are merged in by the summary's one writer. ``served(seq,
    tier)`` gives the tier a sample reports (default: none); ``reasoning_ms`` puts that much
    reasoning before each answer's first token."""
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
                    ttft_answer_ms=500 * scale + reasoning_ms,
                    e2e_ms=3000 * scale,
                    served_tier=served(seq, tier) if served else "",
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
    claim = html.split('id="claim-line"')[1].split("</p>")[0]
    assert "claim 4× E2E: confirmed for long_cached (5.0x [5.0, 5.0])" in claim
    assert "contradicted for short_long_out (2.0x [2.0, 2.0])" in claim
    assert "<strong>contradicted</strong>" in claim  # contradicted anywhere: contradicted
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


# --- claims in the vendor's metric and form, gating on the tier served, TTFT both ways -------


def test_a_floor_claim_is_checked_on_the_share_of_fast_requests_meeting_it(admin_client, pair):
    """Fast TTFTs are 500 × 0.2 or 0.5 × jitter (1.0 to 1.4): 100-140 ms in long_cached and
    250-350 ms in short_long_out, 20 of each. "95 % of requests TTFT ≤ 300 ms" holds for the
    long_cached 20 and 12 of short_long_out (jitter 1.0, 1.1, 1.2 → 250, 275, 300 ms): 32 of
    40, whose Wilson interval [65.2, 89.5] % lies below 95 %: contradicted."""
    Pair.objects.filter(pk=pair.pk).update(
        claim_metric="ttft", claim_form="floor", claim_value=300, claim_percentile=95
    )
    make_run(pair, repeat=10)
    html = admin_client.get("/pairs/demo/speed/").content.decode()
    line = html.split('id="claim-line"')[1].split("</p>")[0]
    assert "claim 95 % of requests TTFT ≤ 300 ms: contradicted" in line
    assert "80.0 % [65.2, 89.5] of 40 requests met it" in line
    assert "(32 of 40)" in html
    Pair.objects.filter(pk=pair.pk).update(claim_value=350)  # every fast request meets it
    html = admin_client.get("/pairs/demo/speed/").content.decode()
    assert "claim 95 % of requests TTFT ≤ 350 ms: not yet · 100.0 % [91.2, 100.0]" in html


def test_an_output_speed_factor_is_judged_in_output_tokens_per_second(admin_client, pair):
    """7 tokens over E2E − TTFT: fast is 5× (long_cached) and 2× (short_long_out) faster in
    output tok/s; a 2.5× output-speed claim holds for the first and fails the second."""
    Pair.objects.filter(pk=pair.pk).update(claim_metric="output_tps", claim_value=2.5)
    make_run(pair, repeat=10)
    html = admin_client.get("/pairs/demo/speed/").content.decode()
    line = html.split('id="claim-line"')[1].split("</p>")[0]
    assert "claim 2.5× output tok/s: confirmed for long_cached (5.0x [5.0, 5.0])" in line
    assert "contradicted for short_long_out (2.0x [2.0, 2.0])" in line
    table = html.split('id="speedup-table"')[1].split("</table>")[0]
    assert "claim confirmed" not in table  # the durations are not what was claimed
    otps = html.split('id="otps-table"')[1].split("</table>")[0]
    assert "claim confirmed" in otps and "claim contradicted" in otps


def test_downgraded_samples_are_counted_and_shown_but_left_out_of_the_speedups(admin_client, pair):
    """Every fourth fast sample reports "default" instead of "priority" and, as a downgraded
    request would be, is as slow as base: gated out, the speed-up is the served tier's 5×;
    with the pair including them, the median moves."""
    pair.fast.expected_tier = "priority"
    pair.fast.save()

    def served(seq: int, tier: str) -> str:
        return "" if tier == "base" else "default" if seq % 8 == 1 else "priority"

    run = make_run(pair, repeat=10, served=served)
    slow = run.samples.filter(tier="fast", served_tier="default")
    for s in slow.select_related("case"):
        base = run.samples.get(tier="base", case=s.case, repetition=s.repetition)
        s.ttft_ms, s.e2e_ms, s.tpot_ms = base.ttft_ms, base.e2e_ms, base.tpot_ms
        s.save()
    assert slow.count() == 10
    report = speed_report(pair=pair)
    assert report["gating"]["left_out"] == 10
    assert report["gating"]["tiers"]["fast"]["downgraded"] == 10
    assert report["gating"]["tiers"]["fast"]["confirmed"] == 30
    assert report["n_pairs"]["long_cached"] == 15  # 20 pairs, 5 with a downgraded fast sample
    assert report["speedup"]["long_cached"]["e2e"]["estimate"] == pytest.approx(5.0, rel=0.01)
    html = admin_client.get("/pairs/demo/speed/").content.decode()
    facts = html.split('id="gating-facts"')[1].split("</dd>")[0]
    assert "fast: 30 confirmed, 10 downgraded, 0 not reported" in facts
    assert "10 downgraded samples left out" in facts
    hours = html.split('id="downgrade-hours"')[1].split("</table>")[0]
    assert "25.0% (n=40)" in hours  # all in this hour: 10 of 40 reported tiers
    Pair.objects.filter(pk=pair.pk).update(include_downgraded=True)
    pair.refresh_from_db()
    included = speed_report(pair=pair)
    assert included["gating"]["left_out"] == 0
    assert included["n_pairs"]["long_cached"] == 20
    assert included["speedup"]["long_cached"]["e2e"]["estimate"] < 5.0


def test_a_tier_the_vendor_never_confirms_says_so(admin_client, pair):
    pair.fast.expected_tier = "priority"
    pair.fast.save()
    make_run(pair, repeat=3)  # no sample reports a tier
    for url in ("/pairs/demo/speed/", "/pairs/demo/"):
        html = admin_client.get(url).content.decode()
        note = html.split('id="never-confirmed"')[1].split("</p>")[0]
        assert (
            "This vendor never reports the tier served: the speed-up is of what you were "
            "given, not of the tier." in note
        )
    report = speed_report(pair=pair)
    assert report["gating"]["left_out"] == 0  # unconfirmed samples count (evals.served)
    assert report["n_pairs"]["long_cached"] == 6


def test_a_confirmed_tier_has_no_never_confirmed_note(admin_client, pair):
    pair.fast.expected_tier = "priority"
    pair.fast.save()
    make_run(pair, repeat=3, served=lambda seq, tier: "priority")
    for url in ("/pairs/demo/speed/", "/pairs/demo/"):
        assert 'id="never-confirmed"' not in admin_client.get(url).content.decode()


def test_ttft_both_ways_where_a_tier_streamed_reasoning_first(admin_client, pair):
    make_run(pair, repeat=1)  # no reasoning: the table is not shown
    assert 'id="ttft-both-table"' not in admin_client.get("/pairs/demo/speed/").content.decode()
    make_run(pair, repeat=3, reasoning_ms=1000)
    report = speed_report(pair=pair)
    both = report["ttft_both"]["long_cached"]["base"]
    assert both["n_reasoning"] == 6 and both["n"] == 8
    assert both["answer"]["p50"] > both["any"]["p50"] + 500
    html = admin_client.get("/pairs/demo/speed/").content.decode()
    table = html.split('id="ttft-both-table"')[1].split("</table>")[0]
    assert "first answer token P50" in table and "long_cached" in table


def test_premium_paid_beside_the_speed_delivered_per_week(admin_client, pair):
    """Fast costs 3× base per token; the same answers (7 tokens, prompt 10) cost 3× per week."""
    for ep, price in ((pair.fast, 3.0), (pair.base, 1.0)):
        ep.price_input_per_mtok = ep.price_output_per_mtok = price
        ep.save()
    run = make_run(pair, repeat=10)
    run.samples.update(prompt_tokens=10)
    summarise_run(run_id=run.id)
    record_run_end(run.id)
    pair.refresh_from_db()
    (week,) = speed_report(pair=pair)["premium"]
    assert week["price_multiple"] == pytest.approx(3.0)
    assert week["metric"] == "e2e" and week["n"] == 40
    html = admin_client.get("/pairs/demo/speed/").content.decode()
    table = html.split('id="premium-table"')[1].split("</table>")[0]
    assert "3.00×" in table and "E2E" in table
