"""The API: Bearer tokens per user (401 without one), the roles' permissions (a viewer cannot
write: 403), pagination, filters, the OpenAPI schema (validated by openapi-spec-validator), and
the operator's writes. The token tests go over real HTTP (Django's live server on 127.0.0.1 and
httpx); the rest read JSON through Django's test client inside the test's transaction, which
needs no server, no flush and no role resync per test."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from django.core.management import call_command
from django.utils import timezone
from openapi_spec_validator import validate

from monitor.alerting import lifecycle
from monitor.derived.run_summary import Verdict
from monitor.models import Alert, AlertRule, ApiToken, Run, RunKind
from monitor.setup import roles
from monitor.setup.api_tokens import create_token, digest
from tests import factories
from tests.support import Api

pytestmark = pytest.mark.django_db
over_http = pytest.mark.django_db(transaction=True)  # live_server: the server sees the rows

TIMEOUT = 30  # the first request imports the API; the machine is shared


def resolve(alert: Alert) -> None:
    """Through the lifecycle (it keeps the state)."""
    lifecycle.resolve(alert_id=alert.id, note="cleared")


def client_for(role: str | None) -> Api:
    _, token = create_token(user=factories.user(f"api-{role}", role))
    return Api(token)


@pytest.fixture
def world():
    pair = factories.pair(claim_value=4)
    other = factories.pair("other", fast="o-fast", base="o-base", suite_row=pair.suite)
    for i in range(7):
        factories.run(pair, minutes_ago=10 * (7 - i), summary=factories.summary())
    factories.run(pair, status="failed", minutes_ago=1)
    audit = factories.run(
        pair,
        kind=RunKind.AUDIT,
        minutes_ago=5,
        summary=factories.summary(
            verdict=Verdict(
                label="no_detectable_difference",
                sentence="no detectable difference",
                p_value=0.41,
                data={
                    "label": "no_detectable_difference",
                    "sentence": "no detectable difference",
                    "p_value": 0.41,
                },
            )
        ),
    )
    factories.run(other, minutes_ago=3, summary=factories.summary())
    rule = AlertRule.objects.create(name="ttft", metric="ttft_p95", threshold=1)
    firing = Alert.objects.create(rule=rule, pair=pair, message="TTFT high", value=2.0)
    resolve(Alert.objects.create(rule=rule, pair=other, message="old"))
    return {"pair": pair, "audit": audit, "alert": firing}


@over_http
def test_it_handles_no_token_and_a_wrong_token_with_401(live_server, world):
    url = f"{live_server.url}/api/pairs"
    assert httpx.get(url, timeout=TIMEOUT).status_code == 401
    response = httpx.get(url, headers={"Authorization": "Bearer tw_not-a-token"}, timeout=TIMEOUT)
    assert response.status_code == 401


@over_http
def test_a_token_is_stored_only_as_its_digest(live_server, world, capsys):
    factories.user("dora", roles.VIEWER)
    call_command("api_token", "create", "dora")
    token = capsys.readouterr().out.strip()
    row = ApiToken.objects.get(user__username="dora")
    assert row.digest == digest(token) and token not in (row.digest, row.prefix)
    response = httpx.get(
        f"{live_server.url}/api/pairs",
        headers={"Authorization": f"Bearer {token}"},
        timeout=TIMEOUT,
    )
    assert response.status_code == 200
    row.refresh_from_db()
    assert row.last_used_at is not None


def test_a_user_without_a_role_is_refused_reads(world):
    response = client_for(None).get("/pairs")
    assert response.status_code == 403
    assert "monitor.view_pair" in response.json()["detail"]


def test_a_viewer_lists_pairs(world):
    body = client_for(roles.VIEWER).get("/pairs").json()
    assert body["count"] == 2
    assert body["items"][0] == {
        "name": "demo",
        "fast": "demo-fast",
        "base": "demo-base",
        "suite": "smoke v1",
        "claim": {
            "metric": "e2e",
            "form": "factor",
            "value": 4.0,
            "percentile": None,
            "text": "4× E2E",
        },
        "include_downgraded": False,
        "active": True,
        "simulated": True,
    }


def test_runs_are_paginated_newest_first(world):
    api = client_for(roles.VIEWER)
    pages = [
        api.get("/runs", params={"pair": "demo", "page": n, "page_size": 4}).json()
        for n in (1, 2, 3)
    ]
    assert [p["count"] for p in pages] == [9, 9, 9]
    assert [len(p["items"]) for p in pages] == [4, 4, 1]
    ids = [r["id"] for p in pages for r in p["items"]]
    expected = list(
        Run.objects.filter(pair__name="demo")
        .order_by("-created_at", "-id")
        .values_list("id", flat=True)
    )
    assert ids == expected


def test_runs_filter_by_kind_status_and_time(world):
    api = client_for(roles.VIEWER)
    audits = api.get("/runs", params={"kind": "audit"}).json()
    assert [r["id"] for r in audits["items"]] == [world["audit"].id]
    assert api.get("/runs", params={"status": "failed"}).json()["count"] == 1
    since = (timezone.now() - timedelta(minutes=4)).isoformat()
    recent = api.get("/runs", params={"since": since}).json()
    assert {r["pair"] for r in recent["items"]} == {"demo", "other"}
    assert recent["count"] == 2  # the failed run (1 min ago) and other's run (3 min ago)
    until = (timezone.now() - timedelta(minutes=65)).isoformat()  # only the 70-minute one
    assert api.get("/runs", params={"until": until}).json()["count"] == 1
    assert api.get("/runs", params={"kind": "nonsense"}).status_code == 422


def test_a_run_carries_its_figures_and_summary(world):
    run = Run.objects.filter(pair__name="demo", status="done", kind="probe").first()
    body = client_for(roles.VIEWER).get(f"/runs/{run.id}").json()
    assert body["figures"]["fast_ttft_p95_ms"] == 300.0
    assert body["figures"]["fast_availability"] == 1.0
    assert body["summary"]["tiers"]["fast"]["n"] == 20


def test_samples_are_paginated_and_texts_only_on_request(world):
    run = Run.objects.filter(pair__name="demo", status="done").first()
    case = world["pair"].suite.cases.get()
    for seq in range(5):
        factories.sample(
            run,
            case,
            "fast" if seq % 2 else "base",
            seq=seq,
            text=f"answer {seq}",
            ttft_ms=100.0 + seq,
            headers={"x-request-id": "abc"},
        )
    api = client_for(roles.VIEWER)
    page = api.get(f"/runs/{run.id}/samples", params={"page_size": 2, "page": 2}).json()
    assert page["count"] == 5
    assert [s["seq"] for s in page["items"]] == [2, 3]
    assert page["items"][0]["ttft_ms"] == 102.0 and page["items"][0]["case"] == "hello"
    assert page["items"][0]["text"] is None and "headers" not in page["items"][0]
    with_text = api.get(f"/runs/{run.id}/samples", params={"include_text": "true"}).json()
    assert with_text["items"][4]["text"] == "answer 4"


def test_verdicts_are_the_newest_audit_per_pair(world):
    body = client_for(roles.VIEWER).get("/verdicts").json()
    assert body["count"] == 1
    verdict = body["items"][0]
    assert (verdict["pair"], verdict["run_id"]) == ("demo", world["audit"].id)
    assert verdict["label"] == "no_detectable_difference" and verdict["p_value"] == 0.41


def test_alerts_filter_by_state_and_pair(world):
    api = client_for(roles.VIEWER)
    firing = api.get("/alerts", params={"state": "firing"}).json()
    assert [a["id"] for a in firing["items"]] == [world["alert"].id]
    assert firing["items"][0]["rule"] == "ttft" and firing["items"][0]["state"] == "firing"
    assert api.get("/alerts", params={"pair": "other"}).json()["items"][0]["state"] == "resolved"
    assert api.get("/alerts", params={"state": "sleeping"}).status_code == 422


def test_a_viewer_cannot_write(world):
    api = client_for(roles.VIEWER)
    alert = world["alert"].id
    assert api.post(f"/alerts/{alert}/acknowledge", json={"note": "x"}).status_code == 403
    until = (timezone.now() + timedelta(hours=2)).isoformat()
    assert api.post(f"/alerts/{alert}/silence", json={"until": until}).status_code == 403
    assert api.post("/pairs/demo/runs", json={}).status_code == 403
    assert Run.objects.filter(status="queued").count() == 0


def test_an_operator_runs_a_probe_now(world):
    response = client_for(roles.OPERATOR).post("/pairs/demo/runs", json={"kind": "audit"})
    assert response.status_code == 201
    run = Run.objects.get(pk=response.json()["id"])
    assert (run.pair.name, run.kind, run.status, run.trigger) == (
        "demo",
        "audit",
        "queued",
        "manual",
    )


def test_an_operator_gets_404_for_an_unknown_pair(world):
    assert client_for(roles.OPERATOR).post("/pairs/nope/runs", json={}).status_code == 404


def test_an_operator_acknowledges_an_alert(world):
    alert = world["alert"].id
    response = client_for(roles.OPERATOR).post(
        f"/alerts/{alert}/acknowledge", json={"note": "looking into it"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["id"] == alert
    assert response.json()["state"] == "acknowledged"
    assert response.json()["acknowledged_by"] == "api-operator"
    assert response.json()["ack_note"] == "looking into it"


def test_an_operator_silences_an_alert(world):
    alert = world["alert"].id
    until = (timezone.now() + timedelta(hours=2)).isoformat()
    response = client_for(roles.OPERATOR).post(
        f"/alerts/{alert}/silence", json={"until": until, "note": "vendor maintenance"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "firing"  # a silence is not a state: it holds notices
    assert Alert.objects.get(pk=alert).silenced_until is not None


def test_it_handles_a_change_that_does_not_apply_with_409(world):
    api = client_for(roles.OPERATOR)
    alert = world["alert"].id
    assert api.post(f"/alerts/{alert}/acknowledge", json={}).status_code == 200
    again = api.post(f"/alerts/{alert}/acknowledge", json={})
    assert again.status_code == 409 and "not firing" in again.json()["detail"]
    past = (timezone.now() - timedelta(hours=1)).isoformat()
    assert api.post(f"/alerts/{alert}/silence", json={"until": past}).status_code == 409


def test_the_openapi_schema_is_valid_and_lists_every_endpoint(client):
    response = client.get("/api/openapi.json")
    assert response.status_code == 200
    schema = response.json()
    validate(schema)
    assert {
        "/api/pairs",
        "/api/runs",
        "/api/runs/{run_id}/samples",
        "/api/verdicts",
        "/api/alerts",
        "/api/alerts/{alert_id}/acknowledge",
        "/api/alerts/{alert_id}/silence",
        "/api/pairs/{name}/runs",
    } <= set(schema["paths"])
    assert schema["components"]["securitySchemes"]["BearerToken"]["scheme"] == "bearer"


def test_the_docs_page_loads_its_assets_from_this_server(client):
    html = client.get("/api/docs").text
    assert "swagger" in html.lower() and "cdn." not in html


def test_the_docs_are_public_by_default_and_follow_the_api_sign_in_when_set_so(client, settings):
    """Issue 31, finding 8: the schema and docs hold no data (every data route needs a token),
    so they are public, as intended and documented; ``TIERWATCH_API_DOCS_PUBLIC=false`` puts
    them behind a token or a signed-in session."""
    factories.pair("secret-pair-name")
    schema = client.get("/api/openapi.json")
    assert schema.status_code == 200 and "secret-pair-name" not in schema.text
    assert client.get("/api/pairs").status_code == 401
    settings.TIERWATCH_API_DOCS_PUBLIC = False
    for path in ("/api/docs", "/api/openapi.json"):
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
    user = factories.user("vera", "viewer")
    _, token = create_token(user=user, name="docs")
    assert client.get("/api/docs", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    client.force_login(user)
    assert client.get("/api/openapi.json").status_code == 200
