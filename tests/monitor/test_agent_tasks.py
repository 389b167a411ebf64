"""Multi-turn agent tasks through the product's path, on the simulated vendor: a scheduled probe
of a pair whose suite holds BFCL multi-turn tasks plays an episode per task and tier (both
tiers interleaved in one plan), stores every request as a sample with its turn, step, tool
calls and the environment's answers, hands the run to the sandbox queue's evaluate step, which
scores each episode, and the capability reads, the "Is it worse?" page, the run page and the
episode page show it.

And the bounds, on a model server of this module's own (an OpenAI-style stream on 127.0.0.1
whose every answer is one scripted tool call): a model that calls a tool forever ends its
episode at the turn's step limit, one whose call makes the environment answer past its result
cap ends it as an environment error; both are recorded and the run ends done."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evals.agent.loop import Limits
from evals.benchmarks import bfcl_multi_turn
from evals.vendors.simulated import serve_in_thread
from monitor.judging import capability
from monitor.models import Endpoint, Pair, RunRollup, Sample
from monitor.runs import heartbeat
from monitor.runs.pipeline import evaluate_run, execute_run
from monitor.runs.steps import create_run
from monitor.setup.schedules import ensure_probe_schedule
from monitor.setup.suite_import import save_versioned
from monitor.tasks import probe_pair_task
from tests.support import CANARY, key_decoded_hits

pytestmark = pytest.mark.django_db
CATEGORIES = list(bfcl_multi_turn.CATEGORIES)


def _agent_pair(url: str, fast_model: str) -> Pair:
    cases = bfcl_multi_turn.load_cases(CATEGORIES, limit=1)
    suite, _ = save_versioned(name="agent-mini", cases=cases)
    fast, base = (
        Endpoint.objects.create(
            name=name, base_url=url, model=model, simulated=True, max_concurrency=4
        )
        for name, model in (("agent-fast", fast_model), ("agent-base", "demo-base"))
    )
    return Pair.objects.create(name="agents", fast=fast, base=base, suite=suite, repeat=1)


def test_a_scheduled_probe_plays_scores_and_shows_agent_tasks(admin_client, benchmark_wheels):
    with serve_in_thread(time_scale=0.0) as url:
        pair = _agent_pair(url, "demo-distilled")
        ensure_probe_schedule(pair_name=pair.name, every_s=3600, kind="probe")
        handed: list[int] = []  # the task hands the evaluation to the sandbox queue
        run = execute_run(run_id=probe_pair_task.run(pair.name, "probe"), evaluate=handed.append)
    # after the timed requests, the episodes wait for their score in the sandbox queue's step
    assert run.status == "evaluating" and handed == [run.id], run.error
    waiting = Sample.objects.filter(run=run, tests_detail__has_key="sandbox_pending")
    assert waiting.count() == 2 * len(CATEGORIES)
    run = evaluate_run(run_id=run.id)
    assert run.status == "done", run.error
    assert run.trigger == "scheduled"

    # every request of an episode is a sample placed by turn and step; one episode per tier
    samples = Sample.objects.filter(run=run)
    closing = samples.filter(tests_detail__kind="agent")
    assert closing.count() == 2 * len(CATEGORIES)
    assert samples.count() > closing.count()
    assert not samples.filter(turn__isnull=True).exists()
    assert not samples.filter(tests_detail__has_key="sandbox_pending").exists()
    scored = [s for s in closing if s.tests_passed is not None]
    assert scored, [s.tests_detail.get("stop") for s in closing]
    for s in scored:
        d = s.tests_detail
        assert d["requests"] == samples.filter(case=s.case, tier=s.tier).count()
        assert d["category"].startswith("agent/") and "score" in d
    # the tool calls are stored with what the environment answered
    with_calls = samples.exclude(calls=None)
    assert with_calls.exists()
    call = with_calls.first().calls[0]
    assert call["name"] and "result" in call

    # the capability reads count one outcome per episode, per agent category
    rollup = RunRollup.objects.get(run=run, tier="base")
    agent_cases = {k: c for k, c in rollup.cases.items() if c["c"].startswith("agent/")}
    assert len(agent_cases) == len(CATEGORIES)
    assert all(c.get("n", 0) <= 1 and c.get("r", 0) >= 1 for c in agent_cases.values())
    report = capability.window_report(pair)
    assert {c for c in report.rates if c.startswith("agent/")} == {
        bfcl_multi_turn.CATEGORIES[c] for c in CATEGORIES
    }

    # the pages: "Is it worse?", the run's agent table, an episode replayed
    html = admin_client.get(f"/pairs/{pair.name}/worse/").content.decode()
    # one task per category: fewer paired cases than a test needs, and the advice says so
    assert "undecided on `agent/base`" in html
    assert "Keep multi-step agent work on base for now: too little evidence yet" in html
    assert 'id="agent-cost-table"' in html and "requests per task" in html
    # a task the fast tier loses links to its replay, not to a text diff
    lost = [c for c in report.losing if c.category.startswith("agent/")]
    assert lost, [(r.category, r.diff_points) for r in report.results]
    assert f'href="/runs/{lost[0].run_id}/episodes/{lost[0].key}/"' in html
    spent = report.agent_spent["agent/base"]["base"]
    assert spent[0] == 1 and spent[1] == agent_cases["bfcl/multi_turn_base_0"]["r"]
    # an episode's requests are a speed scenario of their own, not pooled into another one
    assert set(run.summary["by_scenario"]) == {"agent"}
    assert admin_client.get(f"/pairs/{pair.name}/speed/").status_code == 200
    # progress counts requests, an episode at its expected requests until it is played
    assert run.planned >= run.completed == samples.count()
    html = admin_client.get(f"/runs/{run.id}/").content.decode()
    assert 'id="agent-table"' in html and "both tiers, turn by turn" in html
    key = closing.first().case.key
    page = admin_client.get(f"/runs/{run.id}/episodes/{key}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="episode-scores"' in html and "Turn 1" in html and "user:" in html
    turns = closing.first().case.agent["turns"]
    assert f"{turns} of {turns}" in html  # the simulated tiers play every turn
    assert 'id="divergence"' in html and "/metrics/#ttft" in html
    # a request of the episode on its own page: its turn, its calls and their answers
    sample = with_calls.first()
    html = admin_client.get(f"/samples/{sample.id}/").content.decode()
    assert f"turn {sample.turn + 1}, request {sample.step + 1}" in html
    assert "Tool calls and the environment" in html and sample.calls[0]["name"] in html


# what the scripted models call every time: one harmless call forever, or one whose result is
# past the environment's cap (``evals.agent.environment.EnvLimits.result_chars``)
SCRIPTED_CALLS = {
    "looping": ("ls", {}),
    "hostile": ("echo", {"content": "x" * 40_000}),
}


class _ScriptedModel(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["model"] == "echoing":  # the key it was sent, written to a file and read back
            key = self.headers.get("Authorization", "").removeprefix("Bearer ")
            wrote = sum(m.get("role") == "tool" for m in body["messages"]) % 2
            name = "cat" if wrote else "echo"
            arguments = {"file_name": "k.txt"} if wrote else {"content": key, "file_name": "k.txt"}
        else:
            name, arguments = SCRIPTED_CALLS[body["model"]]
        call = {"index": 0, "id": "c0", "type": "function"}
        call["function"] = {"name": name, "arguments": json.dumps(arguments)}
        chunks = [
            {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 5}},
        ]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(f"data: {json.dumps({'model': body['model'], **chunk})}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def scripted_models() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ScriptedModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_a_looping_model_and_a_hostile_result_end_their_episodes_recorded(
    benchmark_wheels, monkeypatch
):
    beats: list[int] = []  # the heartbeat, counted on its way through
    beat = heartbeat.beat
    monkeypatch.setattr(heartbeat, "beat", lambda run: (beats.append(run.id), beat(run))[1])
    with scripted_models() as url:
        cases = bfcl_multi_turn.load_cases(["multi_turn_base"], limit=1)
        suite, _ = save_versioned(name="agent-bounds", cases=cases)
        fast, base = (
            Endpoint.objects.create(name=model, base_url=url, model=model, local=True)
            for model in ("looping", "hostile")
        )
        pair = Pair.objects.create(name="bounds", fast=fast, base=base, suite=suite, repeat=1)
        run = execute_run(run_id=create_run(pair=pair).id)
    assert run.status == "done", run.error

    looped = Sample.objects.get(run=run, tier="fast", tests_detail__kind="agent")
    assert looped.tests_detail["stop"] == "step_limit" and looped.tests_passed is False
    assert looped.tests_detail["error_class"] == "force_terminated"
    # the turn's step limit: 20 requests with calls are answered, the 21st ends the episode
    limit = Limits().steps_per_turn
    assert Sample.objects.filter(run=run, tier="fast").count() == limit + 1 == looped.step + 1

    hostile = Sample.objects.get(run=run, tier="base", tests_detail__kind="agent")
    assert hostile.tests_detail["stop"] == "environment_error"
    assert hostile.tests_passed is None  # the environment failed: says nothing of the model
    assert "result_too_large" in hostile.tests_detail["stop_detail"]
    (call,) = hostile.calls
    assert call["error"] == "environment" and len(call["result"]) < 1000
    # the owner beat at every request of the episodes (and while it waited), never silent
    assert len(beats) >= Sample.objects.filter(run=run).count()
    rollup = RunRollup.objects.get(run=run, tier="fast").cases[cases[0].key]
    assert (rollup["n"], rollup["p"], rollup["r"]) == (1, 0, limit + 1)


def test_a_key_a_model_writes_into_the_environment_is_stored_scrubbed(
    benchmark_wheels, monkeypatch
):
    """A model that writes the API key it was sent into a file and reads it back: the key is
    in its calls' arguments and in the environment's answers; no stored value holds it."""
    monkeypatch.setenv("AGENT_KEY", CANARY)
    with scripted_models() as url:
        cases = bfcl_multi_turn.load_cases(["multi_turn_base"], limit=1)
        suite, _ = save_versioned(name="agent-key", cases=cases)
        fast, base = (
            Endpoint.objects.create(
                name=f"echoing-{tier}",
                base_url=url,
                model="echoing",
                local=True,
                api_key_env="AGENT_KEY",
            )
            for tier in ("fast", "base")
        )
        pair = Pair.objects.create(name="keyed", fast=fast, base=base, suite=suite, repeat=1)
        run = execute_run(run_id=create_run(pair=pair).id)
    assert run.status == "done", run.error
    rows = Sample.objects.filter(run=run)
    assert rows.exclude(calls=None).count() > 2
    for s in rows:
        stored = json.dumps([s.calls, s.tests_detail, s.text], ensure_ascii=False)
        assert not key_decoded_hits(stored), (s.turn, s.step, stored[:300])
