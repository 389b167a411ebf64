"""docs/architecture.md is the one module map: every module of ``monitor/`` and ``evals/`` is
named there, and every module path it names exists. A new module without a line in the map,
or a line left behind by a move, fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "docs" / "architecture.md"
SKIP_PARTS = {"migrations", "__pycache__"}


def modules(package: str) -> list[Path]:
    return sorted(
        path.relative_to(ROOT / package)
        for path in (ROOT / package).rglob("*.py")
        if path.name != "__init__.py"
        and not SKIP_PARTS & set(path.parts)
        and "commands" not in path.parts  # named by command in the map
    )


def named() -> set[str]:
    """Every backticked ``something.py`` in the map, as written (``runs/steps.py``, ``mmd.py``)."""
    return set(re.findall(r"([\w/]+\.py)", MAP.read_text()))


def test_every_module_is_in_the_map():
    names = named()
    missing = [
        f"{package}/{module}"
        for package in ("monitor", "evals")
        for module in modules(package)
        if module.as_posix() not in names and module.name not in names
    ]
    assert missing == [], f"add these to docs/architecture.md: {missing}"


def test_every_module_path_in_the_map_exists():
    known = {m.as_posix() for p in ("monitor", "evals") for m in modules(p)}
    basenames = {Path(k).name for k in known}
    stale = [
        name
        for name in named()
        if "/" in name
        and not name.startswith(("benchmarks/", "tests/", "docs/"))
        and name not in known
        and not (ROOT / name).exists()
    ] + [name for name in named() if "/" not in name and name not in basenames]
    assert stale == [], f"docs/architecture.md names modules that do not exist: {stale}"


def test_the_readme_points_to_the_map_instead_of_repeating_it():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Architecture", 1)[1].split("\n## ", 1)[0]
    assert "docs/architecture.md" in section
    assert len(section.splitlines()) < 40  # an overview, not a second map
