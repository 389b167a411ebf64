"""Real engines: llama.cpp's llama-server with real small models (evals.vendors.llamacpp).

The ``engine`` tests need the cached llama.cpp build in ``$TIERWATCH_CACHE``; without it they
skip, unless TIERWATCH_ENGINE_TESTS=1 asks to build it (6-18 minutes on 2 cores, once).
"""

from __future__ import annotations

import asyncio
import io
import os
import platform
import re
import signal
import socket
import statistics
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from evals.client import make_client, stream_chat
from evals.records import ChatRequest, TimingRecord
from evals.similarity import indel_ratio
from evals.vendors.llamacpp import EngineError, build, models, server, vendor
from tests.support import engine

TESTED = ["smollm2-f16", "smollm2-q4", "smollm2-f16-spec", "smollm2-f16-cached", "gemma-270m"]
PROMPTS = ["Write a haiku about the sea.", "Explain what a hash table is in three sentences."]


@pytest.fixture(scope="module")
def urls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A private local vendor (own state file, so a developer's running vendor is untouched)."""
    state = tmp_path_factory.mktemp("vendor") / "vendor.json"
    try:
        yield vendor.up(TESTED, state=state, log=lambda _: None)
    finally:
        vendor.down(state=state)


def chat(urls: dict[str, str], name: str, content: str, max_tokens: int = 64) -> TimingRecord:
    async def go() -> TimingRecord:
        async with make_client() as client:
            request = ChatRequest(
                messages=[{"role": "user", "content": content}],
                max_tokens=max_tokens,
                temperature=0.0,
            )
            return await stream_chat(client, vendor.endpoint_spec(name, urls[name]), request)

    rec = asyncio.run(go())
    assert rec.ok, f"{name}: {rec.error_class}: {rec.error_message}"
    return rec


def long_prompt(nonce: str) -> str:
    """About 1,500 SmolLM2 tokens; the nonce first makes the whole prefix unique (cold)."""
    facts = " ".join(f"Fact {i}: item {i} weighs {i * 7 % 13} kg." for i in range(100))
    return f"Session {nonce}. Read the facts. {facts} Question: how much does item 3 weigh?"


@engine
def test_prepared_files_have_the_recorded_sha256() -> None:
    for name, path in models.prepare_models(binaries=build.build_binaries()).items():
        assert models.sha256_file(path) == models.expected_sha256(name), name
        assert path.parent.name == models.expected_sha256(name)  # keyed by its hash


@engine
def test_it_serves_identical_text_twice_at_temperature_0(urls: dict[str, str]) -> None:
    assert server.health(urls["smollm2-f16"])
    first, second = (chat(urls, "smollm2-f16", PROMPTS[0]) for _ in range(2))
    assert first.text and first.text == second.text
    assert first.model_id == "smollm2-f16"


@engine
def test_timing_records_agree_with_the_servers_own_timings(urls: dict[str, str]) -> None:
    rec = chat(urls, "smollm2-f16", PROMPTS[1])
    timings = rec.server_timings
    assert timings is not None
    assert rec.completion_tokens == timings["predicted_n"]
    # The first token exists only after the prompt is processed; what TTFT adds on top of the
    # server's prefill is queueing, sampling and the loopback hop: well under a second.
    assert timings["prompt_ms"] <= rec.ttft_ms < timings["prompt_ms"] + 1000
    assert rec.e2e_ms >= rec.ttft_ms and rec.tpot_ms is not None


@engine
def test_a_repeated_long_prefix_is_served_from_the_cache(urls: dict[str, str]) -> None:
    prompt = long_prompt(uuid.uuid4().hex)
    cold, warm = (chat(urls, "smollm2-f16-cached", prompt, max_tokens=8) for _ in range(2))
    assert 1200 <= cold.prompt_tokens <= 1800
    assert not cold.cached_tokens
    assert warm.cached_tokens >= cold.prompt_tokens - 10
    assert warm.ttft_ms < cold.ttft_ms / 5, (cold.ttft_ms, warm.ttft_ms)
    # Not asserted: warm.text == cold.text. Re-processing only the prompt's tail is a different
    # batch split, so for some prompts the temperature-0 text changes (seen: 1 run in 4).
    assert warm.text.strip()


@engine
def test_the_base_tier_does_not_cache_prefixes(urls: dict[str, str]) -> None:
    prompt = f"Session {uuid.uuid4().hex}. " + PROMPTS[0]
    chat(urls, "smollm2-f16", prompt, max_tokens=4)
    again = chat(urls, "smollm2-f16", prompt, max_tokens=4)
    assert again.cached_tokens == 0 and again.server_timings["cache_n"] == 0


@engine
def test_the_q4_tier_decodes_faster_than_f16(urls: dict[str, str]) -> None:
    speed: dict[str, list[float]] = {"smollm2-f16": [], "smollm2-q4": []}
    for _ in range(3):  # interleaved, so a busy moment of the machine hits both
        for name in speed:
            rec = chat(urls, name, PROMPTS[1], max_tokens=48)
            speed[name].append(1000 / rec.tpot_ms)
    q4, f16 = (statistics.median(speed[n]) for n in ("smollm2-q4", "smollm2-f16"))
    assert q4 > f16, speed


@engine
def test_speculative_decoding_keeps_the_base_tiers_text(urls: dict[str, str]) -> None:
    for prompt in PROMPTS:
        assert chat(urls, "smollm2-f16-spec", prompt).text == chat(urls, "smollm2-f16", prompt).text


@engine
def test_a_different_model_is_told_apart_from_the_base(urls: dict[str, str]) -> None:
    for prompt in PROMPTS:
        base, repeat = (chat(urls, "smollm2-f16", prompt, max_tokens=32) for _ in range(2))
        other = chat(urls, "gemma-270m", prompt, max_tokens=32)
        assert indel_ratio(base.text, repeat.text) == 1.0
        assert other.text.strip()
        assert indel_ratio(base.text, other.text) < 0.6, (base.text, other.text)


@engine
def test_status_reports_a_killed_server(tmp_path: Path) -> None:
    state = tmp_path / "vendor.json"
    try:
        vendor.up(["smollm2-q4"], state=state, log=lambda _: None)
        running = vendor.status(state=state)["smollm2-q4"]
        assert running.state == "running"
        os.kill(running.pid, signal.SIGKILL)
        for _ in range(50):  # the kernel needs a moment to deliver it
            if not server.alive(running.pid):
                break
            time.sleep(0.1)
        dead = vendor.status(state=state)["smollm2-q4"]
        assert dead.state == "dead"
        assert str(running.pid) in dead.detail and dead.log in dead.detail
        assert vendor.status(state=state)["smollm2-f16"].state == "stopped"
    finally:
        stopped = vendor.down(state=state)
    assert stopped == []  # nothing alive was left to stop
    assert vendor.status(state=state)["smollm2-q4"].state == "stopped"


@engine
def test_down_stops_servers_by_pid(tmp_path: Path) -> None:
    state = tmp_path / "vendor.json"
    url = vendor.up(["smollm2-q4"], state=state, log=lambda _: None)["smollm2-q4"]
    pid = vendor.status(state=state)["smollm2-q4"].pid
    assert vendor.up(["smollm2-q4"], state=state, log=lambda _: None)["smollm2-q4"] == url
    assert vendor.down(state=state) == ["smollm2-q4"]
    assert not server.alive(pid)
    with pytest.raises(httpx.ConnectError):
        httpx.get(url.removesuffix("/v1") + "/health", timeout=2)


@engine
def test_a_server_that_cannot_load_its_model_is_reported_with_its_log(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    spec = server.ServerSpec("broken", bad, server.free_port(), "broken")
    with pytest.raises(server.ServerDiedError) as err:
        server.start(build.build_binaries().server, spec, log=tmp_path / "broken.log")
    assert "broken.log" in str(err.value) and "exited with code" in str(err.value)
    assert "gguf" in str(err.value).lower()  # the server's own explanation is quoted


def test_it_handles_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        spec = server.ServerSpec("x", tmp_path / "m.gguf", port, "x")
        with pytest.raises(server.PortInUseError, match=f"127.0.0.1:{port} is already in use"):
            server.start(Path("/nonexistent/llama-server"), spec, log=tmp_path / "x.log")
    assert not (tmp_path / "x.log").exists()  # nothing was spawned


def test_it_names_missing_build_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: no cmake, no compiler
    with pytest.raises(EngineError, match="cmake and a C.. compiler not found. Fix: apt-get"):
        build._tools()


# The flags line of the Intel Xeon whose native build died with SIGILL (AMX), shortened.
INTEL_AMX = (
    "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu sse sse2 ssse3 fma "
    "sse4_1 sse4_2 avx f16c bmi1 avx2 bmi2 avx512f avx512bw avx512_fp16 amx_tile "
    "amx_int8 amx_bf16\nprocessor\t: 1\nflags\t\t: fpu\n"
)
OLD_X86 = "flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 avx\n"  # Sandy Bridge: AVX, no AVX2
ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes crc32 asimddp\n"


def test_the_build_flags_follow_cpuinfo_with_amx_and_avx512_off() -> None:
    name, flags = build.arch_flags("x86_64", build.cpu_features(INTEL_AMX))
    assert name == "sse4_2.avx.avx2.fma.f16c.bmi2"
    assert flags[0] == "-DGGML_NATIVE=OFF"
    for opt in ("SSE42", "AVX", "AVX2", "FMA", "F16C", "BMI2"):
        assert f"-DGGML_{opt}=ON" in flags
    for opt in ("AVX512", "AVX512_VNNI", "AMX_TILE", "AMX_INT8", "AMX_BF16"):
        assert f"-DGGML_{opt}=OFF" in flags
    name, flags = build.arch_flags("x86_64", build.cpu_features(OLD_X86))
    assert name == "sse4_2.avx"
    assert "-DGGML_AVX=ON" in flags and "-DGGML_AVX2=OFF" in flags and "-DGGML_FMA=OFF" in flags


def test_the_baseline_build_has_no_optional_instruction_set() -> None:
    name, flags = build.arch_flags("x86_64", build.cpu_features(INTEL_AMX), baseline=True)
    assert name == "baseline"
    assert not [f for f in flags if f.endswith("=ON")]
    assert build.arch_flags("aarch64", build.cpu_features(ARM)) == (
        "baseline",
        ("-DGGML_NATIVE=OFF",),
    )


def test_the_cache_key_holds_the_cpu_features_and_the_build_flags() -> None:
    intel = build.cache_key("0.3.36", "x86_64", build.cpu_features(INTEL_AMX))
    old = build.cache_key("0.3.36", "x86_64", build.cpu_features(OLD_X86))
    assert intel.startswith("0.3.36-x86_64-sse4_2.avx.avx2.fma.f16c.bmi2-")
    assert old.startswith("0.3.36-x86_64-sse4_2.avx-") and old != intel
    assert build.cache_key(
        "0.3.36", "x86_64", build.cpu_features(INTEL_AMX), baseline=True
    ) not in (intel, old)
    # AMX or AVX-512 present or not: the same portable build, so the same key.
    without_amx = INTEL_AMX.replace(" amx_tile amx_int8 amx_bf16", "")
    assert build.cache_key("0.3.36", "x86_64", build.cpu_features(without_amx)) == intel
    assert build.binaries_dir().name == build.cache_key(
        build.LLAMA_CPP_PYTHON, platform.machine(), build.cpu_features()
    )


def test_the_smoke_test_reports_a_server_killed_by_sigill(tmp_path: Path) -> None:
    """A real process dying of SIGILL (what an AMX kernel did on the Xeon) is recognised."""
    server = tmp_path / "llama-server"
    server.write_text("#!/bin/sh\nkill -ILL $$\n")
    server.chmod(0o755)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    assert build.smoke_test(server, model, tmp_path / "smoke.log", timeout_s=20) == "SIGILL"
    server.write_text("#!/bin/sh\nexit 3\n")
    assert build.smoke_test(server, model, tmp_path / "smoke.log", timeout_s=20) == (
        "server exited with code 3"
    )


def test_it_rejects_unknown_targets() -> None:
    with pytest.raises(EngineError, match="unknown target 'nope'; known: smollm2-f16"):
        vendor.up(["nope"])


@engine
@pytest.mark.django_db
def test_the_local_vendor_command_registers_endpoints_and_pairs(tmp_path: Path) -> None:
    from django.core.management import call_command

    from monitor.models import Endpoint, Pair

    state = ["--state", str(tmp_path / "vendor.json")]
    out = io.StringIO()
    try:
        for _ in range(2):  # idempotent: the second run keeps the servers and the rows
            call_command(
                "local_vendor", "up", "--targets", "smollm2-f16", "smollm2-q4", *state, stdout=out
            )
        urls = {n: s.url for n, s in vendor.status(state=tmp_path / "vendor.json").items()}
        assert Endpoint.objects.get(name="smollm2-q4").base_url == urls["smollm2-q4"]
        assert Endpoint.objects.filter(name__startswith="smollm2-").count() == 2
        pair = Pair.objects.get(name="smollm2-q4-vs-f16")
        assert (pair.fast.name, pair.base.name, pair.active) == ("smollm2-q4", "smollm2-f16", True)
        assert list(Pair.objects.values_list("name", flat=True)) == ["smollm2-q4-vs-f16"]
        call_command("local_vendor", "status", *state, stdout=out)
        line = r"smollm2-q4 +running +http://127.0.0.1:\d+/v1 +registered"
        assert re.search(line, out.getvalue())
    finally:
        call_command("local_vendor", "down", *state, stdout=out)
    assert "stopped: smollm2-f16, smollm2-q4; 1 local pair(s) deactivated" in out.getvalue()
    assert not Pair.objects.get(name="smollm2-q4-vs-f16").active
