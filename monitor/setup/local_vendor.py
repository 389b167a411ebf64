"""The local llama.cpp vendor (``evals.vendors.llamacpp.vendor``) in the database.

One place for what ``local_vendor up|down`` and ``demo --engine llama.cpp`` both do: one
Endpoint per running target and one Pair per vendor pair whose two ends run (``register``),
pairs switched off when their servers stop so schedules do not probe dead ports
(``deactivate``), and the demo's schedules over those pairs (``ensure_local_demo``).
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import Q

from evals.vendors.llamacpp import vendor
from monitor.models import Endpoint, Pair
from monitor.setup.demo import ensure_demo_user
from monitor.setup.schedules import (
    ensure_probe_schedule,
    ensure_retention_schedule,
    ensure_tripwire_schedule,
    ensure_weekly_report_schedule,
)
from monitor.setup.suites import sync_builtin_suite

NOTE = "Real llama.cpp server on this machine (evals.vendors.llamacpp.vendor): "


@transaction.atomic
def register(*, urls: dict[str, str], ctx: int, suite_name: str) -> list[Pair]:
    """Endpoints for the running targets, pairs whose base and fast are both among them.

    Idempotent: ``update_or_create`` by name, so a restart's new ports replace the old ones.
    ``max_concurrency`` 1: each server has one slot (``-np 1``); more would only queue.
    """
    endpoints = {}
    for name, url in urls.items():
        target = vendor.TARGETS[name]
        spec = vendor.endpoint_spec(name, url)
        endpoints[name], _ = Endpoint.objects.update_or_create(
            name=name,
            defaults={
                "protocol": spec.protocol,
                "base_url": url,
                "model": spec.model,
                "api_key_env": "",
                "simulated": False,
                "local": True,  # a server on 127.0.0.1 (monitor.setup.validation)
                "max_concurrency": 1,
                "timeout_s": 300,
                "context_window": ctx,
                "extra_body": spec.extra_body,
                "notes": NOTE + target.mechanism,
            },
        )
    suite = sync_builtin_suite(name=suite_name)
    pairs = []
    for pair_spec in vendor.PAIRS:
        if pair_spec.base in endpoints and pair_spec.fast in endpoints:
            pair, _ = Pair.objects.update_or_create(
                name=pair_spec.name,
                defaults={
                    "base": endpoints[pair_spec.base],
                    "fast": endpoints[pair_spec.fast],
                    "suite": suite,
                    "active": True,
                    # one repetition, not the default 2: on one llama.cpp thread each costs
                    # minutes a probe; the audits measure the noise floor instead
                    "repeat": 1,
                },
            )
            pairs.append(pair)
    return pairs


def deactivate(*, targets: list[str] | None = None) -> int:
    """Deactivate the local pairs with an end among ``targets`` (default: all); return how many.

    Why: their servers are stopped, and a scheduled probe of a dead port would only record
    connection errors as if the vendor had failed.
    """
    names = targets or list(vendor.TARGETS)
    local = Pair.objects.filter(name__in=[p.name for p in vendor.PAIRS])
    return local.filter(Q(fast__name__in=names) | Q(base__name__in=names)).update(active=False)


def ensure_local_demo(
    *, urls: dict[str, str], ctx: int, suite_name: str, probe_every_s: int, audit_every_s: int
) -> list[Pair]:
    """The demo over the real engines: ``register``, probe and audit schedules per pair, the
    weekly report, the demo login. The simulated demo's pairs are switched off meanwhile (their
    vendor is not running); ``ensure_demo`` switches them on again."""
    pairs = register(urls=urls, ctx=ctx, suite_name=suite_name)
    sync_builtin_suite(name="audit")
    Pair.objects.filter(Q(fast__simulated=True) | Q(base__simulated=True)).update(active=False)
    for pair in pairs:
        ensure_probe_schedule(pair_name=pair.name, every_s=probe_every_s)
        ensure_probe_schedule(pair_name=pair.name, every_s=audit_every_s, kind="audit")
        ensure_tripwire_schedule(pair_name=pair.name)  # llama-server returns logprobs
    ensure_weekly_report_schedule()
    ensure_retention_schedule()
    ensure_demo_user()
    return pairs
