"""``/metrics`` as the ecosystem's own tools read it, on a demo-like database (the demo's pairs,
probes measured against the simulated vendor): ``promtool check metrics`` finds nothing to lint,
and every metric the example Grafana dashboard queries has series, the P95 panels included."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from django.core.management import call_command
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

from monitor.models import Pair, RunKind, RunTrigger
from monitor.runs import pipeline, steps
from monitor.setup.demo import ensure_demo

# one worker for both tests: the scrape is measured once per module (``demo_scrape``)
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.xdist_group("metrics_scrape")]

TOKEN = "scrape-token-for-tests"
PROBES = 3  # a probe of the demo's scenario pair has 22 requests per tier; a P95 needs 59
AUDIT_REPEAT = 2  # the verdict panel needs an audit's label, not a conclusive one


@pytest.fixture(scope="module")
def demo_scrape(django_db_setup, django_db_blocker, demo_vendor_url) -> str:
    """The text of one scrape after the demo's scenario pair measured ``PROBES`` probes (the
    demo's coding pairs measure the same way, with minutes of sandboxed checks a probe) and
    its fast-vs-base pair one small audit, all through the real pipeline. Measured once for the
    module's tests, which only read the text; the rows it commits are flushed after the first
    test, as after any ``transaction=True`` test (here too if the set-up fails)."""
    with django_db_blocker.unblock(), override_settings(TIERWATCH_METRICS_TOKEN=TOKEN):
        try:
            return _scrape(demo_vendor_url)
        except BaseException:
            call_command("flush", interactive=False, verbosity=0)
            raise


def _scrape(demo_vendor_url: str) -> str:
    ensure_demo(vendor_url=demo_vendor_url)
    scenarios = Pair.objects.get(name="demo-fast-vs-base-scenarios")
    for _ in range(PROBES):
        run = steps.create_run(pair=scenarios, kind=RunKind.PROBE, trigger=RunTrigger.MANUAL)
        assert pipeline.execute_run(run_id=run.pk).status == "done"
    pair = Pair.objects.get(name="demo-fast-vs-base")
    audit = steps.create_run(pair=pair, kind=RunKind.AUDIT, repeat=AUDIT_REPEAT)
    assert pipeline.execute_run(run_id=audit.pk).status == "done"
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not installed (Debian: prometheus)"
)
def test_promtool_finds_nothing_to_lint(demo_scrape):
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=demo_scrape, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_dashboard_panel_queries_metrics_with_series(demo_scrape, settings):
    dashboard = json.loads((settings.BASE_DIR / "docs" / "grafana-dashboard.json").read_text())
    series: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(demo_scrape):
        for s in family.samples:
            series.setdefault(s.name, []).append(s.labels)
    empty = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for name, matchers in re.findall(
                r"(tierwatch_[a-z0-9_]+)(?:\{([^}]*)\})?", target["expr"]
            ):
                wanted = dict(re.findall(r'(\w+)="([^"]*)"', matchers or ""))
                if not any(wanted.items() <= labels.items() for labels in series.get(name, [])):
                    empty.append(f"{panel['title']}: {name}{{{matchers}}}")
    assert not empty, empty
