"""The simulated demo vendor: determinism, sampling, prefix cache, coding cases, API shape."""

from __future__ import annotations

import asyncio
import random

import httpx

from evals.client import make_client, stream_chat
from evals.records import ChatRequest, EndpointSpec, TimingRecord
from evals.suites import get_suite
from evals.vendors.simulated import TIERS

PROMPT = [{"role": "user", "content": "How should a team roll out database schema migrations?"}]


def ask(
    url: str, model: str, requests: list[ChatRequest], protocol: str = "openai"
) -> list[TimingRecord]:
    ep = EndpointSpec(name=model, protocol=protocol, base_url=url, model=model)

    async def go() -> list[TimingRecord]:
        async with make_client() as client:
            return [await stream_chat(client, ep, r) for r in requests]

    records = asyncio.run(go())
    assert all(r.ok for r in records), [r.error_message for r in records if not r.ok]
    return records


def texts(
    url: str, model: str, n: int, messages: list[dict[str, str]] = PROMPT, **kw: float | int | None
) -> list[str]:
    return [r.text for r in ask(url, model, [ChatRequest(messages=messages, **kw)] * n)]


def test_it_answers_deterministically_at_temperature_0(vendor):
    for model in TIERS:
        assert len(set(texts(vendor, model, 3, temperature=0.0))) == 1


def test_base_and_distilled_word_things_differently(vendor):
    base = texts(vendor, "demo-base", 1, temperature=0.0)[0]
    assert base != texts(vendor, "demo-distilled", 1, temperature=0.0)[0]


def test_the_fast_tier_agrees_with_base_except_rare_late_flips(vendor):
    requests = [
        ChatRequest(
            messages=[{"role": "user", "content": f"Describe caching strategy {i}"}],
            temperature=0.0,
        )
        for i in range(20)
    ]
    base = [r.text for r in ask(vendor, "demo-base", requests)]
    fast = [r.text for r in ask(vendor, "demo-fast", requests)]
    assert all(f.startswith(b.split(". ")[0]) for b, f in zip(base, fast, strict=True))  # late
    assert 10 <= sum(b == f for b, f in zip(base, fast, strict=True)) < 20  # mostly identical


def test_it_samples_at_temperature_1(vendor):
    assert len(set(texts(vendor, "demo-base", 6, temperature=1.0))) > 2


def test_a_seed_repeats_a_sample_on_the_same_tier_only(vendor):
    base = texts(vendor, "demo-base", 2, temperature=1.0, seed=7)
    assert base[0] == base[1]
    assert texts(vendor, "demo-base", 1, temperature=1.0, seed=8)[0] != base[0]


def test_max_tokens_cuts_the_answer(vendor):
    rec = ask(vendor, "demo-base", [ChatRequest(messages=PROMPT, max_tokens=5)])[0]
    assert rec.finish_reason == "length" and rec.completion_tokens == 5


def test_the_fast_tier_caches_a_repeated_long_prompt(vendor):
    long = [
        {"role": "system", "content": "Context line about ledgers and invoices. " * 120},
        {"role": "user", "content": "Summarise the context."},
    ]
    first, second = ask(vendor, "demo-fast", [ChatRequest(messages=long, max_tokens=10)] * 2)
    assert first.cached_tokens == 0 and second.cached_tokens and second.cached_tokens > 0
    assert second.cached_tokens <= second.prompt_tokens == first.prompt_tokens
    base = ask(vendor, "demo-base", [ChatRequest(messages=long, max_tokens=10)] * 2)
    assert [r.cached_tokens for r in base] == [0, 0]


def test_the_anthropic_api_reports_cache_reads(vendor):
    long = [{"role": "user", "content": "Another long document about shipments. " * 120}]
    first, second = ask(
        vendor, "demo-fast", [ChatRequest(messages=long, max_tokens=10)] * 2, protocol="anthropic"
    )
    assert first.cached_tokens == 0 and second.cached_tokens and second.cached_tokens > 0


