"""``scale_data --copy`` writes what the product would have: the runs' rollups and summaries
agree with their samples, samples beyond the retention window are emptied as retention leaves
them, and provenance events count every sample that named a model."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import Sum

from benchmarks import scale_data
from monitor.derived.retention import EMPTY
from monitor.derived.rollups import ROLLUP_FIELDS, slo_of, tier_rollups
from monitor.derived.summary import summarise_samples
from monitor.models import ProvenanceEvent, Run, RunRollup, Sample

pytestmark = pytest.mark.django_db(transaction=True)  # COPY, DROP INDEX, VACUUM: autocommit


def test_copy_mode_writes_pair_days_in_the_products_shape(settings):
    if connection.vendor != "postgresql":
        pytest.skip("--copy needs PostgreSQL")
    settings.TIERWATCH_RETENTION_DAYS = 2  # a short window: 4 days have both shapes
    days = 4
    assert scale_data.main(["--copy", "--pairs", "1", "--days", str(days), "--templates", "2"]) == 0
    assert Sample.objects.count() == days * 576 and Run.objects.count() == days * 28
    emptied = Sample.objects.filter(pruned_at__isnull=False)
    assert 576 <= emptied.count() <= 3 * 576  # the days beyond the window, at most
    assert not emptied.exclude(**EMPTY).exists()
    assert not Sample.objects.filter(pruned_at__isnull=True, ok=True, text="").exists()
    for run in (Run.objects.order_by("id").first(), Run.objects.order_by("id").last()):
        rows = list(run.samples.values(*ROLLUP_FIELDS))
        fresh = tier_rollups(rows, slo_of(run.pair.slo_ttft_ms, run.pair.slo_e2e_ms))
        for rollup in RunRollup.objects.filter(run=run):
            assert {k: getattr(rollup, k) for k in fresh[rollup.tier]} == fresh[rollup.tier]
        again = summarise_samples(list(run.samples.select_related("case")))
        assert run.summary["tiers"]["fast"]["ttft_ms"] == again["tiers"]["fast"]["ttft_ms"]
    named = Sample.objects.exclude(model_id="").count()
    assert ProvenanceEvent.objects.filter(kind="model_id").aggregate(n=Sum("count"))["n"] == named
    assert Run.objects.exclude(verdict="").exists()  # the newest audit's verdict
