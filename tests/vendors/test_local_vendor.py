"""The local llama.cpp vendor in the database (monitor.setup.local_vendor) and the demo's
second profile, ``demo --engine llama.cpp``.

The ``engine`` tests run real llama-server processes (skipped without the cached build, see
tests/vendors/test_engines.py); the others check arguments and rows and start nothing (the demo
checks its arguments before it migrates, installs its signal handler or starts a process).
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_celery_beat.models import PeriodicTask

from evals.vendors.llamacpp import cache_dir, server, vendor
from monitor.models import Endpoint, Pair, Sample
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.setup.local_vendor import deactivate, ensure_local_demo, register
from tests.factories import free_port
from tests.support import ROOT, engine


def test_the_demo_rejects_an_unknown_engine() -> None:
    with pytest.raises(
        CommandError,
        match=re.escape("argument --engine: invalid choice: 'vllm' (choose from 'llama.cpp')"),
    ):
        call_command("demo", "--engine", "vllm")


def test_the_demo_rejects_targets_without_a_pair_before_starting_anything() -> None:
    out = io.StringIO()
    with pytest.raises(CommandError, match="--targets gemma-270m make no pair: include smollm2"):
        call_command("demo", "--engine", "llama.cpp", "--targets", "gemma-270m", stdout=out)
    assert out.getvalue() == ""  # nothing was migrated, built or started


def test_the_demo_rejects_engine_options_without_an_engine() -> None:
    with pytest.raises(CommandError, match="--targets and --suite go with --engine llama.cpp"):
        call_command("demo", "--suite", "scenarios")


@pytest.mark.django_db
def test_the_local_demo_schedules_its_pairs_and_switches_the_simulated_ones_off() -> None:
    from monitor.setup.demo import DEMO_USER, ensure_demo

    ensure_demo(vendor_url="http://127.0.0.1:9/v1")  # rows only: nothing is contacted
    urls = {
        name: f"http://127.0.0.1:{9 + i}/v1"
        for i, name in enumerate(["smollm2-f16", "smollm2-q4", "smollm2-f16-cached"])
    }
    for _ in range(2):  # idempotent
        pairs = ensure_local_demo(
            urls=urls, ctx=4096, suite_name="smoke", probe_every_s=300, audit_every_s=3600
        )
    assert sorted(p.name for p in pairs) == ["smollm2-cached-vs-f16", "smollm2-q4-vs-f16"]
    tasks = PeriodicTask.objects.filter(name__endswith="-vs-f16")
    assert sorted((t.name, t.interval.every) for t in tasks) == [
        ("audit:smollm2-cached-vs-f16", 3600),
        ("audit:smollm2-q4-vs-f16", 3600),
        ("probe:smollm2-cached-vs-f16", 300),
        ("probe:smollm2-q4-vs-f16", 300),
        ("tripwire:smollm2-cached-vs-f16", 3600),
        ("tripwire:smollm2-q4-vs-f16", 3600),
    ]
    assert not Pair.objects.filter(name__startswith="demo-", active=True).exists()
    assert Pair.objects.filter(name__endswith="-vs-f16", active=True).count() == 2
    from django.contrib.auth import get_user_model

    assert get_user_model().objects.filter(username=DEMO_USER).count() == 1
    assert deactivate(targets=["smollm2-q4"]) == 1
    assert list(Pair.objects.filter(active=True).values_list("name", flat=True)) == [
        "smollm2-cached-vs-f16"
    ]


@engine
@pytest.mark.django_db
def test_it_registers_running_targets_idempotently_and_they_can_be_probed(tmp_path: Path) -> None:
    state = tmp_path / "vendor.json"  # a private vendor: a developer's running one is untouched
    try:
        urls = vendor.up(
            ["smollm2-f16", "smollm2-q4", "gemma-270m"], state=state, log=lambda _: None
        )
        first = register(urls=urls, ctx=4096, suite_name="smoke")
        rows = (
            sorted(Endpoint.objects.values_list("id", flat=True)),
            sorted(Pair.objects.values_list("id", flat=True)),
        )
        again = register(urls=urls, ctx=4096, suite_name="smoke")
        assert [p.id for p in again] == [p.id for p in first]
        assert (
            sorted(Endpoint.objects.values_list("id", flat=True)),
            sorted(Pair.objects.values_list("id", flat=True)),
        ) == rows
        assert sorted(p.name for p in again) == ["gemma-vs-smollm2-f16", "smollm2-q4-vs-f16"]
        for name, url in urls.items():
            ep = Endpoint.objects.get(name=name)
            assert (ep.base_url, ep.model, ep.simulated, ep.context_window) == (
                url,
                name,
                False,
                4096,
            )
        vendor.down(["smollm2-q4"], state=state)  # a restart: new port, same rows
        moved = vendor.up(["smollm2-q4"], state=state, log=lambda _: None)
        register(urls={**urls, **moved}, ctx=4096, suite_name="smoke")
        assert Endpoint.objects.get(name="smollm2-q4").base_url == moved["smollm2-q4"]
        assert Endpoint.objects.count() == 3
        run = execute_run(
            run_id=create_run(pair=Pair.objects.get(name="smollm2-q4-vs-f16"), repeat=1).id,
            cases_limit=2,
        )
        assert run.status == "done", run.error
        samples = Sample.objects.filter(run=run)
        assert samples.count() == 4 and samples.filter(ok=True, text__gt="").exists()
    finally:
        vendor.down(state=state)


def private_cache(tmp_path: Path) -> Path:
    """A cache root sharing the built binaries and models but with its own ``run/`` state, so
    the demo under test never sees (or stops) servers of a developer's running vendor."""
    root = tmp_path / "cache"
    root.mkdir()
    for part in ("llama.cpp", "models", "downloads"):
        (cache_dir() / part).mkdir(exist_ok=True)
        (root / part).symlink_to(cache_dir() / part)
    return root


@engine
def test_the_engine_demo_stops_the_servers_it_started_on_sigterm(tmp_path: Path) -> None:
    cache = private_cache(tmp_path)
    env = {
        **os.environ,
        "DATABASE_URL": "",
        "REDIS_URL": "",
        "TIERWATCH_CACHE": str(cache),
        "TIERWATCH_VAR_DIR": str(tmp_path / "var"),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "demo",
            "--engine",
            "llama.cpp",
            "--targets",
            "smollm2-f16",
            "smollm2-q4",
            "--port",
            str(free_port()),
            "--every",
            "3600",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 1500  # a first build, when TIERWATCH_ENGINE_TESTS=1
        while time.monotonic() < deadline and not any("is running" in x for x in lines):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        output = "".join(lines)
        assert "REAL llama.cpp servers: smollm2-f16, smollm2-q4) is running" in output, output
        pids = {n: r["pid"] for n, r in json.loads((cache / "run/vendor.json").read_text()).items()}
        assert sorted(pids) == ["smollm2-f16", "smollm2-q4"]
        assert all(server.alive(pid) for pid in pids.values())
        for name, pid in pids.items():
            assert re.search(rf"{name}: http://127.0.0.1:\d+/v1 \(pid {pid}", output)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
    assert "stopped llama-server: smollm2-f16, smollm2-q4" in rest
    assert not any(server.alive(pid) for pid in pids.values())
    assert json.loads((cache / "run/vendor.json").read_text()) == {}
