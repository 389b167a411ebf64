"""The demo setup: simulated endpoints, pairs, schedules, an alert rule, a login.

Everything created here is labelled simulated; it is what ``./run demo`` shows on first start.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model

from monitor.models import AlertRule, Channel, Endpoint, Pair, Suite, TripwireState
from monitor.setup.schedules import (
    ensure_probe_schedule,
    ensure_retention_schedule,
    ensure_tripwire_schedule,
    ensure_weekly_report_schedule,
)
from monitor.setup.suite_import import sync_benchmark_suite
from monitor.setup.suites import sync_builtin_suite

DEMO_USER = "demo"
DEMO_PASSWORD = "tierwatch-demo"
# Faster than the demo's ×30 clock: a tripwire freezes a day of runs as its reference
# (error_budget.TRIPWIRE_REFERENCE_RUNS), 24 minutes at one a minute; at one per 15 s a
# switch of the demo's fast tier fires within about seven minutes of starting.
DEMO_TRIPWIRE_EVERY_S = 15


def ensure_demo(
    *, vendor_url: str, probe_every_s: int = 30, audit_every_s: int = 2880
) -> list[Pair]:
    """The demo's pairs. Its clock runs ×30 (a probe every 30 s plays the README's 15
    minutes): the audit every 48 min plays the daily default; the tripwires run every 15 s
    (``DEMO_TRIPWIRE_EVERY_S``: their day-long reference in six minutes)."""

    def endpoint(name: str, model: str) -> Endpoint:
        obj, _ = Endpoint.objects.update_or_create(
            name=name,
            defaults={
                "protocol": "openai",
                "base_url": vendor_url,
                "model": model,
                "api_key_env": "",
                "simulated": True,
                "local": True,  # a server on 127.0.0.1 (monitor.setup.validation)
                "max_concurrency": 4,
                "timeout_s": 60,
                "context_window": 32768,
                # logprobs show, at a first divergence, a near-tie or a confident token
                "extra_body": {"logprobs": True, "top_logprobs": 5},
                "notes": "Simulated by tierwatch's demo vendor: not a real model.",
            },
        )
        return obj

    base = endpoint("demo-base", "demo-base")
    fast = endpoint("demo-fast", "demo-fast")
    distilled = endpoint("demo-distilled", "demo-distilled")
    suite = sync_builtin_suite(name="coding")
    sync_builtin_suite(name="audit")
    pairs = []
    for name, fast_ep, claim in (
        ("demo-fast-vs-base", fast, 4.0),
        ("demo-distilled-vs-base", distilled, 6.0),
    ):
        pair, _ = Pair.objects.update_or_create(
            name=name,
            defaults={
                "fast": fast_ep,
                "base": base,
                "suite": suite,
                "claim_value": claim,
                "repeat": 2,
                "slo_ttft_ms": 1500,
                "slo_e2e_ms": 8000,
                "active": True,
            },
        )
        ensure_probe_schedule(pair_name=name, every_s=probe_every_s)
        ensure_probe_schedule(pair_name=name, every_s=audit_every_s, kind="audit")
        # the demo's tripwires collect their reference within minutes (DEMO_TRIPWIRE_EVERY_S)
        ensure_tripwire_schedule(pair_name=name, every_s=DEMO_TRIPWIRE_EVERY_S)
        pairs.append(pair)
    scenarios, _ = Pair.objects.update_or_create(  # the speed matrix (speed page); no audit:
        name="demo-fast-vs-base-scenarios",  # the verdict of the same endpoints is shared
        defaults={
            "fast": fast,
            "base": base,
            "suite": sync_builtin_suite(name="scenarios"),
            "claim_value": 4.0,
            "repeat": 2,
            "slo_ttft_ms": 1500,
            "slo_e2e_ms": 8000,
            "active": True,
        },
    )
    ensure_probe_schedule(pair_name=scenarios.name, every_s=max(60, probe_every_s))
    pairs.append(scenarios)
    capability, _ = Pair.objects.update_or_create(  # the "Is it worse?" page: checkable cases
        name="demo-distilled-long-tail",  # in the article's four long-tail categories
        defaults={
            "fast": distilled,
            "base": base,
            "suite": sync_benchmark_suite(name="long_tail_bench"),
            "claim_value": 6.0,
            "repeat": 1,
            "slo_ttft_ms": 1500,
            "slo_e2e_ms": 8000,
            "active": True,
        },
    )
    ensure_probe_schedule(pair_name=capability.name, every_s=max(60, probe_every_s))
    pairs.append(capability)
    ensure_blackbox_pair(vendor_url=vendor_url, suite=suite, every_s=max(60, probe_every_s))
    ensure_weekly_report_schedule()
    ensure_retention_schedule()
    channel, _ = Channel.objects.update_or_create(
        name="demo-email", defaults={"kind": "email", "target": "team@example.invalid"}
    )
    rule, _ = AlertRule.objects.update_or_create(
        name="demo-pass-rate-drop",
        defaults={
            "pair": None,
            "metric": "pass_rate",
            "tier": "fast",
            "op": "lt",
            "threshold": 0.8,
            "last_k": 2,
            "min_n": 5,
        },
    )
    rule.channels.set([channel])
    ensure_demo_user()
    return pairs


def ensure_demo_user() -> None:
    """The login the demo prints; a demo runs on the user's own machine only."""
    user_model = get_user_model()
    if not user_model.objects.filter(username=DEMO_USER).exists():
        user_model.objects.create_superuser(DEMO_USER, "demo@example.invalid", DEMO_PASSWORD)


BLACKBOX_PAIR = "demo-fast-vs-base-no-logprobs"


def ensure_blackbox_pair(*, vendor_url: str, suite: Suite, every_s: int) -> Pair:
    """A demo pair whose endpoints return no logprobs (the same models over the Anthropic
    protocol), so the demo shows the border-input tripwires (docs/measures.md): tripwires
    only, no probes or audits of its own (the pairs above measure the same models), and its
    discovery accepted here (the demo's vendor is local: no bill)."""
    ends = {}
    for model in ("demo-fast", "demo-base"):
        ends[model], _ = Endpoint.objects.update_or_create(
            name=f"{model}-no-logprobs",
            defaults={"protocol": "anthropic", "base_url": vendor_url, "model": model,
                      "api_key_env": "", "simulated": True, "local": True,
                      "max_concurrency": 4, "timeout_s": 60, "context_window": 32768,
                      "notes": "Simulated by tierwatch's demo vendor over the Anthropic "
                               "protocol (no logprobs): not a real model."},
        )  # fmt: skip
    pair, _ = Pair.objects.update_or_create(
        name=BLACKBOX_PAIR,
        defaults={"fast": ends["demo-fast"], "base": ends["demo-base"], "suite": suite,
                  "claim_value": 4.0, "repeat": 2, "slo_ttft_ms": 1500, "slo_e2e_ms": 8000,
                  "active": True},
    )  # fmt: skip
    TripwireState.objects.update_or_create(pair=pair, defaults={"border_allowed": True})
    ensure_tripwire_schedule(pair_name=pair.name, every_s=every_s)
    return pair
