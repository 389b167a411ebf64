"""The verdict page and the diff viewer, over runs made against the simulated demo vendor.

One small probe (temperature 0, the smoke suite) and one small audit (5 prompts × 3 samples,
too few for a verdict) per test: enough to draw every figure and to show "inconclusive".
"""

from __future__ import annotations

import json
import re

import pytest
from django.db.models import Sum
from django.urls import reverse
from django.utils.html import escape

from evals.similarity import first_divergence
from monitor.models import Endpoint, Pair, PairMonitorState, Run, Sample
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.setup.suites import sync_builtin_suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair(demo_vendor_url) -> Pair:
    def endpoint(name: str) -> Endpoint:
        return Endpoint.objects.create(
            name=name, base_url=demo_vendor_url, model=name, simulated=True, max_concurrency=8
        )

    sync_builtin_suite(name="audit")
    return Pair.objects.create(
        name="demo-distilled-vs-base",
        fast=endpoint("demo-distilled"),
        base=endpoint("demo-base"),
        suite=sync_builtin_suite(name="smoke"),
        repeat=2,
    )


@pytest.fixture
def runs(pair: Pair) -> tuple[Run, Run]:
    probe = execute_run(run_id=create_run(pair=pair, seed=1).id, cases_limit=3)
    audit = execute_run(
        run_id=create_run(pair=pair, kind="audit", repeat=3, seed=2).id, cases_limit=5
    )
    assert probe.status == audit.status == "done"
    return probe, audit


