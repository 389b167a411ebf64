"""What a pair costs a month, per kind of run, under its own schedules and two fixed schemes.

Why: "audit every hour" was the heavy part of the bill (an audit is hundreds of long answers)
and it is what tripwires replace; the reader should see the trade in requests, tokens and
dollars before choosing a cadence. Three schemes side by side:

- **as scheduled**: the pair's enabled schedule rows (``pair_defaults.schedules`` and its
  tripwire row);
- **new default**: audits every ``AUDIT_EVERY_H`` hours, tripwires hourly (``pair_defaults``,
  ``schedules.TRIPWIRE_EVERY_S``);
- **hourly audits**: the former scheme, audits hourly, no tripwires.

The two fixed schemes probe at one cadence, stated as ``probe_every_s``: the pair's own probe
schedule, or ``PROBE_EVERY_MIN`` when it has none. Like with like: the trade they show is audits
against tripwires, and a probe cadence that differed between them (the pair's own in one,
15 minutes in the other) would move the totals for a reason that is neither.

A month is ``HOURS_PER_MONTH`` (365 × 24 / 12). Per run, a probe's and an audit's requests and
tokens are the mean of the pair's newest ``MEASURED_RUNS`` finished runs of that kind (their
rollups: what the vendor billed); a kind never run has no figure ("not measured yet") rather
than a guess. A tripwire run's size is known from its design: per tier the logprob prompts ×
repeats, or, for a tier whose endpoint returns no logprobs, border inputs × samples
(``monitor.runs.border``), each ``border.PROMPT_TOKENS`` in and one token out; the border
discovery is a one-off, stated apart. Dollars from ``runs.budget.sample_cost`` at the
endpoints' prices (None where an endpoint has none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Avg, Count

from evals.stats import tripwire as tripwire_stats
from monitor.models import Pair, Run, RunKind, RunRollup, RunStatus, TripwireState
from monitor.runs import border
from monitor.runs.budget import sample_cost
from monitor.setup import pair_defaults
from monitor.setup.schedules import TRIPWIRE_EVERY_S

HOURS_PER_MONTH = 365 * 24 / 12
MEASURED_RUNS = 10
KINDS = (RunKind.TRIPWIRE, RunKind.PROBE, RunKind.AUDIT)


@dataclass(frozen=True)
class PerRun:
    """One run's size, both tiers together; ``usd`` None when unpriced."""

    requests: float
    prompt_tokens: float
    completion_tokens: float
    usd: float | None
    source: str


def _measured(pair: Pair, kind: str) -> PerRun | None:
    runs = list(
        Run.objects.filter(pair=pair, kind=kind, status=RunStatus.DONE)
        .order_by("-id")
        .values_list("id", flat=True)[:MEASURED_RUNS]
    )
    if not runs:
        return None
    usd: float | None = 0.0
    requests = prompt = completion = 0.0
    endpoints = {"fast": pair.fast, "base": pair.base}
    for row in (
        RunRollup.objects.filter(run_id__in=runs)
        .values("tier")
        .annotate(
            n=Avg("n"),
            p=Avg("prompt_tokens"),
            c=Avg("completion_tokens"),
            k=Avg("cached_tokens"),
            runs=Count("run"),
        )
    ):
        share = row["runs"] / len(runs)  # a tier missing from a run counts as 0 there
        requests += row["n"] * share
        prompt += row["p"] * share
        completion += row["c"] * share
        cost = sample_cost(
            endpoints[row["tier"]], round(row["p"]), round(row["c"]), round(row["k"])
        )
        usd = None if cost is None or usd is None else usd + cost * share
    return PerRun(requests, prompt, completion, usd, f"mean of the newest {len(runs)} runs")


def _tripwire(pair: Pair) -> tuple[PerRun, dict[str, Any] | None]:
    """A tripwire run's size from its design, and the border discovery's one-off cost."""
    state = TripwireState.objects.filter(pair=pair).first()
    tiers = state.tiers if state else {}
    sizes = border.Sizes()
    requests = 0
    usd: float | None = 0.0
    discovery: dict[str, Any] = {"requests": 0, "usd": 0.0}
    modes = []
    for tier, endpoint in (("fast", pair.fast), ("base", pair.base)):
        blocky = endpoint.protocol == "anthropic" or tiers.get(tier, {}).get("mode") == "border"
        n = (
            sizes.per_run
            if blocky
            else len(tripwire_stats.DEFAULT_PROMPTS) * (tripwire_stats.DEFAULT_REPEATS)
        )
        modes.append(f"{tier}: {'border inputs' if blocky else 'logprobs'}")
        requests += n
        each = border.query_cost(endpoint)
        usd = None if each is None or usd is None else usd + each * n
        if blocky and not tiers.get(tier, {}).get("border"):
            one = border.discovery_cost(endpoint, sizes)
            discovery["requests"] += one["requests"]
            discovery["usd"] = (
                None
                if one["usd"] is None or discovery["usd"] is None
                else discovery["usd"] + one["usd"]
            )
    per = PerRun(requests, requests * border.PROMPT_TOKENS, requests, usd, "; ".join(modes))
    return per, discovery if discovery["requests"] else None


