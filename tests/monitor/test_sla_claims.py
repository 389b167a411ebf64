"""The SLA report's claims block: each pair's claim in the vendor's metric and form checked
over the period on gated samples, and the premium paid beside the speed delivered per week,
in every rendering that reads ``tables`` (text, HTML email)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from monitor.derived.run_end import record_run_end
from monitor.models import Case, Pair, Suite
from monitor.reporting.sla import build_sla_report, render_html, render_text
from monitor.runs.steps import summarise_run
from tests import factories
from tests.monitor.web.test_speed_views import SCENARIOS, make_run

pytestmark = pytest.mark.django_db


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
    row = factories.pair(suite_row=suite, claim_metric="output_tps", claim_value=2.5)
    for ep, price in ((row.fast, 6.0), (row.base, 1.0)):
        ep.price_input_per_mtok = ep.price_output_per_mtok = price
        ep.save()
    return row


def this_week() -> str:
    year, week, _ = timezone.now().isocalendar()
    return f"{year}-W{week:02d}"


def test_the_report_states_the_claim_as_worded_and_the_premium_beside_the_speedup(pair):
    run = make_run(pair, repeat=10)
    run.samples.update(prompt_tokens=10)
    summarise_run(run_id=run.id)
    record_run_end(run.id)
    report = build_sla_report(week=this_week())
    (row,) = report.claims
    assert row.claim == "2.5× output tok/s" and row.word == "contradicted"
    assert "confirmed for long_cached (5.0x [5.0, 5.0])" in row.line
    assert "contradicted for short_long_out (2.0x [2.0, 2.0])" in row.line
    (week,) = row.weeks
    assert week["price_multiple"] == pytest.approx(6.0) and week["n"] == 40
    text = render_text(report)
    assert "Claims as the vendor words them" in text
    assert "2.5× output tok/s" in text and "contradicted" in text
    assert "Premium paid vs speed delivered, per week" in text
    assert f"{this_week()}" in text and "6.00×" in text and "output tok/s: " in text
    html = render_html(report)
    assert "Premium paid vs speed delivered" in html and "6.00×" in html


def test_a_floor_claim_in_the_report_and_downgraded_samples_left_out(pair):
    Pair.objects.filter(pk=pair.pk).update(
        claim_metric="e2e", claim_form="floor", claim_value=1000, claim_percentile=50
    )
    pair.fast.expected_tier = "priority"
    pair.fast.save()
    make_run(pair, repeat=10, served=lambda seq, tier: "default" if seq % 8 == 1 else "priority")
    (row,) = build_sla_report(week=this_week()).claims
    # fast E2E: 3000 × 0.2 × jitter ≤ 840 ms in long_cached (all meet 1000 ms), 1500-2100 ms in
    # short_long_out (none): 15 of the 30 served samples meet it, Wilson [33.2, 66.8] % ∋ 50 %
    assert row.claim == "50 % of requests E2E ≤ 1000 ms" and row.left_out == 10
    assert row.word == "not yet" and "of 30 requests met it" in row.line
