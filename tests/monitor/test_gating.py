"""Gating on the tier served, through the product's path: the simulated vendor downgrades a
share of the fast tier's streams (it reports ``service_tier: "default"`` for them), a probe and
an audit run record it, and the speed-ups, the overview's window and the verdict leave those
samples out (unless the pair includes them) while the pages count and show them. A small
vendor that never reports a tier makes the pages say so."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evals.served import NEVER_CONFIRMED
from evals.vendors.simulated import serve_in_thread
from monitor.judging import speed_window
from monitor.judging.speed import speed_report
from monitor.models import Pair, Run
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.setup.suites import sync_builtin_suite
from tests.factories import vendor_pair

pytestmark = pytest.mark.django_db


def slots(run: Run) -> dict[tuple[int, int], dict[str, str]]:
    """(case, repetition) → {tier: served tier} of the run's batch-0 successes."""
    out: dict[tuple[int, int], dict[str, str]] = {}
    for s in run.samples.filter(batch=0, ok=True):
        out.setdefault((s.case_id, s.repetition), {})[s.tier] = s.served_tier
    return out


def test_a_probe_run_leaves_downgraded_samples_out_of_the_speedups_and_shows_them(admin_client):
    with serve_in_thread(time_scale=0.02, seed=5, downgrade_share=0.4, downgrade_above=-1) as url:
        pair = vendor_pair(url, suite="smoke", repeat=3, fast_fields={"expected_tier": "priority"})
        run = execute_run(run_id=create_run(pair=pair, seed=3).id)
    assert run.status == "done", run.error
    fast = run.samples.filter(tier="fast")
    down = fast.filter(served_tier="default").count()
    assert 0 < down < fast.count()  # the vendor downgraded a share, not all
    assert fast.exclude(served_tier__in=("default", "priority")).count() == 0

    report = speed_report(pair=pair)
    gating = report["gating"]
    assert gating["left_out"] == down and not gating["include_downgraded"]
    assert gating["tiers"]["fast"]["downgraded"] == down
    assert gating["tiers"]["fast"]["confirmed"] == fast.count() - down
    both = [v for v in slots(run).values() if {"fast", "base"} <= set(v)]
    served_pairs = [v for v in both if v["fast"] == "priority"]
    assert sum(report["n_pairs"].values()) == len(served_pairs) < len(both)

    window = speed_window.window_speedups({pair.pk: speed_window.PairClaim(pair.claim, False)})
    assert window[pair.pk].left_out == down
    assert sum(s.n for s in window[pair.pk].scenarios) == len(served_pairs)
    words = speed_window.words(window[pair.pk], None)
    assert words["note"] == f"{down} downgraded sample{'s' * (down != 1)} left out"

    html = admin_client.get(f"/pairs/{pair.name}/speed/").content.decode()
    assert f"{down} downgraded sample{'s' * (down != 1)} left out" in html
    hours = html.split('id="downgrade-hours"')[1].split("</table>")[0]
    n_ok = fast.filter(ok=True).count()
    assert f"{100 * down / n_ok:.1f}% (n={n_ok})" in hours
    page = admin_client.get(f"/pairs/{pair.name}/").content.decode()
    served = page.split('id="pair-served"')[1].split("</dd>")[0]
    assert f"{fast.count() - down} confirmed, {down} downgraded, 0 not reported" in served
    assert "left out of" in served

    Pair.objects.filter(pk=pair.pk).update(include_downgraded=True)
    pair.refresh_from_db()
    included = speed_report(pair=pair)
    assert included["gating"]["left_out"] == 0
    assert sum(included["n_pairs"].values()) == len(both)


def test_an_audit_verdict_leaves_the_downgraded_answers_out():
    with serve_in_thread(time_scale=0.0, seed=5, downgrade_share=0.3, downgrade_above=-1) as url:
        pair = vendor_pair(url, suite="smoke", repeat=1, fast_fields={"expected_tier": "priority"})
        sync_builtin_suite(name="audit")
        run = create_run(pair=pair, kind="audit", repeat=5, seed=3)
        run = execute_run(run_id=run.id, cases_limit=25)
    assert run.status == "done", run.error
    down = run.samples.filter(tier="fast", served_tier="default").count()
    answered = run.samples.filter(tier="fast", batch=0, ok=True)
    assert 0 < down < answered.count()
    verdict = run.summary["verdict"]
    assert verdict["gating"]["left_out"] == down
    assert verdict["gating"]["tiers"]["fast"]["downgraded"] == down
    # the test's fast sample holds only the answers served on the fast tier
    assert verdict["n_per_tier"][0] <= answered.exclude(served_tier="default").count()


