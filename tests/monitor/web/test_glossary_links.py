"""Every technical word a page shows links to its definition on the metrics page: the test
walks the rendered pages of a pair measured through the product's path (a probe and an audit
against the simulated demo vendor), finds each glossary word in the visible text, and checks
that the page links it and that the link's anchor exists on /metrics/."""

from __future__ import annotations

import re

import pytest

from monitor.models import Pair
from monitor.templatetags.people import GLOSSARY
from tests.factories import measured_pair

pytestmark = pytest.mark.django_db

# a word as it appears in visible text → its anchor on the metrics page
WORDS = {
    r"\bMMD": "mmd",
    r"\be-detector\b": "e-detector",
    r"\be-value\b": "e-value",
    r"\bHolm\b": "holm",
    r"\bMcNemar\b": "mcnemar",
    r"\bWilson\b": "wilson",
    r"\bTTFT\b": "ttft",
    r"\bE2E\b": "e2e",
    r"\bTPOT\b": "tpot",
    r"\b[Gg]oodput\b": "goodput",
    r"\b[Dd]rift\b": "drift",
    r"\b\d+% power\b": "power",
    r"\b[Rr]outing advice\b": "routing",
}
TERM_LINK = re.compile(r'<a class="term" href="/metrics/#([\w-]+)"')


def visible(html: str) -> str:
    body = html.split("<main", 1)[-1]
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", body, flags=re.S)
    body = re.sub(r'title="[^"]*"', " ", body)  # tooltips are not what a reader sees first
    return re.sub(r"<[^>]+>", " ", body)


@pytest.fixture
def measured(demo_vendor_url) -> Pair:
    return measured_pair(demo_vendor_url, suite="coding", probe_cases=8, slo_ttft_ms=30000)


def test_every_glossary_anchor_is_defined_on_the_metrics_page(admin_client):
    metrics = admin_client.get("/metrics/").content.decode()
    missing = [a for a in GLOSSARY if f'id="{a}"' not in metrics]
    assert missing == []


def test_each_page_links_every_technical_word_it_shows(admin_client, measured):
    metrics = admin_client.get("/metrics/").content.decode()
    name = measured.name
    pages = ["/", f"/pairs/{name}/", f"/pairs/{name}/speed/", f"/pairs/{name}/verdict/"]
    pages.append(f"/pairs/{name}/worse/")
    pages += [f"/runs/{run.pk}/" for run in measured.runs.order_by("pk")]  # a probe, an audit
    seen_words = set()
    problems = []
    for url in pages:
        html = admin_client.get(url).content.decode()
        text, linked = visible(html), set(TERM_LINK.findall(html))
        for anchor in linked:
            if f'id="{anchor}"' not in metrics:
                problems.append(f"{url}: links #{anchor}, which /metrics/ does not define")
        for pattern, anchor in WORDS.items():
            if re.search(pattern, text):
                seen_words.add(anchor)
                if anchor not in linked:
                    problems.append(f"{url}: shows {pattern!r} without a link to #{anchor}")
    assert problems == []
    # the walk saw the words it is about (else it proves nothing)
    assert {"mmd", "e-detector", "holm", "ttft", "e2e", "goodput", "drift"} <= seen_words
