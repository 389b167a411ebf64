"""Each preset through the product's path: a config file using ``preset:`` is applied, a probe
runs the pair against a local server that speaks that vendor's shape (``evals.vendors.tiers``,
downgrading exactly half of the premium requests), and the samples keep the tier the vendor
reported while the run summary gives the fast tier's downgrade rate."""

from __future__ import annotations

import pytest

from evals.presets import PRESETS
from evals.vendors.tiers import serve_in_thread
from monitor.models import Endpoint, Pair
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import create_run
from monitor.setup.config import apply_config_text

pytestmark = pytest.mark.django_db
FW = "accounts/fireworks/models/llama-v3p3-70b-instruct"  # a model id past 40 characters
CASES = 4  # per tier; half of the fast tier's requests are downgraded

# (fast preset, base preset, vendor path, fast model, base model, extra fast fields,
#  fast tiers served, expected, downgrade rate, base tiers served)
CASES_TABLE = [
    ("openai-fast", "openai-standard", "openai", "gpt-5.6-sol", "gpt-5.6-sol", "",
     {"priority", "default"}, "priority", 0.5, {"default"}),
    ("openai-fast-reasoning", "openai-standard-reasoning", "openai", "gpt-5.6-sol",
     "gpt-5.6-sol", "", {"priority", "default"}, "priority", 0.5, {"default"}),
    ("openai-fast-responses", "openai-standard-responses", "openai", "gpt-5.6-sol",
     "gpt-5.6-sol", "", {"priority", "default"}, "priority", 0.5, {"default"}),
    ("openai-ultrafast", "openai-standard-responses", "openai", "gpt-6-astra", "gpt-6-astra",
     "", {"ultrafast", "default"}, "ultrafast", 0.5, {"default"}),
    ("anthropic-fast", "anthropic-standard", "anthropic", "claude-opus-5-5", "claude-opus-5-5",
     "", {"fast", "standard"}, "fast", 0.5, {"standard"}),
    ("gemini-priority", "gemini-standard", "gemini", "gemini-3.5-flash", "gemini-3.5-flash", "",
     {"priority", "standard"}, "priority", 0.5, {"standard"}),
    ("groq-performance", "groq-on-demand", "groq", "llama-3.3-70b-versatile",
     "llama-3.3-70b-versatile", "", {"performance", "on_demand"}, "performance", 0.5,
     {"on_demand"}),
    ("openrouter-nitro", "openrouter-pinned", "openrouter", "meta-llama/llama-3.3-70b-instruct",
     "meta-llama/llama-3.3-70b-instruct", "", {"Cerebras", "DeepInfra"}, "", None,
     {"DeepInfra"}),
    ("fireworks-model", "fireworks-model", "fireworks", FW + "-fast", FW, "",
     {FW + "-fast", FW + "-fast-standard"}, FW + "-fast", 0.5, {FW}),
    ("cerebras-model", "together-model", "cerebras", "llama-3.3-70b", "llama-3.3-70b", "",
     {"llama-3.3-70b"}, "llama-3.3-70b", 0.0, {"llama-3.3-70b"}),
    ("openrouter-pinned", "openrouter-pinned", "openrouter", "meta-llama/llama-3.3-70b-instruct",
     "meta-llama/llama-3.3-70b-instruct",
     "extra_body: {provider: {only: [groq], allow_fallbacks: true}}, expected_tier: Groq",
     {"Groq", "DeepInfra"}, "Groq", 0.5, {"DeepInfra"}),
]  # fmt: skip


@pytest.fixture(autouse=True)
def keys(monkeypatch):
    """Each preset names its vendor's key variable; a local key in each."""
    for preset in PRESETS.values():
        monkeypatch.setenv(preset.api_key_env, "sk-local-test-key")


def _config(url: str, row: tuple) -> str:
    fast, base, vendor, fast_model, base_model, extra = row[:6]
    base_vendor = "together" if base == "together-model" else vendor
    extra = f", {extra}" if extra else ""
    return f"""\
endpoints:
  - {{name: fast, preset: {fast}, base_url: "{url}/{vendor}/v1", model: {fast_model}{extra},
     local: true}}
  - {{name: base, preset: {base}, base_url: "{url}/{base_vendor}/v1", model: {base_model},
     local: true}}
pairs:
  - {{name: p, fast: fast, base: base, suite: smoke, repeat: 1}}
"""


def _run(url: str, config: str):
    apply_config_text(config, source="presets.yaml")
    pair = Pair.objects.get(name="p")
    return execute_run(run_id=create_run(pair=pair, seed=3).id, cases_limit=CASES)


@pytest.mark.parametrize("row", CASES_TABLE, ids=[f"{r[0]}-vs-{r[1]}" for r in CASES_TABLE])
def test_a_preset_s_probe_records_the_tier_served_and_the_downgrade_rate(row):
    fast_served, expected, rate, base_served = row[6:]
    with serve_in_thread(downgrade_share=0.5) as url:
        run = _run(url, _config(url, row))
    assert run.status == "done", run.error
    fast = run.samples.filter(tier="fast")
    assert fast.count() == CASES and all(fast.values_list("ok", flat=True))
    assert set(fast.values_list("served_tier", flat=True)) == fast_served
    assert set(run.samples.filter(tier="base").values_list("served_tier", flat=True)) == base_served
    block = run.summary_obj.tier("fast").served_tier
    assert block["expected"] == expected and block["downgrade_rate"] == rate


def test_a_pinned_provider_without_fallbacks_fails_rather_than_being_served_by_another():
    row = ("openrouter-pinned", "openrouter-pinned", "openrouter", "m", "m",
           "extra_body: {provider: {only: [groq]}}, expected_tier: Groq")  # fmt: skip
    with serve_in_thread(downgrade_share=0.5) as url:
        run = _run(url, _config(url, row))
    fast = Endpoint.objects.get(name="fast")
    assert fast.extra_body == {"provider": {"only": ["groq"], "allow_fallbacks": False}}
    samples = run.samples.filter(tier="fast")
    assert sorted(samples.values_list("ok", flat=True)) == [False, False, True, True]
    assert set(samples.filter(ok=True).values_list("served_tier", flat=True)) == {"Groq"}
    assert run.summary_obj.tier("fast").served_tier["downgrade_rate"] == 0.0


def test_anthropic_fast_without_its_beta_header_is_refused_by_the_vendor_shape():
    row = ("anthropic-fast", "anthropic-standard", "anthropic", "claude-opus-5-5",
           "claude-opus-5-5", 'extra_headers: {anthropic-beta: "other-beta"}')  # fmt: skip
    with serve_in_thread(downgrade_share=0.0) as url:
        run = _run(url, _config(url, row))
    fast = run.samples.filter(tier="fast")
    assert not any(fast.values_list("ok", flat=True))
    assert "fast-mode-2026-02-01" in fast.first().error_message
