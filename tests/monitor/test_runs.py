"""Runs against the simulated vendor over real HTTP: interleaving, persistence, failures."""

import json

import pytest
from django.core.management import call_command

from monitor.models import Run, Sample
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from tests.factories import free_port, vendor_pair


@pytest.mark.django_db
def test_it_runs_interleaved_paired_probes_and_stores_every_sample(demo_vendor_url):
    pair = vendor_pair(demo_vendor_url)
    run = execute_run(run_id=create_run(pair=pair, seed=7).id, cases_limit=4)
    assert run.status == "done", run.error
    samples = list(run.samples.order_by("seq"))
    assert run.planned == run.completed == len(samples) == 4 * 2 * 2
    tiers = [s.tier for s in samples]
    assert tiers != sorted(tiers), "requests must be interleaved, not grouped by tier"
    assert all(s.ok and s.ttft_ms <= s.e2e_ms for s in samples)
    assert {s.model_id for s in samples if s.tier == "fast"} == {"demo-fast"}
    fast = run.summary["tiers"]["fast"]
    assert fast["n"] == 8 and fast["n_ok"] == 8 and fast["ttft_ms"]["n"] == 8
    assert fast["pass_rate"] is not None and fast["n_tested"] == 8
    # the sandbox's isolation is stored with each coding sample, for the pages
    from evals.sandbox import isolation

    assert {s.tests_detail["isolation"] for s in samples} == {isolation()}
    assert run.summary["similarity"]["fast_vs_base"]["n"] == 8
    assert run.summary["similarity"]["base_vs_base"]["n"] == 4


@pytest.mark.django_db
def test_the_same_seed_gives_the_same_order(demo_vendor_url):
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=1)
    orders = []
    for _ in range(2):
        run = execute_run(run_id=create_run(pair=pair, seed=11).id, cases_limit=3)
        orders.append([(s.case.key, s.tier) for s in run.samples.order_by("seq")])
    assert orders[0] == orders[1]


@pytest.mark.django_db
def test_it_handles_a_down_endpoint_as_failed_samples_and_goes_on(demo_vendor_url):
    pair = vendor_pair(
        demo_vendor_url, fast_url=f"http://127.0.0.1:{free_port()}/v1", suite="smoke", repeat=1
    )
    run = execute_run(run_id=create_run(pair=pair).id, cases_limit=3)
    # every fast request failed: the run is failed and says so, its samples all kept
    assert run.status == "failed" and run.error.startswith("fast tier: vendor unreachable")
    fast = Sample.objects.filter(run=run, tier="fast")
    assert fast.count() == 3 and set(fast.values_list("error_class", flat=True)) == {"connect"}
    assert Sample.objects.filter(run=run, tier="base", ok=True).count() == 3
    assert run.summary["tiers"]["fast"]["errors"] == {"connect": 3}
    assert run.summary["tiers"]["fast"]["ttft_ms"]["p50"] is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    "model,error_class",
    [
        ("demo-broken-html", "http_status"),
        ("demo-garbage", "malformed_stream"),
        ("demo-truncated", "stream_incomplete"),
        ("demo-ratelimit", "rate_limited"),
    ],
)
def test_it_records_each_fault_with_its_class(demo_vendor_url, model, error_class):
    pair = vendor_pair(demo_vendor_url, fast_model=model, suite="smoke", repeat=1)
    run = execute_run(run_id=create_run(pair=pair).id, cases_limit=2)
    # every fast request failed: a failed run that says so in the vendor's words, not a crash
    assert run.status == "failed" and run.error.startswith("fast tier: "), run.error
    classes = set(Sample.objects.filter(run=run, tier="fast").values_list("error_class", flat=True))
    assert classes == {error_class}


@pytest.mark.django_db
def test_a_run_is_executed_once_even_if_delivered_twice(demo_vendor_url):
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=1)
    run = create_run(pair=pair)
    execute_run(run_id=run.id, cases_limit=2)
    again = execute_run(run_id=run.id, cases_limit=2)
    assert again.samples.count() == 4
    assert execute_run(run_id=987654) is None


@pytest.mark.django_db
def test_the_probe_command_prints_json(demo_vendor_url, capsys):
    vendor_pair(demo_vendor_url, suite="smoke", repeat=2)
    call_command("probe", "p", "--cases", "3", "--json")
    out = json.loads(capsys.readouterr().out)
    assert out["pair"] == "p" and out["tiers"]["base"]["n"] == 6
    for tier in ("fast", "base"):
        assert set(out["tiers"][tier]["ttft_ms"]) >= {"n", "p50", "p95"}
    assert Run.objects.get(id=out["run"]).status == "done"


@pytest.mark.django_db
def test_the_probe_command_prints_a_table(demo_vendor_url, capsys):
    vendor_pair(demo_vendor_url, suite="smoke", repeat=2)
    call_command("probe", "p", "--cases", "3")
    out = capsys.readouterr().out
    assert "TTFT P50" in out and "similarity fast_vs_base" in out and "base" in out


@pytest.mark.django_db
def test_similarity_leaves_out_cases_whose_prompt_differs_per_request(demo_vendor_url):
    pair = vendor_pair(demo_vendor_url, suite="scenarios", repeat=2)
    run = execute_run(run_id=create_run(pair=pair, seed=3).id)
    cold = run.samples.filter(case__scenario="long_cold", ok=True)
    assert cold.count() > 0
    n_cases_compared = (
        run.samples.exclude(case__scenario="long_cold").values("case").distinct().count()
    )
    assert run.summary["similarity"]["base_vs_base"]["n"] == n_cases_compared


@pytest.mark.django_db
def test_stacked_constraint_cases_are_checked_and_count_in_the_pass_rate(demo_vendor_url):
    pair = vendor_pair(demo_vendor_url, suite="long_tail", repeat=1)
    run = execute_run(run_id=create_run(pair=pair, seed=5).id, cases_limit=3)
    details = [s.tests_detail for s in run.samples.all() if s.tests_passed is not None]
    assert len(details) == 6 and all(d["kind"] == "constraints" for d in details)
    assert all(d["n_tests"] >= 1 and 0 <= d["n_failed"] <= d["n_tests"] for d in details)
    assert run.summary["tiers"]["fast"]["n_tested"] == 3


@pytest.mark.django_db
def test_a_run_asking_more_streams_than_a_worker_times_faithfully_fails_saying_so(
    demo_vendor_url, settings
):
    settings.TIERWATCH_MAX_STREAMS = 100
    pair = vendor_pair(demo_vendor_url, suite="smoke", repeat=1)
    pair.fast.max_concurrency = pair.base.max_concurrency = 60
    pair.fast.save()
    pair.base.save()
    run = execute_run(run_id=create_run(pair=pair).id, cases_limit=2)
    assert run.status == "failed" and run.samples.count() == 0
    assert run.error.startswith(
        "TooManyStreams: 120 concurrent streams asked (max_concurrency: fast 60 + base 60)"
    )
