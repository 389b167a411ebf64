"""Build llama.cpp's ``llama-server`` and ``llama-quantize`` once, cache them per version.

Why from the llama-cpp-python sdist: it vendors a pinned llama.cpp and is reachable through the
package registry, which is the only network this project may assume. Why both targets in one
build: ``llama-quantize`` makes the F16 / Q8_0 / Q4_0 variants of a model without installing
the Python package (which would compile llama.cpp a second time).

The binaries are static (``BUILD_SHARED_LIBS=OFF``) and portable: ``GGML_NATIVE=OFF`` plus an
explicit instruction set, never llama.cpp's default ``-march=native``. Why: a native build on an
Intel Xeon that reports AMX compiled AMX kernels (``tilezero``) that a virtual machine without
AMX state enabled kills with SIGILL on every quantized model; AVX-512 is off for the same reason
(a CPU can report it while the hypervisor or kernel does not enable its state, and its gain on
these tiny models is small). On x86-64 each of SSE4.2, AVX, AVX2, FMA, F16C and BMI2 is switched
on only when ``/proc/cpuinfo`` lists it; on arm64 the compiler's baseline (armv8-a, NEON) is used.
The selected features and every build flag are in the cache key, so a cache made on one CPU is
never reused on another that lacks a feature. Right after a build a quantized model is served
once (the smoke test); a build whose server dies with SIGILL is rebuilt with no optional
instruction set at all (:data:`BASELINE`). The cache is per machine, never committed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

from evals.vendors.llamacpp import (
    LLAMA_CPP_PYTHON,
    Binaries,
    EngineError,
    cache_dir,
    log_tail,
    models,
    pip_download,
)

__all__ = ["LLAMA_CPP_PYTHON", "Binaries", "build_binaries", "cached_binaries"]
# sha256 of the sdist on PyPI, per pinned version (pip checks it with --require-hashes).
SDIST_SHA256 = {"0.3.36": "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"}
BUILD_TARGETS = ("llama-server", "llama-quantize")
# Without LLAMA_USE_PREBUILT_UI=OFF the configure step tries to download a web UI; without
# LLAMA_OPENSSL=OFF it needs OpenSSL headers. Tests and examples are not needed.
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
)
# x86-64 instruction sets switched on when /proc/cpuinfo lists them: (cpuinfo flag, ggml option).
X86_FEATURES = (
    ("sse4_2", "GGML_SSE42"),
    ("avx", "GGML_AVX"),
    ("avx2", "GGML_AVX2"),
    ("fma", "GGML_FMA"),
    ("f16c", "GGML_F16C"),
    ("bmi2", "GGML_BMI2"),
)
# Always off: a CPU may list them while its hypervisor does not enable their state (see above).
X86_ALWAYS_OFF = (
    "GGML_AVX_VNNI",
    "GGML_AVX512",
    "GGML_AVX512_VBMI",
    "GGML_AVX512_VNNI",
    "GGML_AVX512_BF16",
    "GGML_AMX_TILE",
    "GGML_AMX_INT8",
    "GGML_AMX_BF16",
)
BASELINE = "baseline"  # the feature-set name of the most conservative build
SMOKE_MODEL = "smollm2-q4_1"  # the smallest quantized model prepared (no build needed for it)
FIX_TOOLS = "apt-get install -y cmake ninja-build g++  (or: pip install cmake ninja)"


def cpu_features(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU's feature flags: the first ``flags`` (x86) or ``Features`` (arm) line of cpuinfo."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def arch_flags(
    machine: str, features: frozenset[str], *, baseline: bool = False
) -> tuple[str, tuple[str, ...]]:
    """(feature-set name, cmake flags) for this CPU; ``baseline`` asks for no optional ISA.

    Every x86 option is given explicitly: with ``GGML_NATIVE=OFF`` ggml's own defaults switch
    AVX2 and friends on whatever the CPU has.
    """
    flags = ["-DGGML_NATIVE=OFF"]
    if machine not in ("x86_64", "AMD64"):
        return BASELINE, tuple(flags)  # arm64 and others: the compiler's baseline target
    chosen = [] if baseline else [f for f, _ in X86_FEATURES if f in features]
    flags += [f"-D{opt}={'ON' if f in chosen else 'OFF'}" for f, opt in X86_FEATURES]
    flags += [f"-D{opt}=OFF" for opt in X86_ALWAYS_OFF]
    return ".".join(chosen) or BASELINE, tuple(flags)


def cache_key(
    version: str, machine: str, features: frozenset[str], *, baseline: bool = False
) -> str:
    """``<version>-<machine>-<features>-<hash of all build flags>``: one directory per build."""
    name, flags = arch_flags(machine, features, baseline=baseline)
    digest = hashlib.sha256("\n".join((*CMAKE_FLAGS, *flags)).encode()).hexdigest()[:10]
    return f"{version}-{machine}-{name}-{digest}"


def binaries_dir(version: str = LLAMA_CPP_PYTHON) -> Path:
    """Where this CPU's build of ``version`` lives (see :func:`cache_key`)."""
    return cache_dir() / "llama.cpp" / cache_key(version, platform.machine(), cpu_features())


