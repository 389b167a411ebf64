"""tierwatch's science: measuring, comparing and judging LLM tiers.

Plain Python over plain data. Nothing here imports Django or ``monitor``: a data scientist can
use every function from a script or a notebook.

The public API is ``__all__`` below: the client, the plan, the records and the statistics the
product calls (``monitor`` and ``benchmarks`` use these names). The submodules stay importable
for the rest (``evals.stats.cusum``, ``evals.suites``, ``evals.vendors``); modules whose name
starts with an underscore (``evals._wire``, ``evals._sse``: the client's transports and SSE
parsing) are internals that may change without notice, httpx's convention.

The names resolve on first use (PEP 562 ``__getattr__``), so ``import evals.records`` stays
cheap: numpy, scipy and the HTTP clients load only when a name that needs them is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name → the module that defines it
_HOME = {
    # the client
    "make_client": "evals.client",
    "stream_chat": "evals.client",
    "RETRIED_MARKER": "evals.client",
    # the plan
    "plan_run": "evals.plan",
    "execute_plan": "evals.plan",
    "PlannedRequest": "evals.plan",
    "AUDIT_TIERS": "evals.plan",
    "STREAMS": "evals.plan",
    # the records
    "TIERS": "evals.records",
    "ChatRequest": "evals.records",
    "EndpointSpec": "evals.records",
    "TimingRecord": "evals.records",
    "CaseSpec": "evals.records",
    "SuiteSpec": "evals.records",
    "storable": "evals.records",
    "get_suite": "evals.suites",
    # timing statistics
    "percentiles": "evals.latency",
    "summarise_tier": "evals.latency",
    "availability": "evals.latency",
    "downgrades": "evals.latency",
    "goodput": "evals.latency",
    "output_tps": "evals.latency",
    "min_n_for": "evals.latency",
    "MIN_N": "evals.latency",
    # text comparison
    "compare_pairs": "evals.similarity",
    "first_divergence": "evals.similarity",
    # the verdict
    "mmd_test": "evals.stats.mmd",
    "MMDResult": "evals.stats.mmd",
    "judge": "evals.stats.labels",
    "Judgement": "evals.stats.labels",
    "Label": "evals.stats.labels",
    "LABELS": "evals.stats.labels",
    "LABEL_WORDS": "evals.stats.labels",
    "TierCounts": "evals.stats.labels",
    "effect_size": "evals.stats.effect",
    "base_stability": "evals.stats.stability",
    "sequential_test": "evals.stats.sequential",
    # capability and speed-up claims
    "paired_table": "evals.stats.capability",
    "PairedTable": "evals.stats.capability",
    "pass_at_k": "evals.stats.capability",
    "run_unit_tests": "evals.sandbox",
    "cluster_ratio_ci": "evals.stats.speedup_runs",
    "assess_claim": "evals.stats.speedup_runs",
}

__all__ = [
    "AUDIT_TIERS",
    "CaseSpec",
    "ChatRequest",
    "EndpointSpec",
    "Judgement",
    "LABELS",
    "LABEL_WORDS",
    "Label",
    "MIN_N",
    "MMDResult",
    "PairedTable",
    "PlannedRequest",
    "RETRIED_MARKER",
    "STREAMS",
    "SuiteSpec",
    "TIERS",
    "TierCounts",
    "TimingRecord",
    "assess_claim",
    "availability",
    "base_stability",
    "cluster_ratio_ci",
    "compare_pairs",
    "downgrades",
    "effect_size",
    "execute_plan",
    "first_divergence",
    "get_suite",
    "goodput",
    "judge",
    "make_client",
    "min_n_for",
    "mmd_test",
    "output_tps",
    "paired_table",
    "pass_at_k",
    "percentiles",
    "plan_run",
    "run_unit_tests",
    "sequential_test",
    "storable",
    "stream_chat",
    "summarise_tier",
]

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from evals.client import RETRIED_MARKER, make_client, stream_chat
    from evals.latency import (
        MIN_N,
        availability,
        downgrades,
        goodput,
        min_n_for,
        output_tps,
        percentiles,
        summarise_tier,
    )
    from evals.plan import AUDIT_TIERS, STREAMS, PlannedRequest, execute_plan, plan_run
    from evals.records import (
        TIERS,
        CaseSpec,
        ChatRequest,
        EndpointSpec,
        SuiteSpec,
        TimingRecord,
        storable,
    )
    from evals.sandbox import run_unit_tests
    from evals.similarity import compare_pairs, first_divergence
    from evals.stats.capability import PairedTable, paired_table, pass_at_k
    from evals.stats.effect import effect_size
    from evals.stats.labels import LABEL_WORDS, LABELS, Judgement, Label, TierCounts, judge
    from evals.stats.mmd import MMDResult, mmd_test
    from evals.stats.sequential import sequential_test
    from evals.stats.speedup_runs import assess_claim, cluster_ratio_ci
    from evals.stats.stability import base_stability
    from evals.suites import get_suite


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'evals' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
