"""Write one benchmark's section of docs/benchmarks.md, leaving the other sections alone.

Each benchmark script owns one ``## `` section; re-running it replaces that section in place.
"""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def write_section(header: str, text: str, doc: Path = DOC) -> None:
    """Replace the section that starts with ``header`` by ``text`` (or append it)."""
    current = doc.read_text() if doc.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(header)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(current):
        current = pattern.sub(lambda _: text, current)
    else:
        current = current.rstrip("\n") + "\n\n" + text
    doc.parent.mkdir(exist_ok=True)
    doc.write_text(current)
