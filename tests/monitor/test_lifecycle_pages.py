"""The pages of the alert lifecycle over HTTP (Django's test client): the incident timeline
and its actions with and without the permission, the audit log written by an admin change and
by apply_config, the maintenance form, and the overview's statuses and sparklines."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from monitor.alerting import lifecycle
from monitor.derived.rollups import record_run
from monitor.derived.run_summary import Drift, DriftSeries
from monitor.models import (
    Alert,
    AlertRule,
    ConfigChange,
    Endpoint,
    MaintenanceWindow,
    Run,
    Sample,
)
from monitor.runs.pipeline import evaluate_alerts
from monitor.setup import roles
from monitor.setup.config import apply_config_text
from monitor.setup.schedules import ensure_probe_schedule
from tests import factories
from tests.monitor.alert_runs import add_run
from tests.monitor.web.pages import make_run, summary

pytestmark = pytest.mark.django_db


def login(client, *perms: str, username: str = "op") -> User:
    user = User.objects.create_user(username, password="pw")
    roles.grant(user, roles.VIEWER)  # every page needs its view permission; perms add to it
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(user)
    return user


@pytest.fixture
def pair(db):
    return factories.pair()


@pytest.fixture
def alert(pair) -> Alert:
    AlertRule.objects.create(
        name="fast-ttft",
        pair=pair,
        metric="ttft_p95",
        tier="fast",
        op="gt",
        threshold=500.0,
        last_k=1,
        min_n=5,
    )
    (alert,) = evaluate_alerts(run_id=add_run(pair, ttft=900).id)
    return alert


def test_the_timeline_lists_alert_changes_verdicts_drift_models_and_maintenance(
    client, pair, alert
):
    user = login(client, "change_alert")
    lifecycle.acknowledge(alert_id=alert.pk, user=user, note="on it")
    audit = make_run(
        pair,
        minutes_ago=50,
        kind="audit",
        summary=factories.summary(
            verdict={"label": "no_detectable_difference", "sentence": "No detectable difference."}
        ),
    )
    make_run(
        pair,
        minutes_ago=40,
        kind="audit",
        summary=factories.summary(
            verdict={"label": "outputs_differ", "sentence": "Fast differs from base."}
        ),
    )
    for minutes, state, baseline in ((30, "calibrating", None), (20, "ok", 7), (10, "drift", 7)):
        make_run(
            pair,
            minutes_ago=minutes,
            summary=factories.summary(
                drift=Drift(
                    state=state,
                    baseline_id=baseline,
                    baseline_runs=48,
                    h=20.1,
                    drifting=("ttft_p50:fast",) if state == "drift" else (),
                    series={"ttft_p50:fast": DriftSeries(z=4.2, s=25.0)},
                )
            ),
        )
    for i, model_id in enumerate(("demo-v1", "demo-v2")):
        Sample.objects.create(
            run=audit,
            case=pair.suite.cases.first(),
            endpoint=pair.fast,
            tier="fast",
            ok=True,
            model_id=model_id,
            started_at=timezone.now() - timedelta(minutes=45 - i),
        )
    record_run(run=audit)  # model-id events are written when a run is summarised
    MaintenanceWindow.objects.create(
        pair=pair,
        starts_at=timezone.now() + timedelta(days=1),
        ends_at=timezone.now() + timedelta(days=1, hours=1),
        reason="vendor upgrade",
    )
    html = client.get(f"/pairs/{pair.name}/timeline/").content.decode()
    for text in (
        "fast-ttft) opened",
        "fast-ttft) acknowledged",
        "by op",
        "on it",
        "Verdict: no detectable difference (first verdict)",
        "Verdict: outputs differ (was no detectable difference)",
        "Baseline #7 set",
        "Drift detected in ttft_p50:fast",
        "model id changed to demo-v2",
        "Maintenance (this pair): vendor upgrade",
    ):
        assert text in html, text
    # Newest first: the maintenance tomorrow above the alert today above the verdicts.
    events = html[html.index('<ol class="timeline">') :]
    assert events.index("vendor upgrade") < events.index("acknowledged") < events.index("Verdict:")


def test_an_operator_acknowledges_silences_and_resolves_through_htmx(client, pair, alert):
    login(client, "change_alert")
    url = f"/alerts/{alert.pk}/"
    headers = {"HTTP_HX_REQUEST": "true"}
    response = client.post(url + "acknowledge/", {"note": "mine"}, **headers)
    assert response.status_code == 200 and 'id="timeline-body"' in response.content.decode()
    assert "<html" not in response.content.decode()  # the fragment only
    assert Alert.objects.get(pk=alert.pk).state == "acknowledged"
    client.post(url + "silence/", {"hours": "4"}, **headers)
    until = Alert.objects.get(pk=alert.pk).silenced_until
    assert timedelta(hours=3, minutes=59) < until - timezone.now() <= timedelta(hours=4)
    bad = client.post(url + "silence/", {"hours": "5"}, **headers)
    assert bad.status_code == 400
    assert "silence for one of (1, 4, 24, 72) hours" in bad.content.decode()
    client.post(url + "resolve/", **headers)
    assert Alert.objects.get(pk=alert.pk).state == "resolved"


def test_a_viewer_sees_the_timeline_but_cannot_act(client, pair, alert):
    login(client, "view_alert", username="viewer")
    html = client.get(f"/pairs/{pair.name}/timeline/").content.decode()
    assert "fast-ttft" in html and "Acknowledge</button>" not in html
    assert client.post(f"/alerts/{alert.pk}/acknowledge/").status_code == 403
    assert Alert.objects.get(pk=alert.pk).state == "firing"


def test_an_admin_change_over_http_lands_in_the_audit_log(client, pair):
    admin = User.objects.create_superuser("root", password="pw")
    client.force_login(admin)
    endpoint = pair.fast
    form = {
        "name": endpoint.name,
        "protocol": "openai",
        "base_url": endpoint.base_url,
        "model": "demo-fast-v2",
        "api_key_env": "VENDOR_KEY",
        "max_concurrency": 4,
        "timeout_s": 30,
        "extra_body": "{}",
        "extra_headers": "{}",
        "max_tokens_field": "max_tokens",
        "send_temperature": "on",
        "served_tier_fields": "[]",
        "local": "on",  # the demo vendor on 127.0.0.1
    }
    response = client.post(f"/admin/monitor/endpoint/{endpoint.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    change = ConfigChange.objects.get()
    assert (change.username, change.source, change.action, change.model) == (
        "root",
        "admin",
        "changed",
        "endpoint",
    )
    assert change.diff["model"] == [endpoint.model, "demo-fast-v2"]
    assert change.diff["api_key_env"] == ["", "VENDOR_KEY"]  # the NAME; a key is never stored
    assert change.diff["timeout_s"] == [endpoint.timeout_s, 30.0]
    html = client.get("/audit/").content.decode()
    assert "demo-fast-v2" in html and "root" in html and "VENDOR_KEY" in html
    gone = Endpoint.objects.create(name="gone", base_url="http://127.0.0.1:9", model="m")
    client.post(f"/admin/monitor/endpoint/{gone.pk}/delete/", {"post": "yes"})
    assert ConfigChange.objects.filter(action="deleted", object_repr="gone").exists()


def test_apply_config_is_audited_and_a_second_apply_adds_nothing():
    text = """
