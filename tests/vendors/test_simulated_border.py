"""The simulated vendor gives border inputs (B3IT): some short prompts answer more than one
token at temperature 0, and switching a tier to its "quantized" variant moves those odds
while prompts that are not border inputs keep their one answer."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx
import numpy as np

from evals.client import make_client, stream_chat
from evals.records import EndpointSpec
from evals.stats import border


def answers(url: str, prompts: list[str], n: int) -> dict[str, Counter[str]]:
    spec = EndpointSpec(name="f", protocol="anthropic", base_url=url, model="demo-fast")

    async def go():
        async with make_client() as client:
            asked = [p for p in prompts for _ in range(n)]
            got = await asyncio.gather(
                *(stream_chat(client, spec, border.request(p)) for p in asked)
            )
            return list(zip(asked, [border.answer(r) for r in got], strict=True))

    return border.distributions(asyncio.run(go()))


def switch(url: str, variant: str) -> None:
    r = httpx.post(f"{url}/_tierwatch/variant", json={"model": "demo-fast", "variant": variant})
    assert r.status_code == 200, r.text


def test_border_inputs_exist_and_a_quantized_switch_moves_them(vendor):
    prompts = border.candidates(120, seed=0)
    first = answers(vendor, prompts, 6)
    found = [p for p in prompts if border.is_border(first[p])]
    plain = [p for p in prompts if p not in found]
    assert 5 <= len(found) <= 40, len(found)  # ~15 % of prompts are near ties
    before = answers(vendor, found, 60)
    switch(vendor, "quantized")
    try:
        after = answers(vendor, found + plain[:20], 60)
    finally:
        switch(vendor, "")
    again = answers(vendor, found, 60)
    moved = np.mean([border.tv(before[p], after[p]) for p in found])
    noise = np.mean([border.tv(before[p], again[p]) for p in found])
    assert moved > noise + 0.08, (moved, noise)
    assert all(len(after[p]) == 1 for p in plain[:20])  # not a border input: one answer still
