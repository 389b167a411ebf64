"""Probe schedules created together fall due spread over their interval, not all at once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from monitor.setup.schedules import ensure_probe_schedule, phase_s


@pytest.mark.django_db
def test_new_schedules_start_at_a_stable_phase_and_keep_it_when_reapplied():
    before = timezone.now()
    rows = [ensure_probe_schedule(pair_name=f"pair{i:02d}", every_s=300) for i in range(50)]
    phases = {round((before - r.last_run_at).total_seconds()) for r in rows}
    assert len(phases) > 40 and all(0 <= p < 301 for p in phases)  # spread over 5 minutes
    assert rows[7].last_run_at <= before - timedelta(
        seconds=phase_s("probe:pair07", 300)
    ) + timedelta(seconds=1)
    again = ensure_probe_schedule(pair_name="pair07", every_s=300)  # apply_config twice
    assert again.last_run_at == rows[7].last_run_at
