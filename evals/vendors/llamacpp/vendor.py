"""The local vendor: real llama.cpp servers whose tiers differ the way real fast tiers differ.

Each target is one ``llama-server`` process on 127.0.0.1 with an OpenAI-compatible ``/v1``.
The fast tiers are made faster by the serving tricks tierwatch looks for, so each pair has a known
answer to "same model?":

- ``smollm2-f16``: the base tier, SmolLM2-135M-Instruct in F16, prompt cache off.
- ``smollm2-q8`` / ``smollm2-q4``: the same weights quantized to Q8_0 / Q4_0 (fewer bytes per
  token read): same model, different numerics, so temperature-0 texts diverge after a while.
- ``smollm2-f16-spec``: the F16 weights with n-gram speculative decoding (``ngram-mod``): the
  drafts are verified by the same model, so the outputs are the base tier's; it is faster only
  on text that repeats earlier text. (A Q4_0 draft model, ``draft-simple``, was slower than
  plain F16 on 2 CPU cores: see docs/benchmarks.md.)
- ``smollm2-f16-cached``: the F16 weights with the prompt (prefix) cache on: a repeated long
  prefix skips its prefill, so TTFT drops; decode is unchanged.
- ``gemma-270m``: Gemma 3 270M (a base model, another tokenizer): a genuinely different model.
  It has no chat template, so a plain "Question: / Answer:" template (below) makes chat
  completions sensible; ChatML made it echo the markup.

Caching is a server setting, not a request field: every target but ``-cached`` runs with
``--no-cache-prompt`` (llama-server's default is on), so any client sees the same behaviour and
``EndpointSpec.extra_body`` stays empty. ``--cache-ram 0`` (no host prompt cache) everywhere but
``-cached``, which gets 256 MiB.

Servers outlive the process that started them (``up`` from a command, ``down`` from another):
their pids, ports and logs are kept in a state file, and ``down`` stops them by pid.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evals.records import EndpointSpec
from evals.vendors.llamacpp import EngineError, cache_dir, log_tail
from evals.vendors.llamacpp.build import build_binaries
from evals.vendors.llamacpp.models import prepare_model
from evals.vendors.llamacpp.server import ServerSpec, alive, free_port, health, start, stop

QA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{{ 'Answer' if m['role'] == 'assistant' else 'Question' }}: {{ m['content'] }}\n\n"
    "{% endfor %}{% if add_generation_prompt %}Answer:{% endif %}"
)


@dataclass(frozen=True)
class Target:
    name: str
    model: str  # key in evals.vendors.llamacpp.models
    role: str  # base | fast | different
    mechanism: str  # what makes it differ from the base tier, for people and the database
    args: tuple[str, ...] = ("--no-cache-prompt",)
    qa_template: bool = False  # serve chat through QA_TEMPLATE (base models without one)
    cache_ram_mib: int = 0
    extra_body: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PairSpec:
    name: str
    base: str
    fast: str
    same_model: bool  # the known answer the verdict should find
    mechanism: str


TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target("smollm2-f16", "smollm2-f16", "base", "base tier: F16 weights, prompt cache off"),
        Target("smollm2-q8", "smollm2-q8_0", "fast", "quantization: same weights in Q8_0"),
        Target("smollm2-q4", "smollm2-q4_0", "fast", "quantization: same weights in Q4_0"),
        Target(
            "smollm2-f16-spec",
            "smollm2-f16",
            "fast",
            "speculative decoding (n-gram drafts, verified by the same F16 model)",
            args=("--no-cache-prompt", "--spec-type", "ngram-mod"),
        ),
        # The slot's own prefix reuse alone is evicted by any other prompt in between (1 hit in 9
        # interleaved long_cached requests, measured); a 256 MiB host cache keeps the prefixes.
        Target(
            "smollm2-f16-cached",
            "smollm2-f16",
            "fast",
            "prefix cache: F16 weights, prompt cache on (256 MiB host cache)",
            args=(),
            cache_ram_mib=256,
        ),
        Target(
            "gemma-270m",
            "gemma3-270m-q4_k_m",
            "different",
            "different model: Gemma 3 270M base (Q4_K_M), Question/Answer template",
            qa_template=True,
        ),
    )
}

# Base vs each fast tier (same model), and base vs the different model.
PAIRS: list[PairSpec] = [
    PairSpec(pair, "smollm2-f16", fast, TARGETS[fast].role == "fast", TARGETS[fast].mechanism)
    for pair, fast in (
        ("smollm2-q8-vs-f16", "smollm2-q8"),
        ("smollm2-q4-vs-f16", "smollm2-q4"),
        ("smollm2-spec-vs-f16", "smollm2-f16-spec"),
        ("smollm2-cached-vs-f16", "smollm2-f16-cached"),
        ("gemma-vs-smollm2-f16", "gemma-270m"),
    )
]


@dataclass(frozen=True)
class TargetStatus:
    name: str
    state: str  # running | unhealthy | dead | stopped
    url: str = ""
    pid: int | None = None
    log: str = ""
    detail: str = ""


def state_path() -> Path:
    return cache_dir() / "run" / "vendor.json"


def endpoint_spec(name: str, url: str) -> EndpointSpec:
    """The endpoint the tierwatch client uses for a running target (model id = target name)."""
    target = _target(name)
    return EndpointSpec(
        name=name, protocol="openai", base_url=url, model=name, extra_body=dict(target.extra_body)
    )


def up(
    targets: list[str] | None = None,
    *,
    ctx: int = 4096,
    threads: int = 1,
    state: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, str]:
    """Start the targets not already running (all by default); return name -> ``/v1`` URL.

    Builds llama-server and prepares the models first when the cache lacks them. Targets already
    running and healthy are kept. A target that fails to start raises ``EngineError``; the
    ones started before it stay running and recorded, so ``down`` stops them.
    """
    names = _names(targets)
    state = state or state_path()
    binaries = build_binaries(log=log)
    urls: dict[str, str] = {}
    with _locked(state) as current:
        for name in names:
            rec = current.get(name)
            if rec and alive(rec["pid"]) and health(rec["url"]):
                urls[name] = rec["url"]
                continue
            if rec:
                stop(rec["pid"])
            target = TARGETS[name]
            args = list(target.args)
            if target.qa_template:
                template = state.parent / "question-answer.jinja"
                template.write_text(QA_TEMPLATE)
                args += ["--chat-template-file", str(template)]
            spec = ServerSpec(
                name,
                prepare_model(target.model, binaries=binaries),
                free_port(),
                alias=name,
                ctx=ctx,
                threads=threads,
                args=tuple(args),
                cache_ram_mib=target.cache_ram_mib,
            )
            proc = start(binaries.server, spec, log=state.parent / "logs" / f"{name}.log")
            current[name] = {
                "pid": proc.pid,
                "port": proc.port,
                "url": proc.url,
                "log": str(proc.log),
                "model": str(spec.model),
                "cmd": proc.cmd,
                "started_at": proc.started_at,
                "ready_s": proc.ready_s,
                "llama_cpp": binaries.version,
            }
            _write(state, current)
            urls[name] = proc.url
            log(f"{name}: {proc.url} (pid {proc.pid}, ready in {proc.ready_s:.1f} s)")
    return urls


def down(targets: list[str] | None = None, *, state: Path | None = None) -> list[str]:
    """Stop the recorded servers (all by default) by their pid; return the names stopped."""
    names = _names(targets)
    stopped = []
    with _locked(state or state_path()) as current:
        for name in names:
            rec = current.pop(name, None)
            if rec and stop(rec["pid"]):
                stopped.append(name)
    return stopped


def status(*, state: Path | None = None) -> dict[str, TargetStatus]:
    """Every target's state, read from the state file and checked against the live process."""
    path = state or state_path()
    current = json.loads(path.read_text()) if path.is_file() else {}
    result = {}
    for name in TARGETS:
        rec = current.get(name)
        if not rec:
            result[name] = TargetStatus(name, "stopped")
            continue
        common = {"url": rec["url"], "pid": rec["pid"], "log": rec["log"]}
        if not alive(rec["pid"]):
            detail = (
                f"pid {rec['pid']} is gone; last lines of {rec['log']}:\n"
                f"{log_tail(Path(rec['log']), 8)}\nFix: `up` starts it again."
            )
            result[name] = TargetStatus(name, "dead", detail=detail, **common)
        elif not health(rec["url"]):
            result[name] = TargetStatus(name, "unhealthy", detail="/health is not 200", **common)
        else:
            result[name] = TargetStatus(name, "running", **common)
    return result


