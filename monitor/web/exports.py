"""CSV and JSON downloads of the run page (its samples), the pair page (its runs with their
summary figures) and the speed page (the per-scenario speed-up table).

Responses stream: a run of many thousand samples is written row by row as the database hands
the rows over, never held whole in memory. Columns come from ``monitor.reporting.exports``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, StreamingHttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from monitor import selectors
from monitor.judging.speed import default_runs, speed_report
from monitor.models import Run
from monitor.reporting import exports
from monitor.web.access import VIEW_RUN, VIEW_SAMPLE, requires

FORMATS = {"csv": "text/csv; charset=utf-8", "json": "application/json"}


class _Line:
    """csv.writer's file: hands each written line back instead of storing it."""

    def write(self, line: str) -> str:
        return line


def _cell(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else exports.safe_cell(value)


def csv_lines(columns: Sequence[str], records: Iterable[dict[str, Any]]) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield writer.writerow(columns)
    for record in records:
        yield writer.writerow([_cell(record[c]) for c in columns])


def json_chunks(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    """A JSON array, one element at a time."""
    yield "["
    for i, record in enumerate(records):
        yield ("," if i else "") + "\n" + json.dumps(record, cls=DjangoJSONEncoder)
    yield "\n]\n"


def download(
    fmt: str, filename: str, columns: Sequence[str], records: Iterable[dict[str, Any]]
) -> StreamingHttpResponse:
    if fmt not in FORMATS:
        raise Http404(f"no export format {fmt!r}; use csv or json")
    body = csv_lines(columns, records) if fmt == "csv" else json_chunks(records)
    response = StreamingHttpResponse(body, content_type=FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    return response


@requires(VIEW_SAMPLE)
@require_GET
def run_samples(request: HttpRequest, run_id: int, fmt: str) -> StreamingHttpResponse:
    """The run's samples: timings, tokens, error class, provenance; texts with ``?text=1``."""
    run = get_object_or_404(Run.objects.select_related("pair"), pk=run_id)
    with_text = request.GET.get("text") == "1"
    return download(
        fmt,
        f"tierwatch-run-{run.pk}-samples",
        exports.sample_columns(with_text),
        exports.sample_records(run, with_text),
    )


@requires(VIEW_RUN)
@require_GET
def pair_runs(request: HttpRequest, name: str, fmt: str) -> StreamingHttpResponse:
    pair = selectors.get_pair_for_user(request.user, name)
    return download(
        fmt, f"tierwatch-{pair.name}-runs", exports.RUN_COLUMNS, exports.run_records(pair)
    )


@requires(VIEW_RUN)
@require_GET
def speedups(request: HttpRequest, name: str, fmt: str) -> StreamingHttpResponse:
    pair = selectors.get_pair_for_user(request.user, name)
    report = speed_report(pair=pair, runs=default_runs(pair))
    return download(
        fmt,
        f"tierwatch-{pair.name}-speedups",
        exports.SPEEDUP_COLUMNS,
        exports.speedup_records(report),
    )
