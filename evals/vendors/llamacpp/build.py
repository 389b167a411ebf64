"""Build llama.cpp's ``llama-server`` and ``llama-quantize`` once, cache them per version.

Why from the llama-cpp-python sdist: it vendors a pinned llama.cpp and is reachable through the
package registry, which is the only network this project may assume. Why both targets in one
build: ``llama-quantize`` makes the F16 / Q8_0 / Q4_0 variants of a model without installing
the Python package (which would compile llama.cpp a second time).

The binaries are static (``BUILD_SHARED_LIBS=OFF``) and tuned for this CPU (llama.cpp's default
``GGML_NATIVE``), so the cache key is the pinned version plus the machine architecture; the
cache is per machine, never committed.
"""

from __future__ import annotations

import fcntl
import json
import os
import platform
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from evals.vendors.llamacpp import EngineError, cache_dir, log_tail, pip_download

LLAMA_CPP_PYTHON = "0.3.36"
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
FIX_TOOLS = "apt-get install -y cmake ninja-build g++  (or: pip install cmake ninja)"


@dataclass(frozen=True)
class Binaries:
    """The cached build of one pinned llama.cpp version."""

    version: str  # llama-cpp-python version whose vendored llama.cpp was built
    server: Path
    quantize: Path
    build_seconds: float | None = None  # wall time of the cold build that produced them


def binaries_dir(version: str = LLAMA_CPP_PYTHON) -> Path:
    return cache_dir() / "llama.cpp" / f"{version}-{platform.machine()}"


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
    build_log = root / "build.log"
    steps = [
        [cmake, "-S", str(source), "-B", str(work / "build"), "-G", generator, *CMAKE_FLAGS],
        [cmake, "--build", str(work / "build"), f"-j{jobs}", "--target", *BUILD_TARGETS],
    ]
    log(f"llama.cpp: building {', '.join(BUILD_TARGETS)} (-j{jobs}); log: {build_log}")
    with open(build_log, "w") as out:
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
                    f"{work} for inspection; rerun to retry from scratch."
                )
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in BUILD_TARGETS:
        tmp = bin_dir / f".{name}.tmp"
        shutil.copy2(work / "build" / "bin" / name, tmp)
        tmp.replace(bin_dir / name)
    seconds = round(time.monotonic() - started, 1)
    record = {"version": version, "seconds": seconds, "generator": generator,
              "flags": list(CMAKE_FLAGS), "jobs": jobs, "built_at": time.time(),
              "load_avg_start_end": [load, os.getloadavg()[0]],  # builds on a busy machine
              "llama_cpp": server_version(bin_dir / "llama-server")}
    (root / "build.json").write_text(json.dumps(record, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    log(f"llama.cpp: built in {seconds:.0f} s into {bin_dir}")
    return Binaries(version, bin_dir / "llama-server", bin_dir / "llama-quantize", seconds)


def server_version(server: Path) -> str:
    """What ``llama-server --version`` says (build number and commit when known)."""
    done = subprocess.run([str(server), "--version"], capture_output=True, text=True, timeout=30)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return next((ln for ln in lines if ln.startswith("version")), lines[0] if lines else "")
