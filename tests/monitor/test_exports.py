"""CSV and JSON exports of the run, pair and speed pages: their columns, streamed responses,
the buttons on the pages, the viewer's permission, and that no key from the environment, no
response header and no error message leaves in a download."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.utils import timezone

from monitor.models import Case, Run, Suite
from monitor.reporting import exports
from monitor.runs.steps import summarise_run
from monitor.setup import roles
from tests import factories

pytestmark = pytest.mark.django_db

SECRET = "sk-live-do-not-export-4242"


@pytest.fixture
def viewer(client):
    client.force_login(factories.user("vera", roles.VIEWER))
    return client


@pytest.fixture
def run(monkeypatch) -> Run:
    """A finished probe whose endpoint reads SECRET from the environment, with a sample that
    (as no sample should) carries the key in a header and in its error message."""
    monkeypatch.setenv("ACME_KEY", SECRET)
    suite = Suite.objects.create(name="speed")
    for scenario in ("long_cached", "short_long_out"):
        Case.objects.create(
            suite=suite,
            key=scenario,
            scenario=scenario,
            messages=[{"role": "user", "content": "hi"}],
        )
    pair = factories.pair(suite_row=suite, claim_metric="ttft", claim_value=3)
    pair.fast.api_key_env = pair.base.api_key_env = "ACME_KEY"
    pair.fast.save()
    pair.base.save()
    row = factories.run(pair, finished_at=timezone.now())
    seq = 0
    for case in suite.cases.all():
        for rep in range(6):
            for tier, scale in (("base", 1.0), ("fast", 0.25)):
                factories.sample(
                    row,
                    case,
                    tier,
                    seq=seq,
                    repetition=rep,
                    text=f"t{seq}",
                    ttft_ms=400 * scale * (1 + rep / 10),
                    e2e_ms=2000 * scale,
                    tpot_ms=20 * scale,
                    completion_tokens=50,
                    estimated_tokens=48,
                    headers={"authorization": SECRET},
                )
                seq += 1
    factories.sample(
        row,
        case,
        "fast",
        seq=seq,
        ok=False,
        error_class="http_401",
        error_message=f"401 for key {SECRET}",
        http_status=401,
    )
    summarise_run(run_id=row.id)
    row.refresh_from_db()
    return row


def read_csv(response) -> list[dict[str, str]]:
    assert response.streaming
    body = b"".join(response.streaming_content).decode()
    assert SECRET not in body
    return list(csv.DictReader(io.StringIO(body)))


def read_json(response) -> list[dict]:
    assert response.streaming
    body = b"".join(response.streaming_content).decode()
    assert SECRET not in body
    return json.loads(body)


def test_the_run_samples_export_has_the_sample_columns_and_no_secret(viewer, run):
    rows = read_csv(viewer.get(f"/runs/{run.pk}/samples.csv"))
    assert list(rows[0]) == list(exports.SAMPLE_COLUMNS)
    assert len(rows) == run.samples.count() == 25
    failed = rows[-1]
    assert (failed["ok"], failed["error_class"], failed["http_status"]) == (
        "False",
        "http_401",
        "401",
    )
    assert rows[0]["case"] == "long_cached" and float(rows[0]["ttft_ms"]) == 400.0
    assert "text" not in rows[0] and "headers" not in rows[0]


def test_the_run_samples_export_as_json_with_texts_on_request(viewer, run):
    response = viewer.get(f"/runs/{run.pk}/samples.json?text=1")
    assert response["Content-Disposition"].endswith(f'tierwatch-run-{run.pk}-samples.json"')
    records = read_json(response)
    assert list(records[0]) == [*exports.SAMPLE_COLUMNS, "text"]
    assert records[1]["text"] == "t1" and records[1]["tier"] == "fast"


def test_the_pair_export_lists_runs_with_their_summary_figures(viewer, run):
    factories.run(run.pair, status="failed")
    rows = read_csv(viewer.get("/pairs/demo/runs.csv"))
    assert list(rows[0]) == list(exports.RUN_COLUMNS)
    assert [r["status"] for r in rows] == ["failed", "done"]
    done = rows[1]
    assert int(done["fast_n"]) == 13 and int(done["fast_n_ok"]) == 12
    assert float(done["speedup_ttft"]) == pytest.approx(4.0)
    assert read_json(viewer.get("/pairs/demo/runs.json"))[1]["id"] == run.pk


def test_the_speed_export_is_the_per_scenario_table(viewer, run):
    rows = read_csv(viewer.get("/pairs/demo/speed/speedups.csv"))
    assert list(rows[0]) == list(exports.SPEEDUP_COLUMNS)
    assert [r["scenario"] for r in rows] == ["long_cached", "short_long_out"]
    assert float(rows[0]["ttft_estimate"]) == pytest.approx(4.0)
    assert rows[0]["ttft_status"]  # judged against the claimed 3× TTFT
    assert not rows[0]["e2e_status"]  # the claim names TTFT: E2E is not judged against it
    records = read_json(viewer.get("/pairs/demo/speed/speedups.json"))
    assert records[1]["n_pairs"] == 6


def test_the_pages_carry_the_export_buttons(viewer, run):
    for page, export in (
        (f"/runs/{run.pk}/", f"/runs/{run.pk}/samples."),
        ("/pairs/demo/", "/pairs/demo/runs."),
        ("/pairs/demo/speed/", "/pairs/demo/speed/speedups."),
    ):
        html = viewer.get(page).content.decode()
        assert f'href="{export}csv"' in html and f'href="{export}json"' in html, page


def test_it_handles_an_unknown_format_with_404(viewer, run):
    assert viewer.get(f"/runs/{run.pk}/samples.xlsx").status_code == 404


def test_exports_need_the_view_permission(client, run):
    client.force_login(factories.user("norole"))
    assert client.get(f"/runs/{run.pk}/samples.csv").status_code == 403
    assert client.get("/pairs/demo/runs.json").status_code == 403
