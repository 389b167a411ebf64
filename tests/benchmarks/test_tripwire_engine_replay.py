"""benchmarks/tripwire_engine_replay.py: the pool server answers the product's client with the
pool's logprobs, the replay's cache gives the product's p, and (engine) whole months through the
database path (scheduled run → ``TripwireState`` → alert → audit queued) alarm where the replay's
fold alarms, on the same recorded llama.cpp windows."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import numpy as np
import pytest

from benchmarks import tripwire_engine_replay as replay
from benchmarks.tripwire_pool_server import PoolServer
from evals.client import make_client, stream_chat
from evals.records import EndpointSpec
from evals.stats import tripwire as stats
from monitor.models import Alert

POOLS = Path(os.environ.get("TIERWATCH_TRIPWIRE_POOLS", "var/tripwire_pools.json"))


def window(shift: float = 0.0, noise: float = 0.0, seed: int = 0) -> replay.Window:
    rng = np.random.default_rng(seed)
    return {
        p: [{t: -j - 0.3 * i + (shift if j else 0) + noise * rng.standard_normal()
             for j, t in enumerate("ABCDE")} for _ in range(6)]
        for i, p in enumerate(stats.DEFAULT_PROMPTS)
    }  # fmt: skip


def ask(url: str, model: str) -> replay.Window:
    spec = EndpointSpec(name=model, protocol="openai", base_url=url, model=model)
    prompts = [p for p in stats.DEFAULT_PROMPTS for _ in range(6)]

    async def go() -> list:
        async with make_client() as client:
            return await asyncio.gather(*(stream_chat(client, spec, stats.request(p))
                                          for p in prompts))  # fmt: skip

    got, failed, why = stats.window_of(list(zip(prompts, asyncio.run(go()), strict=True)))
    assert not failed, why
    return got


def test_the_pool_server_answers_the_product_s_client_with_the_pool_s_logprobs():
    server = PoolServer()
    try:
        served = window(noise=0.01, seed=1)
        server.set_window("fast", served)
        assert replay.key(ask(server.url, "fast")) == replay.key(served)
    finally:
        server.close()


def test_the_cache_returns_the_product_s_test_and_a_switch_fires_through_the_fold():
    from monitor.derived import tripwire as derived

    cached = replay.cached_window_test()
    reference = {p: rows * 4 for p, rows in window(noise=0.01, seed=2).items()}
    current = window(noise=0.01, seed=3)
    first = cached(reference, current, seed=0)
    assert first == stats.window_test(reference, current, seed=0)
    assert cached(reference, {p: r[::-1] for p, r in current.items()}, seed=5) is first
    block: dict = {}
    for hour in range(derived.REFERENCE_RUNS):  # the reference runs
        block = replay.fold(block, window(noise=0.01, seed=10 + hour), hour)
    fired = replay.switched(block, [window(0.5, 0.01, 20)], np.random.default_rng(0), 8)
    assert fired is not None and fired <= 8


def test_the_what_if_refold_at_the_product_s_floor_alarms_where_the_product_does():
    from evals.stats import eprocess

    rng = np.random.default_rng(5)
    ps = [float(p) for p in rng.uniform(size=60) ** 3] + [1e-4] * 5  # small ones, then a switch
    state, alarms = eprocess.EProcessState(), []
    for i, p in enumerate(ps):
        state, decision = eprocess.update(state, eprocess.AuditEvidence(p), threshold=21600.0)
        if decision.new_alarm:
            alarms.append(i)
            state = eprocess.EProcessState()
    assert alarms and replay.refold(ps, eprocess.P_FLOOR, 21600.0) == alarms
    assert replay.refold(ps, 1e-4, 21600.0)[0] < alarms[0]  # a lower floor: sooner


def served_month(pair, server, pools, scenario, month, hours, switch_at):
    """The first ``hours`` of one month through the database path, the fast tier switched at
    ``switch_at`` as the replay switches it; returns the hours false alarms fired and the run
    after the switch at which the fast tier fired (None: not within ``hours``). Each run is
    also folded by the product's per-tier step on the windows the product read, with the run's
    id and seed: the stored state must be exactly that."""
    from monitor.derived import tripwire as derived
    from monitor.models import Run, TripwireState
    from tests.monitor.test_tripwire_path import scheduled_tripwire

    nulls, switches = replay.SCENARIOS[scenario]
    null = replay.windows_of(pools, nulls)
    pool = replay.windows_of(pools, [switches[0]])
    script = replay.month_script(scenario, month, len(null), switch_at)
    rng, alarms = np.random.default_rng(script["switch_seed"]), []
    pure: dict = {"fast": {}, "base": {}}
    for hour in range(hours):
        after = hour >= switch_at
        served = {
            "fast": pool[int(rng.integers(len(pool)))] if after else null[script["fast"][hour]],
            "base": null[script["base"][hour]],
        }
        for tier, w in served.items():
            server.set_window(f"{tier}-pool", w)
        read = []  # the windows the product built from its answers (the row order it saw)
        plain = stats.window_of

        def spy(answers, plain=plain, read=read):
            read.append(plain(answers))
            return read[-1]

        stats.window_of = spy
        try:
            run = scheduled_tripwire(pair)
        finally:
            stats.window_of = plain
        state = TripwireState.objects.get(pair=pair)
        for tier, (got, _, _) in zip(("fast", "base"), read, strict=True):
            assert replay.key(got) == replay.key(served[tier])
            pure[tier] = derived._tier_after(pure[tier], got, run.id, run.seed)
            assert state.tiers[tier]["last"] == pure[tier]["last"], (hour, tier)
        if state.fired_tier:
            assert state.audit_id and Run.objects.get(id=state.audit_id).trigger == "tripwire"
            assert Alert.objects.filter(pair=pair, rule__metric="tripwire_fired").exists()
            if after and state.fired_tier == "fast":
                return alarms, hour - switch_at + 1
            alarms.append(hour)
            derived.acknowledge(pair)
            pure = {"fast": {}, "base": {}}
    return alarms, None


@pytest.mark.engine
@pytest.mark.timeout(3 * 3600)
@pytest.mark.django_db
@pytest.mark.skipif(not POOLS.is_file(), reason=f"no pools at {POOLS} (tripwire_engine_pools.py)")
def test_months_through_the_database_path_alarm_where_the_replay_does():
    from monitor.models import Endpoint, Pair
    from monitor.setup.suites import sync_builtin_suite

    pools = json.loads(POOLS.read_text())["pools"]
    scenario = os.environ.get("TIERWATCH_TRIPWIRE_SCENARIO", "f16 4 slots")
    months = int(os.environ.get("TIERWATCH_TRIPWIRE_MONTHS", "5"))
    # a run through the database path takes ~3 s on a loaded 2-core machine: the check replays
    # the first ``hours`` of each month, the fast tier switched at ``switch_at``
    hours = int(os.environ.get("TIERWATCH_TRIPWIRE_HOURS", "36"))
    switch_at = int(os.environ.get("TIERWATCH_TRIPWIRE_SWITCH_AT", "24"))
    first = replay.SCENARIOS[scenario][1][0]
    server = PoolServer()
    try:
        for month in range(months):
            plain = stats.window_test
            stats.window_test = replay.cached_window_test()  # the replay, as the benchmark runs
            try:
                expected = replay.one_month(
                    pools, scenario, month, hours=hours, switch_at=switch_at
                )
            finally:
                stats.window_test = plain
            ends = {t: Endpoint.objects.create(name=f"{t}-{month}", base_url=server.url,
                                               model=f"{t}-pool", local=True)
                    for t in ("fast", "base")}  # fmt: skip
            sync_builtin_suite(name="audit")
            pair = Pair.objects.create(name=f"pool-{month}", fast=ends["fast"], base=ends["base"],
                                       suite=sync_builtin_suite(name="coding"))  # fmt: skip
            alarms, detect = served_month(pair, server, pools, scenario, month, hours, switch_at)
            assert alarms == [h for h, _ in expected["alarms"] if h < switch_at], month
            assert detect == expected["detect"][first]["fast"], month
            print(f"month {month}: false alarms at {alarms}, {first} fired at run {detect}")
    finally:
        server.close()
