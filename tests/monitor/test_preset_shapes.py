"""Each preset's request shape is a fixture: ``tests/data/presets/<name>.json`` holds the URL,
headers and JSON body the client sends for a one-message probe, built the product's way (an
``Endpoint`` with ``preset:`` → ``apply_preset`` → ``spec()`` → ``evals.client.build_request``).
A vendor's rename is one edit of the preset and of its fixture; to rewrite the fixtures after
such an edit, run this file with ``TIERWATCH_WRITE_PRESET_FIXTURES=1`` and review the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evals.client import build_request
from evals.presets import PRESETS
from evals.records import ChatRequest
from monitor.models import Endpoint

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "presets"
PROBE = ChatRequest(messages=[{"role": "user", "content": "Say hello."}], max_tokens=64)
KEY = "sk-fixture-key"


def sent(name: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    preset = PRESETS[name]
    given = {"model": preset.model_hint}
    ep = Endpoint(name=name, preset=name, **given)
    ep.apply_preset(given)
    monkeypatch.setenv(ep.api_key_env, KEY)
    url, headers, body = build_request(ep.spec(), PROBE)
    return {"url": url, "headers": headers, "body": json.loads(body)}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_the_request_a_preset_sends_is_its_fixture(name, monkeypatch):
    got = sent(name, monkeypatch)
    path = FIXTURES / f"{name}.json"
    if os.environ.get("TIERWATCH_WRITE_PRESET_FIXTURES"):
        path.write_text(json.dumps(got, indent=2, ensure_ascii=False) + "\n")
    assert got == json.loads(path.read_text()), f"{name}: the request differs from {path.name}"


def test_every_fixture_belongs_to_a_preset():
    assert sorted(p.stem for p in FIXTURES.glob("*.json")) == sorted(PRESETS)
