"""The run summary: what a run's samples say, stored as JSON on the run (``Run.summary``) and
read by pages, alerts and reports, so none of them scans samples. This docstring is its spec.

Blocks (every one may be missing: a run still running, an older row; readers get empty values):

- ``min_n`` — the minimum n behind a percentile in this run (``TIERWATCH_MIN_N`` when it was
  summarised). Every reader of this run's percentiles uses ``RunSummary.min_n``.
- ``tiers`` — per tier ("fast", "base") a ``TierStats``: requests (n), successes (n_ok), errors
  by class, 429s apart (``rate_limited``), availability with 429s left out of both counts,
  TTFT/E2E/TPOT ``Percentiles`` (each with its n), decode speed (1000 / TPOT P50), completion
  tokens as the server counts them and as our tokenizer estimates them, samples whose two counts
  disagree, the unit-test pass rate with its n over the answered requests (a failed request is
  not a failed test), model ids and system fingerprints returned, and the top errors with
  their HTTP status and the vendor's message (``monitor.derived.failures``).
- ``similarity`` — ``fast_vs_base`` beside ``base_vs_base`` (the noise floor): Indel ratios of
  temperature-0 texts of the same case and repetition, only texts whose prompts were identical
  (``evals.similarity.comparable_pairs``). None when there is no pair.
- ``speedup`` — how many times faster the fast tier is: base/fast ratio of medians of TTFT, E2E
  and TPOT ("decode").
- ``by_scenario`` — per scenario: both tiers' timing percentiles and the speed-ups.
- ``skipped`` — cases left out because they do not fit an endpoint's context window (written
  when the run starts).
- ``load`` — load probes only: per concurrency level ("1", "4", …) and tier a ``LoadLevel``.
- ``verdict`` — audits only: the verdict (label, sentence, p and its Holm-adjusted value, n
  per tier, MMD² with its interval, the 80%-power effect, empty/failed rate tests,
  temperature-0 and capability evidence, and ``monitor``: the pair's e-detector decision after
  this audit with its error budget); the page tables read the stored mapping
  (``Verdict.data``).
- ``drift`` — probes only: the pair's CUSUM state after this run against its frozen baseline
  (state, per-series z and sum, h, the error budget).
- ``budget`` — probes of a pair with a daily budget: the cases the run took of those it could
  have, the day's limit, what was spent before it, its cost bound, and the reason when the
  budget limited it (``monitor.runs.budget``; written when the run starts).

``RunSummary.from_json`` reads every stored row as it is; ``to_json`` writes the same shape.
Blocks are written only through ``Run.objects.merge_summary`` (one writer, under a row lock).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from evals.latency import MIN_N


def _plain(value: Any) -> Any:
    """JSON's own types: dataclasses as dicts, tuples as lists (as JSON reads them back)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _flat(cls: Any, data: Mapping[str, Any] | None) -> Any:
    """A dataclass of plain values from a stored mapping; missing keys take the defaults."""
    data = data or {}
    return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@dataclass(frozen=True)
class Percentiles:
    n: int = 0
    too_small: bool = True
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Percentiles:
        return _flat(cls, data)

    def get(self, key: str) -> float | None:
        """A percentile by name ("p50", "p95"…)."""
        return getattr(self, key)


@dataclass(frozen=True)
class Timings:
    ttft_ms: Percentiles = field(default_factory=Percentiles)
    e2e_ms: Percentiles = field(default_factory=Percentiles)
    tpot_ms: Percentiles = field(default_factory=Percentiles)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Timings:
        data = data or {}
        return cls(**{f.name: Percentiles.from_json(data.get(f.name)) for f in fields(cls)})

    def metric(self, name: str) -> Percentiles:
        return getattr(self, name)


@dataclass(frozen=True)
class TierStats(Timings):
    n: int = 0
    n_ok: int = 0
    errors: Mapping[str, int] = field(default_factory=dict)
    rate_limited: int = 0
    availability: float | None = None
    decode_tps_p50: float | None = None
    tokens_server: int = 0
    tokens_estimated: int = 0
    token_mismatch: int = 0
    pass_rate: float | None = None
    n_tested: int = 0
    model_ids: tuple[str, ...] = ()
    fingerprints: tuple[str, ...] = ()
    served_tier: Mapping[str, Any] = field(default_factory=dict)  # evals.latency.downgrades
    # the most frequent failures, each {"class", "status", "message", "n"}, message in words
    # (``monitor.derived.failures``); () in runs summarised before it was stored
    top_errors: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> TierStats:
        data = dict(data or {})
        timings = Timings.from_json(data)
        plain = _flat(
            cls, {k: v for k, v in data.items() if k not in ("ttft_ms", "e2e_ms", "tpot_ms")}
        )
        return dataclasses.replace(
            plain,
            ttft_ms=timings.ttft_ms,
            e2e_ms=timings.e2e_ms,
            tpot_ms=timings.tpot_ms,
            model_ids=tuple(plain.model_ids),
            fingerprints=tuple(plain.fingerprints),
            top_errors=tuple(plain.top_errors),
        )

    @property
    def error_rate(self) -> float | None:
        """Every failed request (any class, 429s included) over all requests."""
        return (self.n - self.n_ok) / self.n if self.n else None

    @property
    def downgrade_rate(self) -> float | None:
        """Share of requests whose reported tier differs from the endpoint's expected tier."""
        return self.served_tier.get("downgrade_rate")

    @property
    def n_tier_reported(self) -> int:
        return self.served_tier.get("n_reported") or 0

    @property
    def n_served(self) -> int:
        """The n behind ``availability``: requests the vendor did not refuse with a 429."""
        return self.n - self.rate_limited


