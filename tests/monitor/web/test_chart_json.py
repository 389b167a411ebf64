"""The JSON every chart builder hands the browser is the JSON main's builders gave (parsed, so
key order is free): building figures as plain dicts instead of plotly objects must not change
one value the browser draws.

The golden file ``data/chart_golden.json`` was written by commit 9f56979 (main, before the
figures were built as dicts) from ``data/chart_inputs.json`` (pair00 of the 10 M-sample scale
database, plus the blocks ``chart_golden`` adds). When a chart changes on purpose, regenerate it
with the changed code and review the diff:
``python -m tests.monitor.web.chart_golden golden`` (any DATABASE_URL; nothing is read from it).
"""

from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from monitor.web.speed_charts import _panels
from tests.monitor.web.chart_golden import GOLDEN, INPUTS, build

EXPECTED = json.loads(GOLDEN.read_text())


@pytest.fixture(scope="module")
def built() -> dict:
    return build(json.loads(INPUTS.read_text()))


def test_every_page_builds_the_same_charts(built):
    assert {page: sorted(charts) for page, charts in built.items()} == \
        {page: sorted(charts) for page, charts in EXPECTED.items()}


@pytest.mark.parametrize("page,chart", [(p, c) for p, cs in EXPECTED.items() for c in cs])
def test_a_chart_is_the_same_json(built, page, chart):
    assert built[page][chart] == EXPECTED[page][chart]


@pytest.mark.parametrize("page,chart", [(p, c) for p, cs in EXPECTED.items() for c in cs])
def test_a_chart_is_a_valid_plotly_figure(built, page, chart):
    """The builders skip plotly's validation; a misspelt property would reach plotly.js, which
    ignores it. Validating here keeps that check once the golden file is regenerated."""
    go.Figure(built[page][chart]["figure"])  # raises ValueError on an invalid property


@pytest.mark.parametrize("rows", range(1, 7))
def test_the_panels_are_laid_out_as_make_subplots_does(rows):
    """The golden figures have two panels; the speed page draws one per scenario."""
    titles = [f"scenario {i}" for i in range(rows)]
    layout = make_subplots(rows=rows, cols=1, shared_xaxes=True, subplot_titles=titles,
                           vertical_spacing=0.35 / rows).layout.to_plotly_json()
    axes, notes = _panels(titles)
    assert {k: v for k, v in layout.items() if k != "template"} == {**axes, "annotations": notes}
