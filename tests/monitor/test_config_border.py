"""``schedule.border_discovery`` in a config file: it accepts the stated cost of the pair's
border-input discovery as the pair page's button does; anything but a boolean is refused
with file, line and field, and nothing is stored."""

from __future__ import annotations

import pytest

from monitor.models import Pair, TripwireState
from monitor.setup.config import ConfigError, apply_config_text
from tests.monitor.configs import GOOD

pytestmark = pytest.mark.django_db
OLD = "schedule: {every: 15m, audit_every: 6h}"


def test_border_discovery_true_allows_the_discovery():
    apply_config_text(GOOD.replace(OLD, OLD[:-1] + ", border_discovery: true}"), source="t.yaml")
    assert TripwireState.objects.get(pair__name="acme").border_allowed


def test_border_discovery_that_is_not_a_boolean_is_refused_with_its_line():
    with pytest.raises(ConfigError) as err:
        apply_config_text(
            GOOD.replace(OLD, OLD[:-1] + ", border_discovery: yes please}"), source="t.yaml"
        )
    assert "t.yaml:26: pairs[0].schedule.border_discovery: must be true or false" in str(err.value)
    assert not Pair.objects.exists() and not TripwireState.objects.exists()
