"""The overview's three answers in words, and a new pair that is "new", not "stale"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from evals.claims import Claim
from evals.served import NEVER_CONFIRMED
from monitor.judging.speed_window import ScenarioSpeed, WindowSpeed, words
from monitor.models import Baseline, Run
from monitor.setup.schedules import ensure_probe_schedule, ensure_tripwire_schedule
from monitor.web.overview_answers import changed, same_model
from monitor.web.overview_cells import Audit, Measured
from tests import factories
from tests.monitor.web.pages import make_run

pytestmark = pytest.mark.django_db

NOW = timezone.now()


def cells(**facts) -> Measured:
    facts = {"drifting": (), **facts}
    return Measured(numbers_html="", availability={}, valid_until=None, **facts)


def row_status(html: str, name: str) -> tuple[str, str]:
    row = html[html.index(f'id="pair-{name}"') :]
    state = row[row.index('class="pstatus ') + len('class="pstatus ') :].split('"')[0]
    why = row[row.index("status-why") :].split(">", 1)[1].split("<", 1)[0]
    return state, why


def test_a_new_scheduled_pair_is_new_not_stale(admin_client):
    quiet = factories.pair("quiet", fast="q-f", base="q-b")
    ensure_probe_schedule(pair_name="quiet", every_s=900)
    running = factories.pair("running", fast="r-f", base="r-b", suite_row=quiet.suite)
    ensure_probe_schedule(pair_name="running", every_s=900)
    make_run(running, minutes_ago=1, status="running")
    stuck = factories.pair("stuck", fast="s-f", base="s-b", suite_row=quiet.suite)
    ensure_probe_schedule(pair_name="stuck", every_s=600)
    make_run(stuck, minutes_ago=30, status="queued")  # its first run never ran
    html = admin_client.get("/").content.decode()
    assert row_status(html, "quiet") == (
        "new",
        "its first scheduled probe is due (probes every 15 minutes)",
    )
    assert row_status(html, "running") == ("new", "its first probe is running")
    assert row_status(html, "stuck")[0] == "stale"


def test_a_pair_watched_only_by_tripwires_says_so_instead_of_never_running(admin_client):
    """A pair with tripwires and no probe schedule (the demo's pair without logprobs) runs on
    its own: the overview must not say it never does."""
    idle = factories.pair("idle", fast="i-f", base="i-b")
    factories.pair("watched", fast="w-f", base="w-b", suite_row=idle.suite)
    ensure_tripwire_schedule(pair_name="watched", every_s=3600)
    html = admin_client.get("/").content.decode()
    assert row_status(html, "watched") == (
        "no-data",  # the status's CSS class
        "no probe schedule: only its tripwires run (hourly)",
    )
    assert row_status(html, "idle") == (
        "no-data",
        "no finished probe run and no schedule: it never runs on its own",
    )


def test_same_model_says_the_audits_age_and_when_there_is_no_schedule():
    audit = Audit("no_detectable_difference", "No evidence…", 1, NOW - timedelta(minutes=12), False)
    six_hours = timedelta(hours=6)
    said = same_model(cells(audit=audit), six_hours, NOW)
    assert (said.text, said.sub, said.tone) == (
        "no detectable difference",
        "audit 12\xa0minutes ago",
        "ok",
    )
    said = same_model(cells(audit=audit), None, NOW)
    assert said.sub == "audit 12\xa0minutes ago · no audit schedule"
    alarmed = Audit("inconclusive", "", 2, NOW, True)
    assert same_model(cells(audit=alarmed), six_hours, NOW).text == (
        "outputs differ (e-detector alarmed)"
    )
    assert same_model(cells(), None, NOW).sub == "no audit schedule"
    assert same_model(cells(), six_hours, NOW).sub == "audits every 6 hours"


def test_changed_says_the_baseline_date_or_when_it_will_be_ready():
    quarter = timedelta(minutes=15)
    said = changed(cells(drift_state="calibrating", baseline_runs=40), quarter, NOW)
    assert said.text == "collecting the baseline: 40 of 48"
    assert said.sub == "ready in ~2\xa0hours"  # 8 more probes at 15 minutes
    frozen = NOW.replace(month=12, day=1)
    said = changed(cells(drift_state="ok", baseline_at=frozen, baseline_runs=48), quarter, NOW)
    assert (said.text, said.tone) == ("no change since the baseline of 1 Dec", "ok")
    drift = cells(drift_state="drift", baseline_at=frozen, drifting=("ttft_fast",))
    assert changed(drift, quarter, NOW).text == "changed since the baseline of 1 Dec"
    unscheduled = changed(cells(drift_state="calibrating", baseline_runs=3), None, NOW)
    assert unscheduled.sub == "no probe schedule: never ready"
    incident = changed(cells(drift_state="incident", baseline_runs=48), quarter, NOW)
    assert incident.text == "no tier change: both tiers slowed (vendor incident)"


def test_how_much_faster_is_the_window_against_the_claim():
    one = WindowSpeed(10, (ScenarioSpeed("mid", 2.1, 1.9, 2.3, 40, "contradicted"),))
    assert words(one, Claim("e2e", "factor", 6.0)) == {
        "line": "2.1× E2E [1.9, 2.3] · 10 runs, n = 40",
        "claim": "claim 6× E2E: contradicted",
        "tone": "bad",
        "note": "",
    }
    five = WindowSpeed(
        10,
        tuple(
            ScenarioSpeed(f"s{i}", 1.0 + i, 0.5 + i, 1.5 + i, 20, claim)
            for i, claim in enumerate(["contradicted"] * 3 + ["not yet"] * 2)
        ),
    )
    said = words(five, Claim("e2e", "factor", 4.4))
    assert said["line"] == "1.0× to 5.0× E2E over 5 scenarios · 10 runs, n = 100"
    assert said["claim"] == "claim 4.4× E2E: contradicted in 3 of 5 scenarios, not yet in 2"
    confirmed = WindowSpeed(3, (ScenarioSpeed("mid", 6.8, 6.1, 7.4, 24, "confirmed"),))
    assert words(confirmed, Claim("e2e", "factor", 6.0))["tone"] == "ok"


def test_the_window_speaks_in_the_claims_metric_and_form():
    tps = WindowSpeed(
        4, (ScenarioSpeed("mid", 2.6, 2.4, 2.8, 30, "confirmed"),), metric="output_tps"
    )
    said = words(tps, Claim("output_tps", "factor", 2.5))
    assert said["line"] == "2.6× output tok/s [2.4, 2.8] · 4 runs, n = 30"
    assert said["claim"] == "claim 2.5× output tok/s: confirmed" and said["tone"] == "ok"
    floor = WindowSpeed(
        4,
        (ScenarioSpeed("mid", 2.6, 2.4, 2.8, 30, None),),
        floor="contradicted (93.1 % of 400 met it)",
        floor_word="contradicted",
        left_out=3,
    )
    said = words(floor, Claim("output_tps", "floor", 80, 99))
    assert said["claim"] == (
        "claim 99 % of requests ≥ 80 tok/s: contradicted (93.1 % of 400 met it)"
    )
    assert said["tone"] == "bad" and said["note"] == "3 downgraded samples left out"
    silent = WindowSpeed(4, (), note=NEVER_CONFIRMED)
    assert words(silent, None)["note"] == NEVER_CONFIRMED


def test_the_overview_reads_the_window_speed_and_the_baseline_date(
    admin_client, demo_vendor_url, django_capture_on_commit_callbacks
):
    from monitor.runs.pipeline import execute_run
    from monitor.runs.steps import create_run
    from tests.factories import vendor_pair

    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=2, claim_value=50)
    for seed in (1, 2, 3):
        execute_run(run_id=create_run(pair=pair, seed=seed).id, cases_limit=4)
    newest = Run.objects.trend().filter(pair=pair).order_by("-created_at").first()
    baseline = Baseline.objects.create(pair=pair, run_ids=[newest.id], statistics={}, set_by="x")
    Baseline.objects.filter(pk=baseline.pk).update(set_at=NOW.replace(month=11, day=28))
    with django_capture_on_commit_callbacks(execute=True):  # the worker's commit
        Run.objects.merge_summary(
            newest.id, drift={"state": "ok", "baseline_id": baseline.id, "baseline_runs": 48}
        )
    html = admin_client.get("/").content.decode()
    assert "× E2E" in html and "3 runs, n = 24" in html  # 4 cases × 2 repetitions × 3 runs
    assert "claim 50× E2E: contradicted" in html
    assert "no change since the baseline of 28 Nov" in html
