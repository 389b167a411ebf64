"""The run page pages its samples (50 a page) and filters them by tier, case and result, with
the count each choice has: an audit run rendered its 600 samples at once (31,527 px, 2.7 s)."""

from __future__ import annotations

import re

import pytest

from monitor.models import Case, Sample
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def audit_run():
    """120 samples: 2 tiers × 3 cases × 20; on case c1 the fast tier answered 401 five times."""
    pair = factories.pair()
    cases = [Case.objects.create(suite=pair.suite, key=f"c{i}", messages=[]) for i in range(3)]
    run = factories.run(pair, kind="audit")
    rows, seq = [], 0
    for case in cases:
        for tier in ("fast", "base"):
            for rep in range(20):
                failed = tier == "fast" and case.key == "c1" and rep < 5
                rows.append(
                    Sample(
                        run=run, case=case, tier=tier, repetition=rep, seq=seq,
                        endpoint=pair.fast if tier == "fast" else pair.base,
                        ok=not failed, error_class="http_status" if failed else "",
                        http_status=401 if failed else None, started_at=run.created_at,
                    )
                )  # fmt: skip
                seq += 1
    Sample.objects.bulk_create(rows)
    return run


def shown(html: str) -> list[int]:
    """The seq column of the rows on the page."""
    body = html.split('<table class="data samples">', 1)[1].split("</table>", 1)[0]
    return [int(x) for x in re.findall(r'<tr class="[^"]*">\s*<td class="num">(\d+)</td>', body)]


def test_it_shows_50_a_page_with_a_pager(admin_client, audit_run):
    html = admin_client.get(f"/runs/{audit_run.pk}/").content.decode()
    assert shown(html) == list(range(50))
    assert "(120; page 1 of 3, 50 shown)" in html and "next 50 →" in html
    last = admin_client.get(f"/runs/{audit_run.pk}/?page=3").content.decode()
    assert shown(last) == list(range(100, 120)) and "← previous 50" in last
    beyond = admin_client.get(f"/runs/{audit_run.pk}/?page=99").content.decode()
    assert shown(beyond) == list(range(100, 120))  # past the end: the last page
    assert shown(admin_client.get(f"/runs/{audit_run.pk}/?page=x").content.decode())[0] == 0


def test_it_filters_by_tier_case_and_result_with_counts(admin_client, audit_run):
    html = admin_client.get(f"/runs/{audit_run.pk}/").content.decode()
    assert '<option value="fast">fast (60)</option>' in html
    assert '<option value="c1">c1 (40)</option>' in html
    assert '<option value="ok">ok (115)</option>' in html
    assert '<option value="http_status">http_status (5)</option>' in html
    failed = admin_client.get(f"/runs/{audit_run.pk}/?error=http_status").content.decode()
    assert "(5 of 120 match)" in failed and shown(failed) == [40, 41, 42, 43, 44]
    assert '<option value="http_status" selected>' in failed
    one = admin_client.get(f"/runs/{audit_run.pk}/?tier=base&case=c2").content.decode()
    assert shown(one) == list(range(100, 120)) and "(20 of 120 match)" in one
    none = admin_client.get(f"/runs/{audit_run.pk}/?tier=base&error=http_status")
    assert "No sample matches this filter." in none.content.decode()


def test_the_filter_and_page_survive_the_live_refresh(admin_client, audit_run):
    type(audit_run).objects.filter(pk=audit_run.pk).update(status="running")
    html = admin_client.get(f"/runs/{audit_run.pk}/?tier=fast&page=2").content.decode()
    assert f'hx-get="/runs/{audit_run.pk}/?tier=fast&amp;page=2"' in html
