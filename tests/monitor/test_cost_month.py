"""The monthly cost per pair and kind of run (``monitor.reporting.cost_month``), and the pair
page's block with the button that accepts a border-input discovery's stated cost."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django_celery_beat.models import PeriodicTask

from monitor.models import ConfigChange, Endpoint, RunRollup, TripwireState
from monitor.reporting import cost_month
from monitor.setup.schedules import ensure_probe_schedule, ensure_tripwire_schedule
from tests import factories

pytestmark = pytest.mark.django_db
PRICES = {"price_input_per_mtok": 3.0, "price_output_per_mtok": 15.0}


def priced_pair():
    pair = factories.pair("costly")
    Endpoint.objects.filter(pk=pair.fast_id).update(**PRICES)
    Endpoint.objects.filter(pk=pair.base_id).update(protocol="anthropic", **PRICES)
    pair.refresh_from_db()
    ensure_probe_schedule(pair_name=pair.name, every_s=900)
    ensure_probe_schedule(pair_name=pair.name, every_s=6 * 3600, kind="audit")
    ensure_tripwire_schedule(pair_name=pair.name)
    for kind, n, completion in (("probe", 10, 2_000), ("audit", 300, 15_000)):
        for _ in range(2):
            run = factories.run(pair, kind=kind)
            for tier, endpoint in (("fast", pair.fast), ("base", pair.base)):
                RunRollup.objects.create(
                    run=run, pair=pair, endpoint=endpoint, tier=tier, kind=kind, at=run.created_at,
                    n=n, n_ok=n, prompt_tokens=n * 100, completion_tokens=completion,
                )  # fmt: skip
    return pair


def cell(scheme, kind):
    return next(r for r in scheme["rows"] if r["kind"] == kind)


def test_each_kind_costs_its_runs_a_month_at_the_endpoints_prices():
    pair = priced_pair()
    data = cost_month.schemes(pair)
    scheduled, default, hourly = data["schemes"]
    month = cost_month.HOURS_PER_MONTH
    # tripwires from their design: fast (OpenAI) 4 prompts × 6 logprob queries, base
    # (Anthropic, no logprobs) 20 border inputs × 10 samples
    assert data["per_run"]["tripwire"].requests == 24 + 200
    assert cell(scheduled, "tripwire")["requests"] == pytest.approx(month * 224)
    # audits: 2 × 300 requests a run, measured from the rollups; 6-hourly as scheduled
    assert cell(scheduled, "audit")["requests"] == pytest.approx(month / 6 * 600)
    assert cell(default, "audit")["requests"] == pytest.approx(month / 24 * 600)
    assert cell(hourly, "audit")["requests"] == pytest.approx(month * 600)
    assert cell(hourly, "tripwire")["runs"] == 0
    per_audit = 2 * (30_000 * 3.0 + 15_000 * 15.0) / 1e6
    assert cell(hourly, "audit")["usd"] == pytest.approx(month * per_audit)
    assert cell(default, "probe")["requests"] == pytest.approx(month * 4 * 20)
    watch = cell(default, "audit")["usd"] + cell(default, "tripwire")["usd"]
    assert watch < cell(hourly, "audit")["usd"] / 5  # daily audits + tripwires: far cheaper
    assert data["discovery"]["requests"] == 1800  # the base tier's, not yet done


def test_a_kind_never_run_has_no_figure_rather_than_a_guess():
    pair = factories.pair("fresh")
    rows = cost_month.schemes(pair)["schemes"][1]["rows"]
    assert cell({"rows": rows}, "audit")["measured"] is None and "requests" not in cell(
        {"rows": rows}, "audit"
    )


@pytest.mark.parametrize("probe_every_s", [300, None])
def test_the_two_fixed_schemes_probe_at_one_cadence_so_they_differ_in_audits_and_tripwires(
    probe_every_s, admin_client
):
    """Like with like: the new default and hourly audits both probe at the pair's own cadence
    (a 5-minute one here, or 15 minutes for a pair with no probe schedule), stated on the page;
    their totals then differ by exactly their audits and tripwires."""
    pair = priced_pair()
    if probe_every_s:
        ensure_probe_schedule(pair_name=pair.name, every_s=probe_every_s)
    else:
        PeriodicTask.objects.filter(name=f"probe:{pair.name}").delete()
    data = cost_month.schemes(pair)
    _, default, hourly = data["schemes"]
    cadence = probe_every_s or cost_month.pair_defaults.PROBE_EVERY_MIN * 60
    assert data["probe_every_s"] == cell(default, "probe")["every_s"] == cadence
    assert cell(hourly, "probe")["every_s"] == cadence
    assert cell(default, "probe")["requests"] == cell(hourly, "probe")["requests"]
    assert cell(default, "probe")["requests"] == pytest.approx(
        cost_month.HOURS_PER_MONTH * 3600 / cadence * 20
    )
    assert default["requests"] - hourly["requests"] == pytest.approx(
        cell(default, "audit")["requests"] + cell(default, "tripwire")["requests"]
        - cell(hourly, "audit")["requests"]
    )  # fmt: skip
    page = admin_client.get(reverse("monitor:pair", args=[pair.name])).content.decode()
    assert f"The last two probe every {cadence // 60} min" in page


def test_the_pair_page_shows_the_costs_and_accepts_the_discovery(admin_client):
    pair = priced_pair()
    page = admin_client.get(reverse("monitor:pair", args=[pair.name])).content.decode()
    assert "Cost per month" in page and "hourly audits, no tripwires" in page
    assert "1800 one-token requests" in page and "Accept this cost" in page
    response = admin_client.post(reverse("monitor:allow_border_discovery", args=[pair.name]))
    assert response.status_code == 302
    assert TripwireState.objects.get(pair=pair).border_allowed
    page = admin_client.get(reverse("monitor:pair", args=[pair.name])).content.decode()
    assert "Accepted: the next tripwire run discovers them" in page


def test_the_sla_report_has_its_own_cost_block(settings):
    from monitor.models import Run
    from monitor.reporting.pdf import render_report_html
    from monitor.reporting.sla import build_sla_report, render_html, render_text
    from tests.support import IN_WEEK, WEEK

    pair = priced_pair()
    Run.objects.filter(pair=pair).update(created_at=IN_WEEK)
    report = build_sla_report(week=WEEK)
    text = render_text(report)
    assert cost_month.SLA_TITLE in text
    line = next(x for x in text.splitlines() if "costly" in x and "hourly audits" in x)
    assert "not scheduled" in line  # no tripwires in the former scheme
    for html in (render_html(report), render_report_html(report)):
        assert 'id="cost-month"' in html and "as scheduled" in html


def test_accepting_the_discovery_cost_is_in_the_audit_log(client):
    """Who accepted which stated cost (issue 31, finding 8): it spends money."""
    pair = priced_pair()
    client.force_login(factories.user("olga", "operator"))
    client.post(reverse("monitor:allow_border_discovery", args=[pair.name]))
    entry = ConfigChange.objects.get(model="pair", object_repr=pair.name)
    assert (entry.username, entry.action) == ("olga", "changed")
    assert entry.diff["border_allowed"] == [False, True]
    assert entry.diff["accepted cost"][1].startswith("1800 one-token requests, $")
    assert "accept border discovery" in entry.source
