"""An agent task's environment in the real sandbox: BFCL's own classes, and hostile ones."""

from __future__ import annotations

import pytest

from evals.agent.environment import Environment, EnvironmentFailure, EnvLimits
from evals.benchmarks import bfcl_multi_turn as mt
from evals.records import storable
from evals.sandbox import isolation

pytestmark = pytest.mark.skipif(isolation() == "none", reason="no sandbox on this machine")
# the weaker fallback too: there the BFCL modules must be imported before the uid is dropped
MODES = ["bwrap", "unsafe-subprocess"] if isolation() == "bwrap" else ["unsafe-subprocess"]

HOSTILE = b"""
import os, socket


class Hostile:
    def _load_scenario(self, scenario, long_context=False):
        self.count = scenario.get("count", 0)

    def bump(self):
        self.count += 1
        return {"count": self.count}

    def huge(self):
        return "x" * 5_000_000

    def spin(self):
        while True:
            pass

    def hoard(self):
        return [0] * 10**9

    def noisy(self):
        print("this is not a reply line")
        return "quiet"

    def odd(self):
        return "bad \\udcff and \\x00 nul"

    def secret(self):
        return os.environ.get("AGENT_TEST_SECRET", "absent")

    def connect(self, port):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return "connected"

    def spawn(self):
        return str(os.fork())
"""


def hostile(limits: EnvLimits | None = None) -> Environment:
    return Environment(
        ["Hostile"],
        {"Hostile": {"count": 1}},
        limits=limits or EnvLimits(call_s=2.0),
        classes={"Hostile": "hostile"},
        sources={"hostile.py": HOSTILE},
    )


@pytest.mark.usefixtures("benchmark_wheels")
@pytest.mark.parametrize("mode", MODES)
def test_it_runs_bfcl_calls_with_bfcl_results_and_compares_state(mode):
    task = mt.load_task("multi_turn_base_0")
    with Environment(task.involved_classes, task.initial_config, mode=mode) as env:
        assert env.call("cd", [], {"folder": "document"}) == (
            '{"current_working_directory": "document"}'
        )
        assert env.call("ls", [], {}) == (
            '{"current_directory_content": ["final_report.pdf", "previous_report.pdf"]}'
        )
        # BFCL evaluates an unknown name and a refused one: its own error texts
        assert env.call("rm_rf", [], {}) == "Error during execution: name 'rm_rf' is not defined"
        assert env.call("kill", [], {}) == (
            "Error during execution: Function call kill is not allowed."
        )
        assert env.call("cd", [], {"nope": 1}).startswith("Error during execution: ")
        env.call("mkdir", [], {"dir_name": "temp"})
        assert env.compare("model", "truth")[0] is False
        env.call("cd", [], {"folder": "document"}, on="truth")
        env.call("mkdir", [], {"dir_name": "temp"}, on="truth")
        assert env.compare("model", "truth") == (True, {})
        state = env.state()
        assert state["TwitterAPI"]["username"] == "analyst_pro"
        assert "temp" in str(state["GorillaFileSystem"])


def test_its_state_lives_across_calls_and_prints_do_not_break_replies():
    with hostile() as env:
        assert env.call("bump", [], {}) == '{"count": 2}'
        assert env.call("noisy", [], {}) == "quiet"
        assert env.call("bump", [], {}) == '{"count": 3}'
        assert env.state() == {"Hostile": {"count": 3}}


def test_it_sees_no_secret_of_the_worker(monkeypatch):
    monkeypatch.setenv("AGENT_TEST_SECRET", "sk-should-never-reach-the-sandbox")
    with hostile() as env:
        assert env.call("secret", [], {}) == "absent"


def test_a_text_that_cannot_be_stored_comes_back_and_is_made_storable():
    with hostile() as env:
        text = env.call("odd", [], {})
    assert storable(text) == "bad \ufffd and \ufffd nul"


@pytest.mark.parametrize(
    ("method", "kind"),
    [("huge", "result_too_large"), ("spin", "timeout"), ("hoard", "memory")],
)
def test_a_hostile_call_is_bounded_and_named(method, kind):
    env = hostile()
    env.start()
    with pytest.raises(EnvironmentFailure) as failure:
        env.call(method, [], {})
    assert failure.value.kind == kind
    with pytest.raises(EnvironmentFailure) as again:  # a failed environment stays failed
        env.call("bump", [], {})
    assert again.value.kind == "closed"


def test_it_has_no_network_and_cannot_fork():
    if isolation() != "bwrap":
        pytest.skip("network isolation needs bubblewrap")
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    try:
        with hostile() as env:
            reply = env.call("connect", [], {"port": server.getsockname()[1]})
            assert reply.startswith("Error during execution: ")
            assert env.call("spawn", [], {}).startswith("Error during execution: ")
    finally:
        server.close()