def _scheme(every: Mapping[Any, int | None], sizes: Mapping[Any, PerRun | None]) -> dict[str, Any]:
    rows = []
    total_usd: float | None = 0.0
    totals = {"requests": 0.0, "tokens": 0.0}
    for kind in KINDS:
        seconds, per = every.get(kind), sizes.get(kind)
        runs = HOURS_PER_MONTH * 3600 / seconds if seconds else 0.0
        row: dict[str, Any] = {"kind": kind, "every_s": seconds, "runs": runs, "measured": per}
        if per is not None:
            row["requests"] = runs * per.requests
            row["tokens"] = runs * (per.prompt_tokens + per.completion_tokens)
            row["usd"] = None if per.usd is None else runs * per.usd
            totals["requests"] += row["requests"]
            totals["tokens"] += row["tokens"]
            if row["usd"] is None or total_usd is None:
                total_usd = None
            else:
                total_usd += row["usd"]
        rows.append(row)
    return {"rows": rows, **totals, "usd": total_usd}


def schemes(pair: Pair) -> dict[str, Any]:
    """The pair's monthly cost under its schedules, the new default and hourly audits; the two
    fixed schemes at one probe cadence (``probe_every_s``)."""
    tripwire, discovery = _tripwire(pair)
    sizes = {
        RunKind.TRIPWIRE: tripwire,
        RunKind.PROBE: _measured(pair, RunKind.PROBE),
        RunKind.AUDIT: _measured(pair, RunKind.AUDIT),
    }
    scheduled = pair_defaults.schedules(pair.name)
    scheduled[RunKind.TRIPWIRE] = pair_defaults.tripwire_every(pair.name)
    probe = scheduled.get(RunKind.PROBE) or pair_defaults.PROBE_EVERY_MIN * 60
    default = {
        RunKind.PROBE: probe,
        RunKind.AUDIT: pair_defaults.AUDIT_EVERY_H * 3600,
        RunKind.TRIPWIRE: TRIPWIRE_EVERY_S,
    }
    hourly = {RunKind.PROBE: probe, RunKind.AUDIT: 3600, RunKind.TRIPWIRE: None}
    return {
        "schemes": [
            {"name": "as scheduled", **_scheme(scheduled, sizes)},
            {"name": "new default", **_scheme(default, sizes)},
            {"name": "hourly audits, no tripwires", **_scheme(hourly, sizes)},
        ],
        "per_run": sizes,
        "probe_every_s": probe,  # both fixed schemes' probes
        "discovery": discovery,
        "hours": HOURS_PER_MONTH,
    }


# Words ---------------------------------------------------------------------------------------


def _count(x: float) -> str:
    """A count for people: 1,234 · 12.3 k · 4.56 M."""
    if x >= 1e6:
        return f"{x / 1e6:.3g} M"
    if x >= 1e4:
        return f"{x / 1e3:.3g} k"
    return f"{x:,.0f}"


def _usd(value: float | None) -> str:
    if value is None:
        return "not priced"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


def words(row: dict[str, Any]) -> str:
    """A scheme's or a kind's month: requests · tokens · dollars."""
    return (
        f"{_count(row['requests'])} requests · {_count(row['tokens'])} tokens · {_usd(row['usd'])}"
    )


def cell(row: dict[str, Any]) -> str:
    if not row["runs"]:
        return "not scheduled"
    if row["measured"] is None:
        return f"{row['runs']:,.0f} runs; not measured yet"
    return words(row)


SLA_TITLE = "Expected cost per month per pair (today's schedules and prices, not this period's)"
SLA_HEADER = ["pair", "scheme", "tripwires", "probes", "audits", "total"]


def sla_table(pairs: list[Pair]) -> tuple[str, list[str], list[list[str]]]:
    """The SLA report's own block: per pair its schedules beside hourly audits."""
    rows = []
    for pair in pairs:
        for scheme in schemes(pair)["schemes"]:
            if scheme["name"] == "new default":
                continue
            rows.append(
                [pair.name, scheme["name"], *(cell(r) for r in scheme["rows"]), words(scheme)]
            )
    return SLA_TITLE, SLA_HEADER, rows
