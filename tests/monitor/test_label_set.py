"""One place names the verdict labels (``evals.stats.labels.LABELS``): /metrics, the API
schema and the pages cover every label the product can write, a real demo audit whose verdict
is "outputs differ" exports 1 on that series, and stored verdicts of the retired engine are
relabelled by the migration."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from prometheus_client.parser import text_string_to_metric_families

from evals.stats.labels import LABEL_WORDS, LABELS
from monitor.api.routes import api
from monitor.models import Endpoint, Pair
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.setup.suites import sync_builtin_suite
from monitor.web.verdict import LABEL_MEANING
from monitor.web.verdict_charts import LABEL_COLOURS

TOKEN = "label-set-scrape-token"
TEMPLATE = Path(django_settings.BASE_DIR) / "templates" / "monitor" / "verdict.html"


def test_every_label_has_its_words_meaning_colour_and_style_on_the_verdict_page():
    assert set(LABEL_WORDS) == set(LABEL_MEANING) == set(LABEL_COLOURS) == set(LABELS)
    css = TEMPLATE.read_text()
    for label in LABELS:
        assert re.search(rf"\.verdict-box\.{label} \{{", css), label
        assert re.search(rf"\.label\.{label} \{{", css), label


def test_the_api_schema_names_exactly_the_labels():
    schema = api.get_openapi_schema()
    label = schema["components"]["schemas"]["VerdictOut"]["properties"]["label"]
    assert tuple(label["enum"]) == LABELS


@pytest.mark.django_db
def test_a_demo_pair_whose_outputs_differ_exports_1_on_that_series(
    client, settings, demo_vendor_url
):
    settings.TIERWATCH_METRICS_TOKEN = TOKEN
    base, distilled = (
        Endpoint.objects.create(name=n, base_url=demo_vendor_url, model=n, simulated=True,
                                max_concurrency=8)
        for n in ("demo-base", "demo-distilled")
    )  # fmt: skip
    sync_builtin_suite(name="audit")
    pair = Pair.objects.create(name="demo-distilled-vs-base", fast=distilled, base=base,
                               suite=sync_builtin_suite(name="smoke"), repeat=2)  # fmt: skip
    run = execute_run(run_id=create_run(pair=pair, kind="audit", repeat=5, seed=3).id,
                      cases_limit=25)  # fmt: skip
    assert run.summary["verdict"]["label"] == "outputs_differ", run.summary["verdict"]["sentence"]
    body = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()
    states = {
        s.labels["verdict"]: s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
        if s.name == "tierwatch_verdict" and s.labels["pair"] == pair.name
    }
    assert states == {label: float(label == "outputs_differ") for label in LABELS}


@pytest.fixture
def newest_schema_after():
    """The test migrates back and forth: the tests after it on this worker need the newest
    schema again (the leaf migrations, not the one this test stops at)."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_the_migration_relabels_verdicts_of_the_retired_engine(newest_schema_after):
    executor = MigrationExecutor(connection)
    before, after = (
        [("monitor", "0015_pair_generation")],
        [("monitor", "0016_retired_verdict_labels")],
    )
    executor.migrate(before)
    apps = executor.loader.project_state(before).apps
    Endpoint_, Pair_, Suite, Run = (apps.get_model("monitor", m)
                                    for m in ("Endpoint", "Pair", "Suite", "Run"))  # fmt: skip
    fast = Endpoint_.objects.create(name="f", base_url="http://127.0.0.1:9/v1", model="f")
    base = Endpoint_.objects.create(name="b", base_url="http://127.0.0.1:9/v1", model="b")
    suite = Suite.objects.create(name="s")
    pair = Pair_.objects.create(name="p", fast=fast, base=base, suite=suite)
    old = {
        "numerics_scale_difference": {"mmd_fast_vs_base": 0.01},
        "different_model": {"mmd_fast_vs_base": 0.0002, "mcnemar": 0.03},
        "no_detectable_difference": {"mmd_fast_vs_base": 0.5},
    }
    ids = {
        label: Run.objects.create(pair=pair, suite=suite, kind="audit", summary={"verdict": {
            "label": label, "sentence": f"{label} (old words)", "adjusted_p_values": adj,
        }}).id
        for label, adj in old.items()
    }  # fmt: skip
    generation = pair.generation
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    apps = executor.loader.project_state(after).apps
    runs = apps.get_model("monitor", "Run").objects
    got = {k: runs.get(id=i).summary["verdict"] for k, i in ids.items()}
    assert {k: v["label"] for k, v in got.items()} == {
        "numerics_scale_difference": "outputs_differ",
        "different_model": "capability_difference",
        "no_detectable_difference": "no_detectable_difference",
    }
    assert got["different_model"]["sentence"] == "different_model (old words)"  # kept
    assert apps.get_model("monitor", "Pair").objects.get(id=pair.id).generation == generation + 1
