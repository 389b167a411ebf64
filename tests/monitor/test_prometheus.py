"""``/metrics``: the bearer token (404 without one configured, 401 when wrong), and the text
format parsed by prometheus-client's own parser: names, labels, units (seconds), values from
the newest finished probe and audit, a query count that does not grow with the pairs, and the
window's percentiles merged from the rollup sketches with their n."""

from __future__ import annotations

import json
import re

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from monitor.derived import rollups
from monitor.derived.run_summary import ScenarioStats, SpeedUp, Timings, Verdict
from monitor.models import Alert, AlertRule, RunKind
from tests import factories

pytestmark = pytest.mark.django_db

TOKEN = "scrape-token-for-tests"
AUTH = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}


@pytest.fixture
def token(settings):
    settings.TIERWATCH_METRICS_TOKEN = TOKEN


def samples(client) -> dict[str, dict[tuple, float]]:
    """Every sample by name, keyed by its sorted labels."""
    response = client.get("/metrics", **AUTH)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def labels(**kw: str) -> tuple:
    return tuple(sorted(kw.items()))


def test_it_answers_404_when_no_token_is_configured(client, settings):
    settings.TIERWATCH_METRICS_TOKEN = ""
    assert client.get("/metrics", **AUTH).status_code == 404


def test_it_handles_a_missing_or_wrong_token_with_401(client, token):
    assert client.get("/metrics").status_code == 401
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_it_reports_the_newest_probe_in_seconds(client, token):
    pair = factories.pair(claim_value=6)
    factories.run(
        pair, minutes_ago=30, summary=factories.summary(fast=factories.tier(ttft=(999.0, 999.0)))
    )
    scenario = ScenarioStats(
        fast=Timings(ttft_ms=factories.stat(10, 80.0, 120.0)), speedup=SpeedUp(ttft=5.5)
    )
    newest = factories.run(
        pair,
        minutes_ago=10,
        summary=factories.summary(
            fast=factories.tier(ttft=(100.0, 250.0), n=20, n_ok=18, availability=0.9),
            base=factories.tier(3, ttft=(400.0, 900.0)),  # n=3: below min n, no percentiles
            similarity=0.93,
            noise_floor=0.98,
            speedup=SpeedUp(ttft=4.0, e2e=3.0),
            by_scenario={"long_cached": scenario},
        ),
    )
    factories.run(pair, status="running", minutes_ago=1)
    got = samples(client)

    ttft = got["tierwatch_ttft_seconds"]
    assert ttft[labels(pair="demo", tier="fast", scenario="all", percentile="p95")] == 0.25
    assert ttft[labels(pair="demo", tier="fast", scenario="all", percentile="p50")] == 0.1
    assert ttft[labels(pair="demo", tier="fast", scenario="long_cached", percentile="p50")] == 0.08
    assert not [k for k in ttft if ("tier", "base") in k]
    assert got["tierwatch_availability_ratio"][labels(pair="demo", tier="fast")] == 0.9
    assert got["tierwatch_error_ratio"][labels(pair="demo", tier="fast")] == pytest.approx(0.1)
    speedup = got["tierwatch_speedup_ratio"]
    assert speedup[labels(pair="demo", scenario="all", metric="ttft")] == 4.0
    assert speedup[labels(pair="demo", scenario="long_cached", metric="ttft")] == 5.5
    assert got["tierwatch_claimed_speedup_ratio"][labels(pair="demo")] == 6.0
    claim = labels(pair="demo", metric="e2e", form="factor", percentile="")
    assert got["tierwatch_claim"][claim] == 6.0
    sim = got["tierwatch_similarity_ratio"]
    assert sim[labels(pair="demo", comparison="fast_vs_base")] == 0.93
    assert sim[labels(pair="demo", comparison="base_vs_base")] == 0.98
    stamp = got["tierwatch_last_run_timestamp_seconds"][labels(pair="demo", kind="probe")]
    assert stamp == newest.finished_at.timestamp()
    runs = got["tierwatch_runs"]
    assert runs[labels(pair="demo", status="done")] == 2
    assert runs[labels(pair="demo", status="running")] == 1
    assert runs[labels(pair="demo", status="failed")] == 0


