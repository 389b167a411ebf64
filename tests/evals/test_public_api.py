"""evals as a library: ``__all__`` names the public API, each name resolves to its home
module's object, importing the package loads nothing heavy, and no module in evals/,
monitor/ or benchmarks/ imports another module's private name."""

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import evals
from tests.support import parse_source

ROOT = Path(__file__).resolve().parents[2]


def test_every_public_name_resolves_to_its_home_module_s_object():
    assert evals.__all__ == sorted(evals._HOME) and "TIERS" in evals.__all__
    for name in evals.__all__:
        assert getattr(evals, name) is getattr(importlib.import_module(evals._HOME[name]), name)


def test_importing_evals_loads_neither_numpy_nor_scipy_nor_an_http_client():
    heavy = "{'numpy', 'scipy', 'httpx', 'aiohttp'}"
    code = f"import sys, evals.records; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=ROOT)  # fmt: skip
    assert out.stdout.strip() == "[]"


def test_no_module_imports_another_module_s_private_name():
    found = []
    for package in ("evals", "monitor", "benchmarks"):
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(parse_source(path)):
                if isinstance(node, ast.ImportFrom):
                    found += [f"{path.relative_to(ROOT)}:{node.lineno}: {a.name}"
                              for a in node.names if a.name.startswith("_")]  # fmt: skip
    assert found == []