@dataclass(frozen=True)
class Similarity:
    n: int = 0
    mean_ratio: float | None = None
    median_ratio: float | None = None
    exact_rate: float | None = None
    prefix_rate: float | None = None
    first_div_p50: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Similarity | None:
        return _flat(cls, data) if data else None


@dataclass(frozen=True)
class SpeedUp:
    ttft: float | None = None
    e2e: float | None = None
    decode: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> SpeedUp:
        return _flat(cls, data)


@dataclass(frozen=True)
class ScenarioStats:
    fast: Timings = field(default_factory=Timings)
    base: Timings = field(default_factory=Timings)
    speedup: SpeedUp = field(default_factory=SpeedUp)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> ScenarioStats:
        data = data or {}
        return cls(
            fast=Timings.from_json(data.get("fast")),
            base=Timings.from_json(data.get("base")),
            speedup=SpeedUp.from_json(data.get("speedup")),
        )

    def tier(self, name: str) -> Timings:
        return getattr(self, name)


@dataclass(frozen=True)
class SkippedCase:
    case: str
    scenario: str = ""
    reason: str = ""


@dataclass(frozen=True)
class LoadLevel:
    n: int = 0
    n_ok: int = 0
    ttft_ms: Percentiles = field(default_factory=Percentiles)
    e2e_ms: Percentiles = field(default_factory=Percentiles)
    goodput: float | None = None
    wall_s: float | None = None
    throughput_rps: float | None = None
    # the most requests in flight at once: below the level when the shared vendor limit
    # (monitor.runs.ratelimit) held some back; None in load probes stored before it was counted
    in_flight_max: int | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> LoadLevel:
        data = dict(data or {})
        plain = _flat(cls, {k: v for k, v in data.items() if k not in ("ttft_ms", "e2e_ms")})
        return dataclasses.replace(
            plain,
            ttft_ms=Percentiles.from_json(data.get("ttft_ms")),
            e2e_ms=Percentiles.from_json(data.get("e2e_ms")),
        )


@dataclass(frozen=True)
class DriftSeries:
    z: float | None = None  # this run's standardised value (None: no value this run)
    s: float = 0.0  # the one-sided CUSUM sum after this run


@dataclass(frozen=True)
class Drift:
    """The pair's CUSUM state after this probe (``monitor.derived.evidence``): calibrating
    (collecting its baseline), ok, or drift (alarmed, until a person acknowledges)."""

    state: str = "calibrating"
    series: Mapping[str, DriftSeries] = field(default_factory=dict)
    drifting: tuple[str, ...] = ()
    h: float | None = None
    baseline_id: int | None = None
    baseline_runs: int = 0
    runs: int = 0  # probes folded in since the baseline was frozen
    new_alarm: bool = False
    reason: str = ""
    budget: str = ""
    cause: str = ""  # a tier change (which series) or "both tiers slowed: vendor incident"

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Drift | None:
        if not data or "state" not in data:  # an older snapshot: no stored state to read
            return None
        plain = _flat(cls, {k: v for k, v in data.items() if k != "series"})
        return dataclasses.replace(
            plain,
            drifting=tuple(plain.drifting),
            series={k: _flat(DriftSeries, v) for k, v in (data.get("series") or {}).items()},
        )

    @property
    def past_calibration(self) -> bool:
        return self.state != "calibrating"