def test_it_reports_the_verdict_as_a_state_set_and_firing_alerts(client, token):
    pair = factories.pair()
    verdict = {"label": "outputs_differ", "sentence": "outputs differ", "p_value": 0.003}
    factories.run(
        pair,
        kind=RunKind.AUDIT,
        minutes_ago=5,
        summary=factories.summary(
            verdict=Verdict(label="outputs_differ", p_value=0.003, data=verdict)
        ),
    )
    rule = AlertRule.objects.create(name="r", metric="ttft_p95", threshold=1)
    Alert.objects.create(rule=rule, pair=pair, message="firing")
    Alert.objects.create(
        rule=rule, pair=pair, message="over", state="resolved", resolved_at=timezone.now()
    )
    Alert.objects.create(rule=rule, pair=pair, message="seen", state="acknowledged")
    got = samples(client)
    states = {dict(k)["verdict"]: v for k, v in got["tierwatch_verdict"].items()}
    assert states == {
        "outputs_differ": 1.0,
        "no_detectable_difference": 0.0,
        "capability_difference": 0.0,
        "inconclusive": 0.0,
    }
    assert got["tierwatch_verdict_p_value"][labels(pair="demo")] == 0.003
    assert got["tierwatch_alerts_firing"][labels(pair="demo")] == 1
    assert labels(pair="demo", kind="audit") in got["tierwatch_last_run_timestamp_seconds"]
    assert "tierwatch_ttft_seconds" not in got  # no finished probe yet


def _probe_with_rollups(pair, *, minutes_ago: float, n: int, fast_ms: float = 100.0):
    run = factories.run(pair, minutes_ago=minutes_ago, summary=factories.summary())
    rows = factories.rollup_rows(run, fast_ms=fast_ms, base_ms=400.0, n=n)
    rollups.record_run(run=run, samples=rows)
    return run


def test_it_reports_the_windows_percentiles_from_the_rollup_sketches_with_their_n(client, token):
    pair = factories.pair()
    _probe_with_rollups(pair, minutes_ago=30, n=40)  # 40 + 40 in the window: P95, no P99
    _probe_with_rollups(pair, minutes_ago=10, n=40)
    _probe_with_rollups(pair, minutes_ago=25 * 60, n=400, fast_ms=9000.0)  # out of the window
    factories.run(pair, kind=RunKind.AUDIT, minutes_ago=5)  # audits are not in the window
    got = samples(client)
    n = got["tierwatch_window_samples"]
    assert n[labels(pair="demo", tier="fast", metric="ttft")] == 80
    assert n[labels(pair="demo", tier="base", metric="e2e")] == 80
    ttft = got["tierwatch_window_ttft_seconds"]
    p95 = ttft[labels(pair="demo", tier="fast", percentile="p95")]
    assert 0.13 <= p95 <= 0.141  # TTFT 100..139 ms twice (sketch bins: within a few %)
    assert labels(pair="demo", tier="fast", percentile="p99") not in ttft  # n < 299
    e2e = got["tierwatch_window_e2e_seconds"]
    assert e2e[labels(pair="demo", tier="base", percentile="p50")] == pytest.approx(4.0, rel=0.03)


def _pairs(n: int, prefix: str) -> None:
    """n pairs, each with a finished probe and a finished audit."""
    suite = factories.suite(prefix)
    for i in range(n):
        pair = factories.pair(
            f"{prefix}{i}", fast=f"{prefix}f{i}", base=f"{prefix}b{i}", suite_row=suite
        )
        factories.run(pair, summary=factories.summary())
        factories.run(pair, kind=RunKind.AUDIT, summary=factories.summary())


def test_a_scrape_costs_the_same_queries_for_1_or_12_pairs(
    client, token, django_assert_num_queries
):
    _pairs(1, "p")
    with django_assert_num_queries(7):
        client.get("/metrics", **AUTH)
    _pairs(11, "q")
    with django_assert_num_queries(7):
        response = client.get("/metrics", **AUTH)
    assert 'tierwatch_ttft_seconds{pair="q10"' in response.content.decode()


def test_the_example_dashboard_queries_only_metrics_that_exist(client, token, settings):
    dashboard = json.loads((settings.BASE_DIR / "docs" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    wanted = {name for e in exprs for name in re.findall(r"tierwatch_[a-z0-9_]+", e)}
    pair = factories.pair(claim_value=6)
    factories.run(pair, summary=factories.summary(speedup=SpeedUp(ttft=4.0)))
    _probe_with_rollups(pair, minutes_ago=5, n=60)
    verdict = {"label": "inconclusive"}
    factories.run(
        pair,
        kind=RunKind.AUDIT,
        summary=factories.summary(verdict=Verdict(label="inconclusive", data=verdict)),
    )
    assert wanted <= set(samples(client)), wanted - set(samples(client))
    assert {"TTFT P95 per tier (all scenarios)", "Verdict of the newest audit"} <= {
        p["title"] for p in dashboard["panels"]
    }
