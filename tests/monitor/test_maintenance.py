"""Maintenance windows: which pairs a window covers, one-off and cron occurrences, validation."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError

from monitor.alerting import maintenance
from monitor.models import MaintenanceWindow
from tests import factories

pytestmark = pytest.mark.django_db
T = datetime(2026, 11, 29, tzinfo=UTC)  # a Sunday


def at(hour: int, minute: int = 0, day: int = 29) -> datetime:
    return T.replace(day=day, hour=hour, minute=minute)


def test_a_recurring_window_is_active_from_each_cron_start_for_its_duration():
    w = MaintenanceWindow(cron="0 2 * * SUN", duration_minutes=90, reason="weekly")
    assert maintenance.occurrence_at(w, at(2)) == (at(2), at(3, 30))  # starts exactly now
    assert maintenance.occurrence_at(w, at(3, 29)) is not None
    assert maintenance.occurrence_at(w, at(3, 30)) is None  # [start, end)
    assert maintenance.occurrence_at(w, at(1, 59)) is None
    assert maintenance.occurrence_at(w, at(2, 30, day=30)) is None  # Monday


def test_occurrences_list_the_windows_overlapping_a_range():
    w = MaintenanceWindow(cron="0 2 * * *", duration_minutes=60, reason="nightly")
    got = maintenance.occurrences(w, at(2, 30), at(2, 30, day=30))
    assert got == [(at(2), at(3)), (at(2, day=30), at(3, day=30))]


def test_a_window_covers_its_pair_its_vendor_host_or_everything():
    pair = factories.pair()  # endpoints at 127.0.0.1
    other = factories.pair("other", fast="o-fast", base="o-base", suite_row=pair.suite)
    mine = MaintenanceWindow.objects.create(pair=pair, starts_at=at(1), ends_at=at(2), reason="a")
    host = MaintenanceWindow.objects.create(
        vendor_host="127.0.0.1", starts_at=at(1), ends_at=at(2), reason="b"
    )
    MaintenanceWindow.objects.create(
        vendor_host="api.elsewhere.com", starts_at=at(1), ends_at=at(2), reason="c"
    )
    everything = MaintenanceWindow.objects.create(starts_at=at(1), ends_at=at(2), reason="d")
    assert maintenance.windows_for(pair) == [mine, host, everything]
    assert maintenance.windows_for(other) == [host, everything]
    assert maintenance.active_window(other, at(1, 30)) == host
    assert maintenance.active_window(other, at(2)) is None


@pytest.mark.parametrize(
    "fields, field, message",
    [
        ({"cron": "61 * * * *", "duration_minutes": 5}, "cron", "not a cron expression"),
        ({"cron": "0 2 * * *"}, "duration_minutes", "needs a duration"),
        ({"starts_at": T}, "starts_at", "give start and end"),
        ({"starts_at": at(3), "ends_at": at(2)}, "ends_at", "after the start"),
    ],
)
def test_a_window_that_cannot_be_read_is_refused_with_its_field(fields, field, message):
    with pytest.raises(ValidationError) as info:
        MaintenanceWindow(reason="x", **fields).full_clean()
    assert message in " ".join(info.value.message_dict[field])
