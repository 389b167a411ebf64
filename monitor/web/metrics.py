"""The metrics page (what each measure means) and docs/benchmarks.md as linkable sections."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from monitor.web.access import VIEW_RUN, requires


@requires(VIEW_RUN)
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    return render(request, "monitor/metrics.html", {"min_n": settings.TIERWATCH_MIN_N})


@requires(VIEW_RUN)
@require_GET
def benchmarks_doc(request: HttpRequest) -> HttpResponse:
    """docs/benchmarks.md as sections of plain text, so the metrics page can link its figures."""
    path = settings.BASE_DIR / "docs" / "benchmarks.md"
    if not path.is_file():
        raise Http404("docs/benchmarks.md has not been written yet")
    sections = markdown_sections(path.read_text(encoding="utf-8"))
    return render(request, "monitor/benchmarks.html", {"sections": sections})


def markdown_sections(text: str) -> list[dict[str, Any]]:
    """Split markdown at its headings: (level, title, anchor slug, body). No markdown library:
    the body is shown as written."""
    sections: list[dict[str, Any]] = [{"level": 1, "title": "", "slug": "", "body": []}]
    for line in text.splitlines():
        heading = re.match(r"^(#{1,4})\s+(.*)$", line)
        if heading:
            title = heading.group(2).strip()
            slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
            level = len(heading.group(1))
            sections.append({"level": level, "title": title, "slug": slug, "body": []})
        else:
            sections[-1]["body"].append(line)
    for s in sections:
        s["body"] = "\n".join(s["body"]).strip("\n")
    return [s for s in sections if s["title"] or s["body"]]
