"""Vendor-controlled text in a CSV export never starts a cell a spreadsheet runs as a formula:
the run's samples, the pair's runs and the SLA report's CSV."""

from __future__ import annotations

import csv
import io

import pytest
from django.utils import timezone

from monitor.reporting.sla import build_sla_report, render_csv
from monitor.setup import roles
from tests import factories

pytestmark = pytest.mark.django_db

PAYLOADS = ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1:A9)", "\t=1", "\r=1", '=HYPERLINK("x")']


def cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def test_formula_cells_from_a_vendor_are_neutralised_in_every_csv(client):
    client.force_login(factories.user("vera", roles.VIEWER))
    pair = factories.pair()
    pair.fast.model = PAYLOADS[0]
    pair.fast.save()
    run = factories.run(pair, finished_at=timezone.now())
    case = pair.suite.cases.first()
    for seq, payload in enumerate(PAYLOADS):
        factories.sample(
            run,
            case,
            "fast",
            seq=seq,
            text=payload,
            model_id=payload,
            system_fingerprint=payload,
            served_tier=payload[:40],
            finish_reason=payload[:32],
        )
    body = b"".join(client.get(f"/runs/{run.id}/samples.csv?text=1").streaming_content).decode()
    body += b"".join(client.get(f"/pairs/{pair.name}/runs.csv").streaming_content).decode()
    iso = timezone.now().isocalendar()
    body += render_csv(build_sla_report(week=f"{iso.year}-W{iso.week:02d}"))
    found = cells(body)
    assert any(c == "'" + PAYLOADS[0] for c in found)  # the payload is there, neutralised
    assert [c for c in found if c[:1] in ("=", "+", "@", "\t", "\r")] == []
    assert [c for c in found if c.startswith("-") and not _number(c)] == []


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True