def cached_binaries(version: str = LLAMA_CPP_PYTHON) -> Binaries | None:
    """The cached build when it is complete (both binaries and its build record), else None."""
    root = binaries_dir(version)
    server, quantize = root / "bin" / "llama-server", root / "bin" / "llama-quantize"
    record = root / "build.json"
    if not (server.is_file() and quantize.is_file() and record.is_file()):
        return None
    seconds = json.loads(record.read_text()).get("seconds")
    return Binaries(version=version, server=server, quantize=quantize, build_seconds=seconds)


def build_binaries(
    version: str = LLAMA_CPP_PYTHON, *, jobs: int = 2, log: Callable[[str], None] = print
) -> Binaries:
    """Return the cached build, building it first when absent (about 5 min on 2 cores).

    A file lock makes concurrent callers (two test sessions, a CI job and a developer) wait
    for one build instead of running two.
    """
    found = cached_binaries(version)
    if found:
        return found
    if version not in SDIST_SHA256:
        raise EngineError(f"llama-cpp-python {version} is not pinned; known: {list(SDIST_SHA256)}")
    root = binaries_dir(version)
    root.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = cached_binaries(version)  # another process may have finished it meanwhile
        return found or _build(version, root, jobs, log)


def _tools() -> tuple[str, str]:
    """The cmake executable and generator; a clear error naming what is missing."""
    cmake = shutil.which("cmake")
    compiler = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not cmake or not compiler:
        found = (("cmake", cmake), ("a C++ compiler", compiler))
        missing = " and ".join(name for name, path in found if not path)
        raise EngineError(f"cannot build llama.cpp: {missing} not found. Fix: {FIX_TOOLS}")
    if shutil.which("ninja"):
        return cmake, "Ninja"
    if shutil.which("make"):
        return cmake, "Unix Makefiles"
    raise EngineError(f"cannot build llama.cpp: neither ninja nor make found. Fix: {FIX_TOOLS}")


