"""Migration 0021: the one number ``claimed_speedup`` becomes a claim (e2e, factor, value),
and back."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("monitor", "0019_tripwire_state")]
AFTER = [("monitor", "0023_claims_gating")]


@pytest.fixture
def newest_schema_after():
    """The test migrates back and forth: later tests on this worker need the newest schema."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def _models(target):
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    apps = executor.loader.project_state(target).apps
    return [apps.get_model("monitor", m) for m in ("Endpoint", "Pair", "Suite")]


@pytest.mark.django_db(transaction=True)
def test_claimed_speedup_becomes_an_e2e_factor_and_back(newest_schema_after):
    Endpoint, Pair, Suite = _models(BEFORE)
    fast = Endpoint.objects.create(name="f", base_url="http://127.0.0.1:9/v1", model="f")
    base = Endpoint.objects.create(name="b", base_url="http://127.0.0.1:9/v1", model="b")
    suite = Suite.objects.create(name="s")
    claimed = Pair.objects.create(name="six", fast=fast, base=base, suite=suite, claimed_speedup=6)
    silent = Pair.objects.create(name="none", fast=fast, base=base, suite=suite)

    _, Pair, _ = _models(AFTER)
    six, none = Pair.objects.get(id=claimed.id), Pair.objects.get(id=silent.id)
    assert (six.claim_metric, six.claim_form, six.claim_value, six.claim_percentile) == (
        "e2e",
        "factor",
        6.0,
        None,
    )
    assert none.claim_value is None and not six.include_downgraded
    Pair.objects.filter(id=silent.id).update(
        claim_metric="output_tps", claim_form="floor", claim_value=80, claim_percentile=99
    )

    _, Pair, _ = _models(BEFORE)
    assert Pair.objects.get(id=claimed.id).claimed_speedup == 6.0
    assert Pair.objects.get(id=silent.id).claimed_speedup is None  # a floor is no factor