def test_it_answers_coding_cases_with_reference_or_weak_solutions(vendor):
    hard = next(c for c in get_suite("coding").cases if c.difficulty == "hard" and c.weak_solution)
    easy = next(c for c in get_suite("coding").cases if c.difficulty == "easy")
    for case, model, expected in [
        (hard, "demo-base", hard.reference_solution),
        (hard, "demo-fast", hard.reference_solution),
        (hard, "demo-distilled", hard.weak_solution),
        (easy, "demo-distilled", easy.reference_solution),
    ]:
        text = texts(vendor, model, 1, case.messages, max_tokens=case.max_tokens, temperature=0.0)[
            0
        ]
        assert f"```python\n{expected.rstrip()}\n```" in text, (case.key, model)


def test_it_lists_its_models_as_simulated(vendor):
    models = httpx.get(f"{vendor}/models").json()["data"]
    assert {m["id"] for m in models} == {"demo-base", "demo-fast", "demo-distilled"}
    assert all("SIMULATED" in m["description"] and m["simulated"] for m in models)
    health = httpx.get(vendor.removesuffix("/v1") + "/health")
    assert health.json()["simulated"] and health.headers["x-tierwatch-simulated"] == "true"


def test_it_answers_without_streaming(vendor):
    resp = httpx.post(
        f"{vendor}/chat/completions",
        json={"model": "demo-base", "messages": PROMPT, "temperature": 0, "max_tokens": 50},
    )
    body = resp.json()
    assert resp.headers["x-tierwatch-simulated"] == "true" and body["model"] == "demo-base"
    streamed = texts(vendor, "demo-base", 1, temperature=0.0, max_tokens=50)[0]
    assert body["choices"][0]["message"]["content"] == streamed
    assert body["usage"]["completion_tokens"] == 50 and body["system_fingerprint"] == "fp_demo_base"


def test_a_fault_can_be_chosen_by_header(vendor):
    resp = httpx.post(
        f"{vendor}/chat/completions",
        headers={"x-tierwatch-fault": "ratelimit"},
        json={"model": "demo-base", "messages": PROMPT},
    )
    assert resp.status_code == 429 and resp.headers["retry-after"] == "2"


def test_it_rejects_a_body_without_messages(vendor):
    resp = httpx.post(f"{vendor}/chat/completions", json={"model": "demo-base"})
    assert resp.status_code == 400 and "messages" in resp.json()["error"]["message"]


def test_a_two_sample_test_tells_distilled_from_base_but_not_base_from_base():
    from evals.stats.mmd import mmd_test
    from evals.vendors.simulated import compose

    rng = random.Random(1)

    def samples(model: str) -> dict[int, list[str]]:
        return {
            p: [
                compose(
                    TIERS[model], [{"role": "user", "content": f"Explain retries {p}"}], 1.0, rng
                )
                for _ in range(10)
            ]
            for p in range(10)
        }

    base = samples("demo-base")
    assert mmd_test(base, samples("demo-base"), B=200).p_value > 0.05
    assert mmd_test(base, samples("demo-distilled"), B=200).p_value < 0.01


def test_a_quantized_variant_moves_logprobs_but_not_the_token(vendor):
    """The tripwire's target: switched at run time, the fast tier answers the same token at
    temperature 0 with its runners-up a few hundredths of a nat more likely."""
    from evals.stats import tripwire

    def window(n: int) -> tuple[list[str], list[dict[str, float]]]:
        recs = ask(vendor, "demo-fast", [tripwire.request("x")] * n)
        return [r.text for r in recs], [tripwire.first_token(r) for r in recs]

    texts_before, before = window(12)
    switch = httpx.post(
        f"{vendor}/_tierwatch/variant", json={"model": "demo-fast", "variant": "quantized"}
    )
    assert switch.status_code == 200, switch.text
    try:
        texts_after, after = window(6)
    finally:
        httpx.post(f"{vendor}/_tierwatch/variant", json={"model": "demo-fast", "variant": ""})
    assert set(texts_before) == set(texts_after) and len(set(texts_after)) == 1
    assert len(before[0]) == 4  # the chosen token and three runners-up
    same = tripwire.window_test({"x": before[:6]}, {"x": before[6:]}, permutations=999)
    moved = tripwire.window_test({"x": before}, {"x": after}, permutations=999)
    assert same.p_value > 0.001 and moved.p_value <= 0.01


def test_an_unknown_variant_is_refused_with_what_was_wrong(vendor):
    bad = httpx.post(f"{vendor}/_tierwatch/variant", json={"model": "demo-fast", "variant": "int3"})
    assert bad.status_code == 400 and "int3" in bad.text
