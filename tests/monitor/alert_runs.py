"""Runs with a summary shaped for alert-rule tests (TTFT, n, similarity per run)."""

from __future__ import annotations

from monitor.derived.run_summary import SpeedUp
from monitor.models import Pair, Run
from tests import factories


def summary(*, ttft: float | None = 300.0, n: int = 20, similarity: float = 0.98) -> dict:
    tier = factories.tier(n, ttft=(ttft, ttft), pass_rate=1.0, n_tested=n)
    return factories.summary(
        fast=tier, base=tier, similarity=similarity, speedup=SpeedUp(ttft=2.0, e2e=1.5, decode=1.2)
    )


def add_run(pair: Pair, status: str = "done", **kwargs) -> Run:
    return Run.objects.create(pair=pair, suite=pair.suite, status=status, summary=summary(**kwargs))