@dataclass(frozen=True)
class Verdict:
    """The fields code reads; ``data`` is the whole stored block the verdict page lays out.

    ``p_value`` is the MMD test's own p, ``p_adjusted`` its Holm-adjusted p in the family
    {MMD, McNemar} (the one the label is decided on and the page shows); ``detectable_80`` the
    MMD² this run would catch with 80% power; ``monitor`` the pair's evidence across audits
    as of this run (``monitor.derived.evidence``)."""

    label: str = ""
    sentence: str = ""
    statistic: float | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    detectable_80: float | None = None
    min_detectable_effect: float | None = None  # the critical value: caught half the time
    alpha: float = 0.05
    data: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Verdict | None:
        if not data:
            return None
        plain = _flat(cls, {k: v for k, v in data.items() if k != "data"})
        return dataclasses.replace(plain, data=dict(data))

    def mmd(self, comparison: str) -> Mapping[str, Any]:
        """The stored MMD block of "fast_vs_base" ({} if absent)."""
        return (self.data.get("mmd") or {}).get(comparison) or {}

    @property
    def n_per_tier(self) -> int:
        """The smaller tier's sample count behind the fast-vs-base test."""
        return min(self.mmd("fast_vs_base").get("n_per_tier") or [0])

    @property
    def t0(self) -> Mapping[str, Any] | None:
        return self.data.get("t0")

    @property
    def capability(self) -> Mapping[str, Any] | None:
        return self.data.get("capability")

    @property
    def monitor(self) -> Mapping[str, Any]:
        """The e-detector's decision after this audit ({} before it was folded in)."""
        return self.data.get("monitor") or {}

    @property
    def conclusive(self) -> bool:
        return self.label != "inconclusive"


@dataclass(frozen=True)
class Budget:
    limit_usd: float = 0.0
    spent_before_usd: float = 0.0
    bound_usd: float = 0.0  # the planned cases' expected most (replies at their P90)
    taken: int = 0
    available: int = 0
    note: str = ""  # "limited by budget: k of n cases …" when it limited the run
    keys: tuple[str, ...] = ()  # the cases taken (a taken-over run resumes the same plan)

    @property
    def limited(self) -> bool:
        return self.note.startswith("limited by budget")


@dataclass(frozen=True)
class RunSummary:
    min_n: int = MIN_N
    tiers: Mapping[str, TierStats] = field(default_factory=dict)
    similarity: Mapping[str, Similarity | None] = field(default_factory=dict)
    speedup: SpeedUp = field(default_factory=SpeedUp)
    by_scenario: Mapping[str, ScenarioStats] = field(default_factory=dict)
    skipped: tuple[SkippedCase, ...] = ()
    load: Mapping[str, Mapping[str, LoadLevel]] | None = None
    verdict: Verdict | None = None
    drift: Drift | None = None
    budget: Budget | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> RunSummary:
        data = data or {}
        return cls(
            min_n=int(data.get("min_n") or MIN_N),
            tiers={t: TierStats.from_json(v) for t, v in (data.get("tiers") or {}).items()},
            similarity={
                k: Similarity.from_json(v) for k, v in (data.get("similarity") or {}).items()
            },
            speedup=SpeedUp.from_json(data.get("speedup")),
            by_scenario={
                k: ScenarioStats.from_json(v) for k, v in (data.get("by_scenario") or {}).items()
            },
            skipped=tuple(_flat(SkippedCase, s) for s in data.get("skipped") or ()),
            load={
                level: {t: LoadLevel.from_json(b) for t, b in tiers.items()}
                for level, tiers in data["load"].items()
            }
            if data.get("load")
            else None,
            verdict=Verdict.from_json(data.get("verdict")),
            drift=Drift.from_json(data.get("drift")),
            budget=_flat(Budget, data["budget"]) if data.get("budget") else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The stored shape; blocks never written stay absent."""
        out: dict[str, Any] = {}
        if self.tiers:
            out["min_n"] = self.min_n
            out["tiers"] = {t: _plain(v) for t, v in self.tiers.items()}
            out["similarity"] = {k: _plain(v) if v else None for k, v in self.similarity.items()}
            out["speedup"] = _plain(self.speedup)
            out["by_scenario"] = {k: _plain(v) for k, v in self.by_scenario.items()}
        if self.skipped:
            out["skipped"] = [_plain(s) for s in self.skipped]
        if self.load is not None:
            out["load"] = {
                lv: {t: _plain(b) for t, b in tiers.items()} for lv, tiers in self.load.items()
            }
        if self.verdict is not None:
            out["verdict"] = dict(self.verdict.data)
        if self.drift is not None:
            out["drift"] = _plain(self.drift)
        if self.budget is not None:
            out["budget"] = _plain(self.budget)
        return out

    def replace(self, **blocks: Any) -> RunSummary:
        """A copy with the named blocks replaced; a mapping value is read as stored JSON."""
        parsed = RunSummary.from_json(
            {
                **self.to_json(),
                **{k: v for k, v in blocks.items() if not dataclasses.is_dataclass(v)},
            }
        )
        typed: dict[str, Any] = {k: v for k, v in blocks.items() if dataclasses.is_dataclass(v)}
        return dataclasses.replace(parsed, **typed) if typed else parsed

    def tier(self, name: str) -> TierStats:
        """A tier's block (empty when the run has none)."""
        return self.tiers.get(name) or TierStats()

    def similar(self, comparison: str = "fast_vs_base") -> Similarity | None:
        return self.similarity.get(comparison)

    @property
    def has_tiers(self) -> bool:
        return bool(self.tiers)