class SilentTierVendor(BaseHTTPRequestHandler):
    """Answers every request and never says which tier served it."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for delta in ("Pooling keeps", " connections open", " for reuse."):
            chunk = {"model": "m", "choices": [{"index": 0, "delta": {"content": delta}}]}
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        done = {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self.wfile.write(b"data: " + json.dumps(done).encode() + b"\n\ndata: [DONE]\n\n")
        self.close_connection = True

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def silent_vendor():
    server = ThreadingHTTPServer(("127.0.0.1", 0), SilentTierVendor)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


def test_a_tier_never_confirmed_is_named_on_the_pair_and_speed_pages(silent_vendor, admin_client):
    pair = vendor_pair(
        silent_vendor, suite="smoke", repeat=1, fast_fields={"expected_tier": "priority"}
    )
    run = execute_run(run_id=create_run(pair=pair, seed=3).id, cases_limit=3)
    assert run.status == "done", run.error
    assert set(run.samples.values_list("served_tier", flat=True)) == {""}
    report = speed_report(pair=pair)
    assert report["gating"]["never_confirmed"] and report["gating"]["note"] == NEVER_CONFIRMED
    assert report["gating"]["left_out"] == 0  # unconfirmed samples are kept
    sentence = NEVER_CONFIRMED[0].upper() + NEVER_CONFIRMED[1:]
    for url in (f"/pairs/{pair.name}/", f"/pairs/{pair.name}/speed/"):
        html = admin_client.get(url).content.decode()
        assert sentence in html.split('id="never-confirmed"')[1].split("</p>")[0], url


def test_capability_rollups_count_only_the_samples_served_on_the_tier():
    """A run's rollup keeps every request in n and availability, but its capability figures
    (tested, passed, per-case outcomes, read by "is the fast tier worse?") only the samples
    served on the tier bought, unless the pair includes downgraded ones."""
    from monitor.derived.rollups import record_run
    from monitor.models import Case
    from tests import factories

    pair = factories.pair()
    pair.fast.expected_tier = "priority"
    pair.fast.save()
    case = Case.objects.create(suite=pair.suite, key="c1", category="coding/x", messages=[])
    run = factories.run(pair)
    factories.sample(run, case, "fast", seq=0, tests_passed=True, served_tier="priority")
    factories.sample(run, case, "fast", seq=1, tests_passed=False, served_tier="default")
    factories.sample(run, case, "fast", seq=2, tests_passed=False, served_tier="")

    (fast,) = [r for r in record_run(run=run) if r.tier == "fast"]
    assert (fast.n, fast.n_ok) == (3, 3)  # every request counts in availability
    assert (fast.n_tested, fast.n_passed) == (2, 1)  # the downgraded failure is left out
    assert fast.served == {"": 1, "default": 1, "priority": 1}
    Pair.objects.filter(pk=pair.pk).update(include_downgraded=True)
    run.refresh_from_db()
    (fast,) = [r for r in record_run(run=run) if r.tier == "fast"]
    assert (fast.n_tested, fast.n_passed) == (3, 1)


def test_the_run_summary_s_pass_rate_and_similarity_leave_downgraded_answers_out():
    """The summary the run page and the SLA report read: a downgraded fast sample's failure is
    not the fast tier's, and its answer is not compared with the base tier's; availability
    still counts it."""
    from monitor.models import Case
    from monitor.runs.steps import summarise_run
    from tests import factories

    pair = factories.pair()
    pair.fast.expected_tier = "priority"
    pair.fast.save()
    case = Case.objects.create(suite=pair.suite, key="c1", category="coding/x", messages=[])
    run = factories.run(pair)
    factories.sample(
        run,
        case,
        "fast",
        seq=0,
        repetition=0,
        tests_passed=True,
        served_tier="priority",
        text="same answer",
    )
    factories.sample(
        run,
        case,
        "fast",
        seq=1,
        repetition=1,
        tests_passed=False,
        served_tier="default",
        text="another model's words entirely",
    )
    factories.sample(run, case, "base", seq=2, repetition=0, tests_passed=True, text="same answer")
    factories.sample(run, case, "base", seq=3, repetition=1, tests_passed=True, text="same answer")

    summary = summarise_run(run_id=run.id)
    fast = summary.tiers["fast"]
    assert (fast.n, fast.n_tested, fast.pass_rate) == (2, 1, 1.0)
    assert summary.similarity["fast_vs_base"].n == 1
    assert summary.similarity["fast_vs_base"].mean_ratio == 1.0

    Pair.objects.filter(pk=pair.pk).update(include_downgraded=True)
    summary = summarise_run(run_id=run.id)
    assert (summary.tiers["fast"].n_tested, summary.tiers["fast"].pass_rate) == (2, 0.5)
    assert summary.similarity["fast_vs_base"].n == 2
