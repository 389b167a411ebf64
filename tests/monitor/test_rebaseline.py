"""Every acknowledge & re-baseline leaves a trace: through the verdict page's button, the audit
log gets who, when and what was reset (the e-process with its value, the CUSUM metrics, the
capability detectors, the retired baseline, the tripwires), and the pair's timeline shows it."""

from __future__ import annotations

import pytest

from monitor.models import Baseline, ConfigChange, PairMonitorState, TripwireState
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair():
    pair = factories.pair()
    PairMonitorState.objects.create(
        pair=pair,
        eprocess={"evalue": 42.5, "detector": 30.0, "audits": 3, "alarmed": True},
        cusum={"ttft_p50": {"s": 1.0}, "e2e_p50": {"s": 2.0}},
        capability={"code/humaneval": {"e": 2.0}},
    )
    Baseline.objects.create(pair=pair, run_ids=[1, 2, 3, 4, 5], set_by="automatic")
    TripwireState.objects.create(pair=pair, tiers={"fast": {}, "base": {}})
    return pair


def test_a_rebaseline_is_in_the_audit_log_and_on_the_timeline(admin_client, pair):
    baseline = Baseline.objects.get(pair=pair)
    response = admin_client.post(f"/pairs/{pair.name}/verdict/acknowledge/")
    assert response.status_code == 302
    change = ConfigChange.objects.get()
    assert (change.username, change.action, change.model, change.object_repr) == (
        "admin",
        "reset",
        "pair",
        pair.name,
    )
    # the verdict's e-process was in alarm, drift was not: the verdict's evidence and the
    # capability detectors restart, the drift baseline and CUSUM stay (evidence.acknowledge),
    # and the log says exactly that
    assert change.diff["e-process"] == [
        "e = 42.5 over 3 audits (alarmed)",
        "e = 1 over 0 audits",
    ]
    assert change.diff["capability detectors"] == [["code/humaneval"], []]
    assert change.diff["tripwires"] == [["base", "fast"], []]
    assert "CUSUM" not in change.diff and "baseline" not in change.diff
    # and the reset really happened, in the same call
    assert Baseline.objects.filter(pair=pair, active=True).exists()
    assert PairMonitorState.objects.get(pair=pair).cusum == {
        "ttft_p50": {"s": 1.0},
        "e2e_p50": {"s": 2.0},
    }
    assert PairMonitorState.objects.get(pair=pair).capability == {}
    assert TripwireState.objects.get(pair=pair).tiers == {}

    audit_page = admin_client.get("/audit/").content.decode()
    assert "acknowledge &amp; re-baseline" in audit_page and "e = 42.5 over 3 audits" in audit_page
    timeline = admin_client.get(f"/pairs/{pair.name}/timeline/").content.decode()
    assert "Change acknowledged &amp; re-baselined" in timeline
    assert "e-process (e = 42.5 over 3 audits (alarmed))" in timeline
    assert "capability detectors (code/humaneval)" in timeline
    assert "CUSUM" not in timeline and f"baseline #{baseline.pk}" not in timeline
    assert "admin" in timeline


def test_a_rebaseline_with_nothing_in_alarm_resets_everything_and_says_so(admin_client, pair):
    baseline = Baseline.objects.get(pair=pair)
    PairMonitorState.objects.filter(pair=pair).update(
        eprocess={"evalue": 3.0, "detector": 2.0, "audits": 3, "alarmed": False}
    )
    assert admin_client.post(f"/pairs/{pair.name}/verdict/acknowledge/").status_code == 302
    diff = ConfigChange.objects.get().diff
    assert diff["CUSUM"] == [["e2e_p50", "ttft_p50"], []]
    assert diff["baseline"][0][0].startswith(f"#{baseline.pk} from 5 probe runs")
    assert diff["baseline"][1] == ["none active"]
    assert not Baseline.objects.filter(pair=pair, active=True).exists()
    timeline = admin_client.get(f"/pairs/{pair.name}/timeline/").content.decode()
    assert "CUSUM (e2e_p50, ttft_p50)" in timeline and f"baseline #{baseline.pk}" in timeline