def test_it_requires_login(client, pair):
    for url in (f"/pairs/{pair.name}/verdict/", "/runs/1/diff/hello/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    response = client.post(f"/pairs/{pair.name}/verdict/audit/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert not Run.objects.exists()


def test_it_shows_the_sentence_the_reason_and_the_figures(admin_client, pair, runs):
    _, audit = runs
    verdict = Run.objects.get(id=audit.id).summary["verdict"]
    html = admin_client.get(f"/pairs/{pair.name}/verdict/").content.decode()
    assert 'class="verdict-sentence">inconclusive (n too small: 5 prompts, need 25' in html
    assert 'class="label inconclusive"' in html and "simulated" in html
    assert "same model" not in verdict["sentence"]
    ids = re.findall(r'data-plotly-figure="([\w-]+)-data"', html)
    ladder = bool(verdict["ladder"])  # context only when measured on this suite and L
    assert ids == ["chart-null"] + ["chart-ladder"] * ladder + [
        "chart-similarity",
        "chart-divergence",
        "chart-history",
    ]
    null = json.loads(re.search(r'id="chart-null-data">(.*?)</script>', html, re.S).group(1))
    assert "MMD² fast vs base against chance" in null["layout"]["title"]["text"]
    assert "n = 15 fast / 15 base samples, 5 prompts" in null["layout"]["title"]["text"]
    assert null["layout"]["xaxis"]["title"]["text"].startswith("MMD² (unitless")
    assert null["layout"]["yaxis"]["title"]["text"] == "permutations (count)"
    names = [t["name"] for t in null["data"]]
    assert "fast vs base (observed)" in names and "caught with 80% power" in names
    assert 'id="baseline"' in html and "collecting the baseline: 1 of 48 probe runs" in html
    assert 'id="events"' in html and "fp_demo_distilled" in html
    assert "expected false alarms: ≤ 0.05 per month at hourly audits" in html
    assert 'src="http' not in html
    assert "cost of this verdict (its audit run): not priced" in html


def test_it_shows_what_the_verdict_cost(admin_client, pair, runs):
    _, audit = runs
    Endpoint.objects.update(price_input_per_mtok=2.0, price_output_per_mtok=8.0)
    tokens = audit.rollups.aggregate(p=Sum("prompt_tokens"), c=Sum("completion_tokens"))
    cost = (2.0 * tokens["p"] + 8.0 * tokens["c"]) / 1e6
    assert cost > 0
    html = admin_client.get(f"/pairs/{pair.name}/verdict/").content.decode()
    assert f"cost of this verdict (its audit run): ${cost:.4f}" in html


def test_it_returns_the_live_part_to_htmx(admin_client, pair, runs):
    response = admin_client.get(f"/pairs/{pair.name}/verdict/", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="verdict-live"') and "<html" not in html


def test_it_says_when_there_is_no_audit_yet(admin_client, pair):
    html = admin_client.get(f"/pairs/{pair.name}/verdict/").content.decode()
    assert "No audit run with a verdict yet" in html and "data-plotly-figure" not in html


def test_it_queues_an_audit_on_the_audit_suite(admin_client, pair):
    response = admin_client.post(f"/pairs/{pair.name}/verdict/audit/")
    assert response.status_code == 302
    run = Run.objects.get(pair=pair)
    assert (run.kind, run.status, run.suite.name, run.temperature) == (
        "audit",
        "queued",
        "audit",
        1.0,
    )


def test_the_diff_marks_the_first_divergence(admin_client, pair, runs):
    probe, _ = runs
    base = Sample.objects.filter(run=probe, tier="base", batch=0, repetition=0).first()
    fast = Sample.objects.get(run=probe, tier="fast", case=base.case, repetition=0)
    pos = first_divergence(base.text, fast.text)
    assert pos is not None  # the distilled model words it differently
    html = admin_client.get(f"/runs/{probe.id}/diff/{base.case.key}/?rep=0").content.decode()
    assert f"character {pos}" in html
    marks = re.findall(
        r'<pre class="text">(.*?)<mark class="diverge[^"]*"[^>]*>(.*?)</mark>', html, re.S
    )
    assert len(marks) >= 2  # base, fast (then the second base draw, if any)

    def mark(text: str) -> str:
        return escape(text[pos : pos + 1]) if pos < len(text) else "[end of text]"

    assert marks[0] == (escape(base.text[:pos]), mark(base.text))
    assert marks[1] == (escape(fast.text[:pos]), mark(fast.text))


def test_the_diff_shows_top_logprobs_at_the_divergence(admin_client, pair, runs):
    probe, _ = runs
    base = Sample.objects.filter(run=probe, tier="base", batch=0, repetition=0).first()
    fast = Sample.objects.get(run=probe, tier="fast", case=base.case, repetition=0)
    pos = first_divergence(base.text, fast.text)

    def tokens(text: str, chosen_alt: str) -> list[dict]:
        head, tail = text[:pos], text[pos:] or " "
        return [
            {"token": head, "logprob": -0.01, "top_logprobs": []},
            {
                "token": tail,
                "logprob": -0.5,
                "top_logprobs": [
                    {"token": tail, "logprob": -0.5},
                    {"token": chosen_alt, "logprob": -0.7},
                ],
            },
        ]

    Sample.objects.filter(id=base.id).update(logprobs=tokens(base.text, fast.text[pos:] or " "))
    Sample.objects.filter(id=fast.id).update(logprobs=tokens(fast.text, base.text[pos:] or " "))
    html = admin_client.get(f"/runs/{probe.id}/diff/{base.case.key}/?rep=0").content.decode()
    assert "Top logprobs at the first divergence" in html
    assert "0.20 nats" in html and "a near tie" in html


def test_the_diff_404s_on_an_unknown_case(admin_client, pair, runs):
    probe, _ = runs
    assert admin_client.get(f"/runs/{probe.id}/diff/no-such-case/").status_code == 404


def test_the_headline_and_the_table_show_the_same_holm_adjusted_p(admin_client, pair, runs):
    _, audit = runs
    verdict = Run.objects.get(id=audit.id).summary["verdict"]
    html = admin_client.get(f"/pairs/{pair.name}/verdict/").content.decode()
    shown = escape(verdict["p_words"]["mmd_fast_vs_base"])
    assert f'id="p-adjusted">{shown}</td>' in html
    assert f"mmd_fast_vs_base {shown}" in html


def test_acknowledging_needs_the_permission_and_restarts_the_evidence(
    client, admin_client, django_user_model, pair, runs
):
    viewer = django_user_model.objects.create_user("viewer", password="pw")
    client.force_login(viewer)
    assert client.post(f"/pairs/{pair.name}/verdict/acknowledge/").status_code == 403
    assert "Acknowledge change" not in client.get(f"/pairs/{pair.name}/verdict/").content.decode()
    state = PairMonitorState.objects.get(pair=pair)
    # the audit was folded: inconclusive only for its n (5 prompts), its failure and empty
    # rates alike on both tiers, so its p is evidence (error_budget.foldable)
    assert state.last_audit_id == runs[1].id and state.since is None
    monitor = Run.objects.get(id=runs[1].id).summary["verdict"]["monitor"]
    assert "skipped" not in monitor and state.eprocess["audits"] == 1
    response = admin_client.post(f"/pairs/{pair.name}/verdict/acknowledge/")
    assert response.status_code == 302
    state.refresh_from_db()
    assert state.eprocess["audits"] == 0 and state.eprocess["detector"] == 1.0
    assert state.since is not None and state.acknowledged_by == "admin" and state.cusum == {}
    html = admin_client.get(f"/pairs/{pair.name}/verdict/").content.decode()
    assert "Last acknowledged" in html and 'id="acknowledge"' in html


def test_a_benchmark_case_key_with_a_slash_links_to_its_diff(admin_client, pair, runs):
    """Issue 31, finding 5: a HumanEval pair's cases are keyed ``humaneval/10``; the verdict
    page reversed a slug route with it and answered 500."""
    probe, _ = runs
    base = Sample.objects.filter(run=probe, tier="base", batch=0, repetition=0).first()
    case = base.case
    case.key = "humaneval/10"
    case.save(update_fields=["key"])
    link = reverse("verdict:diff", args=[probe.id, "humaneval/10"])
    assert link == f"/runs/{probe.id}/diff/humaneval/10/"
    diff = admin_client.get(f"{link}?rep=0")
    assert diff.status_code == 200
    assert "humaneval/10" in diff.content.decode()
