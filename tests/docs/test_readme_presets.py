"""The README's "Presets" section: its table names every preset, and its config example, read
from the README itself, applies cleanly with one endpoint per preset."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from evals.presets import PRESETS
from monitor.models import Endpoint
from monitor.setup.config import apply_config_text

ROOT = Path(__file__).resolve().parents[2]


def section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("### Presets:", 1)[1].split("\n#", 1)[0]


def test_the_table_has_one_row_per_preset():
    rows = re.findall(r"^\| `([a-z0-9-]+)` \|", section(), flags=re.M)
    assert rows == list(PRESETS)


@pytest.mark.django_db
def test_the_example_applies_with_one_endpoint_per_preset():
    (example,) = re.findall(r"```yaml\n(.*?)```", section(), flags=re.S)
    counts = apply_config_text(example, source="README.md")
    assert counts["endpoints"] == len(PRESETS) and counts["pairs"] == 3
    used = [e["preset"] for e in yaml.safe_load(example)["endpoints"]]
    assert sorted(used) == sorted(PRESETS)
    claude = Endpoint.objects.get(name="claude-fast")
    assert claude.extra_headers == {"anthropic-beta": "fast-mode-2026-02-01"}
    assert Endpoint.objects.get(name="llama-nitro").model.endswith(":nitro")
