"""The pair page's charts draw what they say: P95 over a trailing window of runs merged from
the rollup sketches, with its n (a probe of 20 requests per tier never has P95's 59 alone);
and its runs reach back past the newest 50 through a date range and older pages."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from monitor.derived.rollups import record_run
from monitor.models import Case, Run, Sample
from monitor.web import page_figures
from tests import factories
from tests.monitor.web import pages

pytestmark = pytest.mark.django_db
PER_TIER = 20


def probe(pair, minutes_ago: int, ttfts: list[float]) -> Run:
    """A finished probe whose samples are stored and rolled up as the product does."""
    run = pages.make_run(pair, minutes_ago=minutes_ago, summary=pages.summary(n=PER_TIER))
    case = Case.objects.filter(suite=pair.suite).first() or Case.objects.create(
        suite=pair.suite, key="hello", messages=[]
    )
    for tier, endpoint, scale in (("fast", pair.fast, 1.0), ("base", pair.base, 3.0)):
        for i, ttft in enumerate(ttfts):
            Sample.objects.create(
                run=run,
                case=case,
                endpoint=endpoint,
                tier=tier,
                repetition=i,
                started_at=run.created_at,
                ok=True,
                ttft_ms=ttft * scale,
                e2e_ms=ttft * scale * 4,
            )
    record_run(run=Run.objects.get(pk=run.pk))
    return run


def ttft_chart(pair) -> dict:
    (chart,) = [c for c in page_figures.pair_page(pair) if c.id == "chart-ttft"]
    return json.loads(chart.json)


def test_p95_pools_runs_until_it_has_its_n_and_says_so(db):
    pair = factories.pair()
    rng = np.random.default_rng(7)
    values = [list(rng.uniform(100, 900, PER_TIER).round(1)) for _ in range(4)]
    for k, v in enumerate(values):
        probe(pair, minutes_ago=60 - 10 * k, ttfts=v)
    fig = ttft_chart(pair)
    (p95,) = [t for t in fig["data"] if t["name"] == "fast P95"]
    # runs 1 and 2 hold 20 and 40 values: no P95; run 3 pools 3 runs (60), run 4 too
    assert p95["y"][:2] == [None, None]
    assert [c for c in p95["customdata"][2:]] == [[60, 3], [60, 3]]
    pooled = np.percentile(np.concatenate(values[1:4]), 95)
    assert p95["y"][3] == pytest.approx(pooled, rel=0.011)  # the sketch's 1 % and rounding
    subtitle = fig["layout"]["title"]["text"]
    assert "dotted P95 over 3 runs (n = 60; needs 59)" in subtitle


def test_without_enough_values_the_chart_promises_no_p95(db):
    pair = factories.pair()
    probe(pair, minutes_ago=30, ttfts=[float(100 + i) for i in range(PER_TIER)])
    fig = ttft_chart(pair)
    assert sorted(t["name"] for t in fig["data"]) == ["base P50", "fast P50"]
    assert "no P95: needs n ≥ 59 in 12 runs" in fig["layout"]["title"]["text"]
    assert "dotted P95" not in fig["layout"]["title"]["text"]


def test_the_runs_page_back_to_older_runs_and_a_date_range(admin_client):
    pair = factories.pair()
    now = timezone.now()
    runs = [pages.make_run(pair, minutes_ago=60 * 24 * (k // 20) + k) for k in range(60)]
    html = admin_client.get(f"/pairs/{pair.name}/").content.decode()
    shown = set(map(int, re.findall(r'href="/runs/(\d+)/">#', html)))
    assert len(shown) == 50 and 'id="older-runs"' in html
    page2 = admin_client.get(f"/pairs/{pair.name}/?page=2").content.decode()
    older = set(map(int, re.findall(r'href="/runs/(\d+)/">#', page2)))
    assert older == {r.pk for r in runs} - shown and len(older) == 10
    assert 'id="older-runs"' not in page2 and 'id="newer-runs"' in page2
    # runs 20..39 were created a day ago: the range of that day shows exactly them
    day = (now - timedelta(days=1)).date().isoformat()
    ranged = admin_client.get(f"/pairs/{pair.name}/?since={day}&until={day}").content.decode()
    in_range = set(map(int, re.findall(r'href="/runs/(\d+)/">#', ranged)))
    expected = {r.pk for r in runs if r.created_at.date().isoformat() == day}
    assert in_range == expected and in_range
    assert f'value="{day}"' in ranged


def test_a_bad_date_says_what_and_where(admin_client):
    pair = factories.pair()
    html = admin_client.get(f"/pairs/{pair.name}/?since=yesterday&page=x").content.decode()
    assert "since: &#x27;yesterday&#x27; is not a date (YYYY-MM-DD)" in html
    assert "page: &#x27;x&#x27; is not a page number" in html
