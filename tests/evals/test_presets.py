"""evals.presets: what a preset fills, what the user's fields override, and the data the
onboarding lists."""

from __future__ import annotations

import pytest

from evals.presets import PAIR_PRESETS, PRESETS, merged, presets_for_pair, resolve


def test_the_user_s_fields_win_and_dicts_merge_key_by_key():
    got = resolve(
        "anthropic-fast",
        {
            "model": "claude-x",
            "protocol": "anthropic",
            "expected_tier": "priority",
            "extra_body": {"metadata": {"user_id": "u"}},
            "extra_headers": {"anthropic-beta": "fast-mode-2026-02-01,other-beta"},
        },
    )
    assert got["extra_body"] == {"speed": "fast", "metadata": {"user_id": "u"}}
    assert got["extra_headers"] == {"anthropic-beta": "fast-mode-2026-02-01,other-beta"}
    assert got["expected_tier"] == "priority"  # given: wins over the preset's "fast"
    assert got["served_tier_fields"] == ["usage.speed", "message.usage.speed"]
    assert got["base_url"] == "https://api.anthropic.com/v1" and got["model"] == "claude-x"


def test_nested_dicts_merge_and_lists_are_taken_whole():
    preset = {"provider": {"allow_fallbacks": False, "only": ["a", "b"]}}
    given = {"provider": {"only": ["groq"]}, "seed": 1}
    assert merged(preset, given) == {
        "provider": {"allow_fallbacks": False, "only": ["groq"]},
        "seed": 1,
    }
    assert preset == {"provider": {"allow_fallbacks": False, "only": ["a", "b"]}}  # untouched


def test_the_nitro_suffix_is_added_once_and_a_model_id_tier_expects_its_model():
    assert resolve("openrouter-nitro", {"model": "m"})["model"] == "m:nitro"
    assert resolve("openrouter-nitro", {"model": "m:nitro"})["model"] == "m:nitro"
    assert resolve("fireworks-model", {"model": "x-fast"})["expected_tier"] == "x-fast"
    assert resolve("fireworks-model", {"model": "x", "expected_tier": "y"})["expected_tier"] == "y"


def test_reasoning_presets_use_max_completion_tokens_and_no_temperature():
    got = resolve("openai-fast-reasoning", {"model": "gpt-5"})
    assert got["max_tokens_field"] == "max_completion_tokens" and got["send_temperature"] is False
    assert got["reasoning_effort"] == "low" and "reasoning_effort" not in got["extra_body"]


def test_an_unknown_preset_names_the_known_ones():
    with pytest.raises(KeyError, match="unknown preset 'openai-turbo' \\(known: anthropic-fast"):
        resolve("openai-turbo", {})


def test_every_pair_names_presets_that_exist_and_every_claim_is_well_formed():
    for pp in PAIR_PRESETS:
        assert pp.fast in PRESETS and pp.base in PRESETS
    for p in PRESETS.values():
        assert p.role != "fast" or p.base or p.name == "openrouter-nitro" or p.expected_from
        if p.claim:
            assert p.claim.metric in ("output_tps", "ttft", "e2e")
            assert p.claim.form in ("factor", "floor") and p.claim.value > 0 and p.claim.wording
    listed = presets_for_pair()
    assert [row["name"] for row in listed] == [pp.name for pp in PAIR_PRESETS]
    first = listed[0]
    assert first["fast"]["name"] == "openai-fast" and first["base"]["name"] == "openai-standard"
    assert first["fast"]["api_key_env"] == "OPENAI_API_KEY"