endpoints:
  - {name: a, base_url: "http://127.0.0.1:9/v1", local: true, model: m, api_key_env: A_KEY}
  - {name: b, base_url: "http://127.0.0.1:9/v1", local: true, model: m}
pairs:
  - {name: p, fast: a, base: b, suite: smoke, schedule: {every: 15m}}
"""
    apply_config_text(text, source="team.yaml")
    rows = list(ConfigChange.objects.order_by("pk").values_list("action", "model", "source"))
    assert rows == [
        ("added", "endpoint", "apply_config team.yaml"),
        ("added", "endpoint", "apply_config team.yaml"),
        ("added", "pair", "apply_config team.yaml"),
        ("added", "periodictask", "apply_config team.yaml"),
    ]
    apply_config_text(text, source="team.yaml")
    assert ConfigChange.objects.count() == 4
    apply_config_text(text.replace("every: 15m", "every: 5m"), source="team.yaml")
    change = ConfigChange.objects.latest("pk")
    assert change.model == "periodictask" and change.action == "changed"
    assert change.diff["interval"] == ["every 900 seconds", "every 300 seconds"]


def test_the_audit_log_is_closed_to_viewers(client):
    login(client, "view_alert", username="viewer")
    assert client.get("/audit/").status_code == 403


def test_the_maintenance_form_on_the_pair_page_saves_an_audited_window(client, pair):
    login(client, "add_maintenancewindow")
    assert "Add a maintenance window" in client.get(f"/pairs/{pair.name}/").content.decode()
    response = client.post(
        f"/pairs/{pair.name}/maintenance/",
        {"starts_at": "2026-12-01T02:00", "ends_at": "2026-12-01T04:00", "reason": "upgrade"},
        follow=True,
    )
    window = MaintenanceWindow.objects.get()
    assert window.pair == pair and window.reason == "upgrade" and window.created_by.username == "op"
    assert "Maintenance window saved" in response.content.decode()
    assert ConfigChange.objects.get().source == "pair page"
    response = client.post(
        f"/pairs/{pair.name}/maintenance/",
        {"starts_at": "2026-12-01T04:00", "ends_at": "2026-12-01T02:00", "reason": "x"},
        follow=True,
    )
    assert "the end must be after the start" in response.content.decode()
    assert MaintenanceWindow.objects.count() == 1


def status_of(html: str, name: str) -> str:
    row = html[html.index(f'href="/pairs/{name}/"') :]
    return row[row.index('class="pstatus ') + len('class="pstatus ') :].split('"')[0]


def test_the_overview_shows_each_status(client, pair):
    login(client, username="viewer")
    suite = pair.suite
    mk = lambda name: factories.pair(name, fast=f"{name}-f", base=f"{name}-b", suite_row=suite)  # noqa: E731
    ok, alerting, stale, degraded, maint = (
        pair,
        mk("alerting"),
        mk("stale"),
        mk("degraded"),
        mk("maint"),
    )
    mk("new")
    for p in (ok, alerting, stale, maint):
        make_run(p, minutes_ago=5)
    make_run(
        degraded,
        minutes_ago=5,
        summary=factories.summary(
            fast=factories.tier(20, availability=0.9), base=factories.tier(20)
        ),
    )
    ensure_probe_schedule(pair_name="stale", every_s=600)
    Run.objects.filter(pair=stale).update(finished_at=timezone.now() - timedelta(minutes=25))
    ensure_probe_schedule(pair_name=ok.name, every_s=600)  # finished 5 min ago: fresh
    rule = AlertRule.objects.create(name="r", pair=alerting, metric="ttft_p95", threshold=1.0)
    Alert.objects.create(rule=rule, pair=alerting, message="m")
    now = timezone.now()
    MaintenanceWindow.objects.create(
        pair=maint,
        starts_at=now - timedelta(minutes=1),
        ends_at=now + timedelta(hours=1),
        reason="upgrade",
    )
    html = client.get("/").content.decode()
    assert {
        name: status_of(html, name)
        for name in (ok.name, "alerting", "stale", "degraded", "maint", "new")
    } == {
        ok.name: "ok",
        "alerting": "alerting",
        "stale": "stale",
        "degraded": "degraded",
        "maint": "maintenance",
        "new": "no-data",
    }
    assert "availability below 99%: fast" in html and "no finished probe since" in html


def test_the_overview_draws_a_sparkline_with_gaps_and_its_n(client, pair):
    login(client, username="viewer")
    for minutes in (30, 20, 10):
        make_run(pair, minutes_ago=minutes, summary=summary(n=3 if minutes == 20 else 20))
    html = client.get("/").content.decode()
    assert '<svg class="sparkline"' in html and "2 runs" in html  # runs with a value
    fast_paths = html.count('class="spark fast"')
    assert fast_paths == 2  # the middle run's P50 is below min n: a gap splits the line
