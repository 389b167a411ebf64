"""The admin's sample and run pages name their run, case, endpoint and pair by id: a <select>
of every row of the biggest tables made the sample page take 4–6 s on a real database."""

from __future__ import annotations

import pytest

from tests import factories

pytestmark = pytest.mark.django_db


def test_the_sample_and_run_change_pages_render_no_select_of_big_tables(admin_client):
    pair = factories.pair()
    run = factories.run(pair)
    sample = factories.sample(run, pair.suite.cases.first(), "fast")
    html = admin_client.get(f"/admin/monitor/sample/{sample.pk}/change/").content.decode()
    for field in ("run", "case", "endpoint"):
        assert f'<select name="{field}"' not in html
        assert f'name="{field}"' in html
    assert "vForeignKeyRawIdAdminField" in html
    html = admin_client.get(f"/admin/monitor/run/{run.pk}/change/").content.decode()
    assert '<select name="pair"' not in html and '<select name="suite"' not in html
    assert "vForeignKeyRawIdAdminField" in html
