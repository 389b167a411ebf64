"""The JSON every chart builder hands the browser is the JSON main's builders gave (parsed, so
key order is free): building figures as plain dicts instead of plotly objects must not change
one value the browser draws.

The golden file ``data/chart_golden.json`` was written by commit 9f56979 (main, before the
figures were built as dicts) from ``data/chart_inputs.json`` (pair00 of the 10 M-sample scale
database, plus the blocks ``chart_golden`` adds), then regenerated on purpose twice: a one-panel
speed bands figure keeps its x-axis title (it had none); the speed-up axis labels its log ticks
in full (plotly's "D2" printed 20 and 50 as "2" and "5"). When a chart changes on purpose,
regenerate it with the changed code and review the diff:
``python -m tests.monitor.web.chart_golden golden`` (any DATABASE_URL; nothing is read from it).
"""

from __future__ import annotations

import json
from datetime import datetime

import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from monitor.web.speed_charts import _panels
from tests.monitor.web.chart_golden import GOLDEN, INPUTS, build

EXPECTED = json.loads(GOLDEN.read_text())


def _is_time(value: object) -> bool:
    try:
        datetime.fromisoformat(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


@pytest.fixture(scope="module")
def built() -> dict:
    return build(json.loads(INPUTS.read_text()))


def test_every_page_builds_the_same_charts(built):
    assert {page: sorted(charts) for page, charts in built.items()} == {
        page: sorted(charts) for page, charts in EXPECTED.items()
    }


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
    layout = make_subplots(
        rows=rows, cols=1, shared_xaxes=True, subplot_titles=titles, vertical_spacing=0.35 / rows
    ).layout.to_plotly_json()
    axes, notes = _panels(titles)
    assert {k: v for k, v in layout.items() if k != "template"} == {**axes, "annotations": notes}


@pytest.mark.parametrize("page,chart", [(p, c) for p, cs in EXPECTED.items() for c in cs])
def test_a_chart_says_what_its_axes_measure(built, page, chart):
    """Some x axis and some y axis of every figure has a title (units are in the titles),
    except an axis of labels (no numbers or times on it: names, or a box plot's trace names)."""
    fig = built[page][chart]["figure"]
    layout = fig["layout"]
    for axis in ("xaxis", "yaxis"):
        values = [v for trace in fig["data"] for v in (trace.get(axis[0]) or [])]
        if not any(isinstance(v, int | float) or _is_time(v) for v in values):
            continue
        titles = [
            v.get("title", {}).get("text")
            for k, v in layout.items()
            if k.startswith(axis) and isinstance(v, dict)
        ]
        assert any(titles), (axis, titles)


@pytest.mark.parametrize("page,chart", [(p, c) for p, cs in EXPECTED.items() for c in cs])
def test_a_log_axis_labels_its_ticks_in_full(built, page, chart):
    """Plotly's own log ticks label 20 and 50 as "2" and "5" above "10"; ours are listed."""
    for key, axis in built[page][chart]["figure"]["layout"].items():
        if isinstance(axis, dict) and axis.get("type") == "log":
            assert axis.get("tickvals") and "dtick" not in axis, key


def test_a_verdict_history_of_one_audit_spans_hours_not_a_second():
    """Around one audit plotly's own range is a second wide and its time ticks read in
    milliseconds (seen on the demo's first verdict page); a longer history keeps plotly's."""
    from monitor.web.verdict_charts import history_figure, time_range

    one = [
        {"at": "2026-12-02T07:34:37.439+00:00", "statistic": 0.004, "detectable_80": 0.0064,
         "label": "no_detectable_difference", "run_id": 5, "sentence": "p = 0.062"}
    ]  # fmt: skip
    shown = history_figure(one, None, [])["layout"]["xaxis"]["range"]
    assert shown == ["2026-12-02T06:34:37.439000+00:00", "2026-12-02T08:34:37.439000+00:00"]
    week = ["2026-11-25T07:00:00+00:00", "2026-12-02T07:00:00+00:00"]
    assert time_range(week) is None and time_range([]) is None