def _target(name: str) -> Target:
    if name not in TARGETS:
        raise EngineError(f"unknown target {name!r}; known: {', '.join(TARGETS)}")
    return TARGETS[name]


def _names(targets: list[str] | None) -> list[str]:
    return [_target(n).name for n in (targets or list(TARGETS))]


@contextmanager
def _locked(path: Path) -> Iterator[dict[str, Any]]:
    """The state file's content under an exclusive lock; written back on exit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        current = json.loads(path.read_text()) if path.is_file() else {}
        try:
            yield current
        finally:
            _write(path, current)


def _write(path: Path, current: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(current, indent=2))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    """``python -m evals.vendors.llamacpp.vendor up|down|status [--targets ...]`` (no Django)."""
    parser = argparse.ArgumentParser(prog="python -m evals.vendors.llamacpp.vendor")
    parser.add_argument("action", choices=("up", "down", "status"))
    parser.add_argument("--targets", nargs="+", choices=list(TARGETS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ctx", type=int, default=4096)
    args = parser.parse_args(argv)
    try:
        if args.action == "up":
            t0 = time.monotonic()
            urls = up(
                args.targets,
                ctx=args.ctx,
                threads=args.threads,
                log=lambda m: print(m, file=sys.stderr),
            )
            print(json.dumps({"urls": urls, "seconds": round(time.monotonic() - t0, 2)}, indent=2))
        elif args.action == "down":
            print(json.dumps({"stopped": down(args.targets)}))
        else:
            print(json.dumps({n: asdict(s) for n, s in status().items()}, indent=2))
    except EngineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
