"""What the API refuses (Django's test client inside the test's transaction; the token tests of
tests/monitor/test_api.py go over real HTTP): a body that is not
the schema's object (422 naming the body), a second queued run of the same pair and kind (409,
also for the buttons, the schedules and ``manage.py probe``: one service rule), runs past the
token's rate (429 with Retry-After), pages past the schema's bounds (422, never a 500), and a
schema that lists every status an endpoint answers."""

from __future__ import annotations

import re

import pytest
from django.core.management import CommandError, call_command

from monitor.models import Run, RunKind
from monitor.runs.steps import RunAlreadyQueued, queue_run
from monitor.setup import roles
from monitor.setup.api_tokens import create_token
from monitor.tasks import probe_pair_task
from tests import factories
from tests.support import Api

pytestmark = pytest.mark.django_db

LISTS = ("/pairs", "/alerts", "/runs", "/verdicts")


@pytest.fixture
def operator() -> Api:
    _, token = create_token(user=factories.user("api-operator", roles.OPERATOR))
    return Api(token)


@pytest.fixture
def pair():
    return factories.pair()


@pytest.mark.parametrize("body", ["[]", '"x"', "null", '{"kind": "x"}', '{"knd": "audit"}'])
def test_a_run_body_that_is_not_the_schemas_object_is_a_422_naming_it(operator, pair, body):
    response = operator.post("/pairs/demo/runs", content=body)
    assert response.status_code == 422, response.content
    assert all(error["loc"][0] == "body" for error in response.json()["detail"])
    assert not Run.objects.exists()


def test_a_second_queued_run_of_the_pair_and_kind_is_refused_with_409(operator, pair):
    first = operator.post("/pairs/demo/runs", json={"kind": "probe"})
    assert first.status_code == 201
    again = operator.post("/pairs/demo/runs", json={"kind": "probe"})
    assert again.status_code == 409
    assert f"run {first.json()['id']} of demo is queued already" in again.json()["detail"]
    assert operator.post("/pairs/demo/runs", json={"kind": "audit"}).status_code == 201
    Run.objects.filter(pk=first.json()["id"]).update(status="running")  # it started
    assert operator.post("/pairs/demo/runs", json={}).status_code == 201
    assert Run.objects.count() == 3


def test_runs_past_the_tokens_rate_are_refused_with_429_and_retry_after(operator, settings, pair):
    settings.TIERWATCH_API_RUN_RATE = "2/min"
    factories.pair("other", fast="o-fast", base="o-base", suite_row=pair.suite)
    assert operator.post("/pairs/demo/runs", json={}).status_code == 201
    assert operator.post("/pairs/other/runs", json={}).status_code == 201
    third = operator.post("/pairs/demo/runs", json={"kind": "audit"})
    assert third.status_code == 429
    assert 0 < int(third.headers["Retry-After"]) <= 60
    assert Run.objects.count() == 2
    _, token = create_token(user=factories.user("api-other", roles.OPERATOR))
    other = Api(token).post("/pairs/demo/runs", json={"kind": "audit"})
    assert other.status_code == 201  # per token, not for everyone


@pytest.mark.parametrize("path", [*LISTS, "/runs/{run}/samples"])
def test_a_page_past_the_bounds_is_422_and_past_the_end_empty(operator, pair, path):
    path = path.format(run=factories.run(pair).pk)
    for params in ({"page": 2**62}, {"page": 0}, {"page_size": 501}, {"page_size": 0}):
        response = operator.get(path, params=params)
        assert response.status_code == 422, (params, response.content)
        assert response.json()["detail"][0]["loc"][-1] in params
    last = operator.get(path, params={"page": 1_000_000, "page_size": 500})
    assert last.status_code == 200 and last.json()["items"] == []


def test_the_schema_lists_every_status_and_the_alert_states(client):
    schema = client.get("/api/openapi.json").json()
    for path, operations in schema["paths"].items():
        for method, op in operations.items():
            assert {"401", "403", "422"} <= set(op["responses"]), (method, path)
            if "{" in path:
                assert "404" in op["responses"], (method, path)
    run_now = schema["paths"]["/api/pairs/{name}/runs"]["post"]["responses"]
    assert {"201", "409", "429"} <= set(run_now)
    (state,) = [
        p for p in schema["paths"]["/api/alerts"]["get"]["parameters"] if p["name"] == "state"
    ]
    assert state["schema"]["anyOf"][0]["enum"] == ["firing", "acknowledged", "resolved"]
    page = [p for p in schema["paths"]["/api/runs"]["get"]["parameters"] if p["name"] == "page"]
    assert page[0]["schema"]["maximum"] == 1_000_000


def test_the_rule_holds_for_the_button_the_schedule_and_the_command(client, pair):
    first = queue_run(pair=pair)
    with pytest.raises(RunAlreadyQueued):
        queue_run(pair=pair)
    assert probe_pair_task(pair.name) is None  # the schedule's tick is skipped
    with pytest.raises(CommandError, match="queued already"):
        call_command("probe", pair.name)
    client.force_login(factories.user("op", roles.OPERATOR))
    answer = client.post("/pairs/demo/probe/", headers={"HX-Request": "true"})
    assert answer.status_code == 200
    assert f"Not started: probe run {first.pk} of demo is queued already" in answer.content.decode()
    assert client.post("/pairs/demo/probe/").status_code == 409
    assert client.post("/pairs/demo/verdict/audit/").status_code == 302  # an audit may queue
    assert Run.objects.filter(kind=RunKind.PROBE).count() == 1


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/runs?pair=%00"),
        ("GET", "/alerts?pair=demo%00"),
        ("GET", "/pairs/demo%00"),
        ("POST", "/pairs/%00/runs"),
    ],
)
def test_a_pair_name_with_nul_is_a_422_not_a_postgresql_500(operator, pair, method, path):
    """The input schemathesis' stateful phase found on PostgreSQL: ``GET /api/runs?pair=%00``
    was a 500 there ("text fields cannot contain NUL"), an empty page on SQLite."""
    response = operator.request(method, path, json={} if method == "POST" else None)
    assert response.status_code == 422, response.content
    assert "text without NUL characters" in response.content.decode()
    assert not Run.objects.exists()


def test_the_schema_states_what_the_validators_refuse(client):
    """schemathesis' stateful phase on PostgreSQL sent a note with NUL and an offset of +21:06,
    schema-valid then refused: the schema now carries both limits as patterns."""
    schema = client.get("/api/openapi.json").json()
    silence = schema["components"]["schemas"]["SilenceIn"]["properties"]
    assert silence["note"]["pattern"] == "^[^\x00]*$"
    offset = re.compile(silence["until"]["pattern"])
    assert offset.search("2026-01-01T00:00:00+14:00") and offset.search("2026-01-01T00:00:00Z")
    assert not offset.search("1030-02-25T08:02:09+21:06")
    runs = {p["name"]: p["schema"] for p in schema["paths"]["/api/runs"]["get"]["parameters"]}
    assert runs["pair"]["anyOf"][0]["pattern"] == "^[^\x00]*$"