def _build(version: str, root: Path, jobs: int, log: Callable[[str], None]) -> Binaries:
    """Build, smoke-test, and on SIGILL rebuild with :data:`BASELINE`; cache only what served."""
    cmake, generator = _tools()
    started, load = time.monotonic(), os.getloadavg()[0]
    downloads = cache_dir() / "downloads"
    log(f"llama.cpp: downloading llama-cpp-python=={version} sdist through pip")
    pip_download([(f"llama-cpp-python=={version}", SDIST_SHA256[version])], downloads, sdist=True)
    sdist = downloads / f"llama_cpp_python-{version}.tar.gz"
    work = cache_dir() / "work" / root.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    source = work / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
    features = cpu_features()
    smoke_model = models.prepare_model(SMOKE_MODEL)  # extracted from its wheel: no build needed
    attempts: list[dict[str, object]] = []
    (root / "build.log").write_text("")  # each attempt appends its steps
    for baseline in (False, True):
        name, flags = arch_flags(platform.machine(), features, baseline=baseline)
        build_dir = work / f"build-{name}"
        log(
            f"llama.cpp: building {', '.join(BUILD_TARGETS)} (-j{jobs}, features {name}); "
            f"log: {root / 'build.log'}"
        )
        _compile(cmake, generator, source, build_dir, (*CMAKE_FLAGS, *flags), jobs, root)
        smoke = smoke_test(build_dir / "bin" / "llama-server", smoke_model, root / "smoke.log")
        attempts.append({"features": name, "flags": list(flags), "smoke": smoke})
        if smoke == "ok":
            break
        if smoke != "SIGILL" or baseline:
            raise EngineError(
                f"llama.cpp ({name}) built but its server failed the smoke test: {smoke}\n"
                f"--- last lines of {root / 'smoke.log'} ---\n{log_tail(root / 'smoke.log')}\n"
                "Fix: read the log above; the cache is left empty, so a rerun builds again."
            )
        log(
            f"llama.cpp: the {name} build died with SIGILL on {SMOKE_MODEL}; rebuilding with "
            "no optional instruction set"
        )
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    for target in BUILD_TARGETS:
        tmp = bin_dir / f".{target}.tmp"
        shutil.copy2(build_dir / "bin" / target, tmp)
        tmp.replace(bin_dir / target)
    seconds = round(time.monotonic() - started, 1)
    record = {
        "version": version,
        "seconds": seconds,
        "generator": generator,
        "flags": [*CMAKE_FLAGS, *flags],
        "features": name,
        "attempts": attempts,
        "cpu_flags": sorted(features),
        "jobs": jobs,
        "built_at": time.time(),
        "load_avg_start_end": [load, os.getloadavg()[0]],  # builds on a busy machine
        "llama_cpp": server_version(bin_dir / "llama-server"),
    }
    (root / "build.json").write_text(json.dumps(record, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    log(f"llama.cpp: built ({name}) and smoke-tested in {seconds:.0f} s into {bin_dir}")
    return Binaries(version, bin_dir / "llama-server", bin_dir / "llama-quantize", seconds)


def _compile(
    cmake: str,
    generator: str,
    source: Path,
    build_dir: Path,
    flags: tuple[str, ...],
    jobs: int,
    root: Path,
) -> None:
    build_log = root / "build.log"
    steps = [
        [cmake, "-S", str(source), "-B", str(build_dir), "-G", generator, *flags],
        [cmake, "--build", str(build_dir), f"-j{jobs}", "--target", *BUILD_TARGETS],
    ]
    with open(build_log, "a") as out:
        for cmd in steps:
            out.write(f"$ {' '.join(cmd)}\n")
            out.flush()
            try:
                done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=3600)
                code: int | str = done.returncode
            except subprocess.TimeoutExpired:
                code = "timeout (1 h)"
            if code != 0:
                raise EngineError(
                    f"llama.cpp build failed ({code}) at: {' '.join(cmd[:3])} ...\n"
                    f"--- last lines of {build_log} ---\n{log_tail(build_log)}\n---\n"
                    f"Fix: make sure the build tools work ({FIX_TOOLS}); the source stays in "
                    f"{build_dir.parent} for inspection; rerun to retry from scratch."
                )


def smoke_test(server: Path, model: Path, log: Path, timeout_s: float = 180.0) -> str:
    """Serve ``model`` (a quantized one) and generate a few tokens: "ok", "SIGILL" or what
    went wrong.

    Why a quantized model: the faulting instructions sit in the quantized matrix kernels (AMX,
    AVX-512), which a ``--version`` run never reaches.
    """
    import httpx

    from evals.vendors.llamacpp import server as llamacpp

    spec = llamacpp.ServerSpec("smoke", model, llamacpp.free_port(), "smoke", ctx=512)
    with open(log, "w") as out:
        proc = subprocess.Popen(
            llamacpp.command(server, spec),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    url = f"http://{llamacpp.HOST}:{spec.port}"
    deadline = time.monotonic() + timeout_s
    verdict = f"not healthy after {timeout_s:.0f} s"
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if llamacpp.health(url + "/v1"):
                body = {"prompt": "The sea is", "n_predict": 8, "temperature": 0}
                try:
                    reply = httpx.post(url + "/completion", json=body, timeout=timeout_s)
                    verdict = "ok" if reply.status_code == 200 else f"HTTP {reply.status_code}"
                except httpx.HTTPError as exc:
                    verdict = f"request failed: {exc}"
                break
            time.sleep(0.2)
        time.sleep(0.2)
    finally:
        code = proc.poll()
        if code is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if code is not None and code in (-signal.SIGILL, 128 + signal.SIGILL):
        return "SIGILL"
    if code is not None:
        return f"server exited with code {code}"
    return verdict


def server_version(server: Path) -> str:
    """What ``llama-server --version`` says (build number and commit when known)."""
    done = subprocess.run([str(server), "--version"], capture_output=True, text=True, timeout=30)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return next((ln for ln in lines if ln.startswith("version")), lines[0] if lines else "")
