"""The reads that pages, reports and commands share.

Pages read each run's stored summary (``Run.summary_obj``, spec in ``monitor.derived.run_summary``)
and
never the samples to draw charts, so a pair page costs a bounded number of queries however many
samples the runs hold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.fields.json import KT
from django.http import Http404
from django.shortcuts import get_object_or_404

from monitor.models import (
    Alert,
    AlertTransition,
    Baseline,
    Endpoint,
    Pair,
    ProvenanceEvent,
    Run,
    RunKind,
    RunRollup,
    RunStatus,
    Sample,
)

# Fields a chart or a runs list needs; the rest of a run stays in the database.
RUN_LIST_FIELDS = (
    "id",
    "pair_id",
    "kind",
    "trigger",
    "status",
    "planned",
    "completed",
    "created_at",
    "started_at",
    "finished_at",
    "summary",
    "verdict",
    "error",
)
# Sample fields too large for a table of hundreds of rows; the sample page loads them.
SAMPLE_HEAVY_FIELDS = (
    "text",
    "reasoning_text",
    "chunk_gaps_ms",
    "chunk_tokens",
    "headers",
    "logprobs",
    "server_timings",
    "tests_detail",
    "error_message",
    "calls",
)


@dataclass
class PairOverview:
    """One row of the pairs overview: the pair, its newest run and its newest finished run.

    Two runs because the newest is often still running and has no summary yet; the numbers
    come from the newest run that finished.
    """

    pair: Pair
    last_run: Run | None
    last_done: Run | None
    open_alerts: int
    last_ended: Run | None = None  # newest probe or audit that ended, done or failed

    @property
    def failing(self) -> Run | None:
        """The newest ended run when it failed: what the overview shows in red until a run
        of the pair is done again."""
        run = self.last_ended
        return run if run is not None and run.status == RunStatus.FAILED else None

    @property
    def simulated(self) -> bool:
        return self.pair.simulated


def get_pair_for_user(user, name: str) -> Pair:
    """The named pair or a 404. Every signed-in user sees every pair (no per-team ownership
    yet); the user argument is where that check will go."""
    return get_object_or_404(Pair.objects.select_related("fast", "base", "suite"), name=name)


def pairs_overview() -> list[PairOverview]:
    """Every pair with its newest run, newest comparable finished run (``Run.objects.trend``:
    a temperature-0 probe, not an audit or a load probe) and open alerts: two queries."""
    newest = Run.objects.filter(pair=OuterRef("pk")).order_by("-created_at", "-id")
    newest_done = Run.objects.trend().filter(pair=OuterRef("pk")).order_by("-created_at", "-id")
    newest_ended = Run.objects.filter(
        pair=OuterRef("pk"),
        status__in=(RunStatus.DONE, RunStatus.FAILED),
        kind__in=(RunKind.PROBE, RunKind.AUDIT),
    ).order_by("-created_at", "-id")
    pairs = list(
        Pair.objects.select_related("fast", "base")
        .annotate(
            n_open_alerts=Count("alerts", filter=Q(alerts__resolved_at__isnull=True)),
            last_run_id=Subquery(newest.values("id")[:1]),
            last_done_id=Subquery(newest_done.values("id")[:1]),
            last_ended_id=Subquery(newest_ended.values("id")[:1]),
        )
        .order_by("name")
    )
    ids = {i for p in pairs for i in (p.last_run_id, p.last_done_id, p.last_ended_id)}
    runs = (
        Run.objects.only(*RUN_LIST_FIELDS)
        .defer("summary")  # cached: overview_cells
        .in_bulk([i for i in ids if i is not None])
    )
    return [
        PairOverview(
            pair=p,
            last_run=runs.get(p.last_run_id),
            last_done=runs.get(p.last_done_id),
            open_alerts=p.n_open_alerts,
            last_ended=runs.get(p.last_ended_id),
        )
        for p in pairs
    ]


def pair_runs(pair: Pair, limit: int = 50) -> list[Run]:
    """The pair's newest runs, newest first, without their samples."""
    return list(
        Run.objects.filter(pair=pair).only(*RUN_LIST_FIELDS).order_by("-created_at", "-id")[:limit]
    )


def pair_trend_runs(pair: Pair, limit: int = 50) -> list[Run]:
    """The pair's newest comparable finished runs (what the charts draw), newest first."""
    return list(
        Run.objects.trend()
        .filter(pair=pair)
        .only(*RUN_LIST_FIELDS)
        .order_by("-created_at", "-id")[:limit]
    )


def get_run(run_id: int) -> Run:
    """A run with its pair and suite (404 if missing), for its page."""
    return get_object_or_404(
        Run.objects.select_related("pair", "pair__fast", "pair__base", "suite"), pk=run_id
    )


SAMPLES_PER_PAGE = 50
OK = "ok"  # the error filter's value for answered requests


@dataclass
class SamplesPage:
    """One page of a run's samples under a filter (tier, case, error class), with the counts
    each filter value has among the run's samples, so a choice says how many it will show."""

    rows: list[Sample]
    number: int
    pages: int
    matching: int
    total: int
    tiers: list[tuple[str, int]]
    cases: list[tuple[str, int]]
    errors: list[tuple[str, int]]  # ("ok", n) first, then each error class, most frequent first


def run_samples_page(
    run: Run, *, tier: str = "", case: str = "", error: str = "", page: int = 1
) -> SamplesPage:
    """A run's samples in plan order, ``SAMPLES_PER_PAGE`` a page: an audit run has hundreds
    (600 rendered at once made a 31,527 px page taking 2.7 s). Counts come from one grouped
    query over the run's samples; rows are read for the page only, heavy text deferred."""
    everything = run.samples.all()
    grouped = list(
        everything.values("tier", "case__key", "ok", "error_class").annotate(n=Count("id"))
    )

    def counts(key) -> list[tuple[str, int]]:
        tally: Counter[str] = Counter()
        for row in grouped:
            tally[key(row)] += row["n"]
        return sorted(tally.items(), key=lambda kv: (-kv[1], kv[0]))

    errors = counts(lambda r: OK if r["ok"] else (r["error_class"] or "error"))
    chosen = everything
    if tier:
        chosen = chosen.filter(tier=tier)
    if case:
        chosen = chosen.filter(case__key=case)
    if error == OK:
        chosen = chosen.filter(ok=True)
    elif error:
        chosen = chosen.filter(ok=False, error_class="" if error == "error" else error)
    matching = chosen.count()
    pages = max(1, -(-matching // SAMPLES_PER_PAGE))
    number = min(max(1, page), pages)
    start = (number - 1) * SAMPLES_PER_PAGE
    rows = list(
        chosen.select_related("case")
        .defer(*SAMPLE_HEAVY_FIELDS, "case__messages", "case__unit_tests", "case__constraints")
        .order_by("seq", "id")[start : start + SAMPLES_PER_PAGE]
    )
    return SamplesPage(
        rows=rows,
        number=number,
        pages=pages,
        matching=matching,
        total=sum(r["n"] for r in grouped),
        tiers=sorted(counts(lambda r: r["tier"])),
        cases=sorted(counts(lambda r: r["case__key"])),
        errors=sorted(errors, key=lambda kv: (kv[0] != OK, -kv[1], kv[0])),
    )


def get_sample(sample_id: int) -> Sample:
    """One sample with everything, for its own page (404 if missing)."""
    return get_object_or_404(
        Sample.objects.select_related("run", "run__pair", "case", "endpoint"), pk=sample_id
    )


def open_alerts(pair: Pair | None = None, limit: int | None = 100) -> QuerySet[Alert]:
    """Unresolved alerts, newest first; of one pair when given; all of them with no limit."""
    qs = Alert.objects.filter(resolved_at__isnull=True).select_related(
        "rule", "pair", "run", "acknowledged_by"
    )
    if pair is not None:
        qs = qs.filter(pair=pair)
    qs = qs.order_by("-opened_at")
    return qs if limit is None else qs[:limit]


def has_active_run(runs: list[Run]) -> bool:
    """Whether a page showing these runs should keep polling."""
    return any(r.active for r in runs)


def endpoint_events(*, endpoints: Iterable[Endpoint], limit: int = 50) -> list[dict[str, Any]]:
    """When each returned model id and system fingerprint was first (and last) seen, per
    endpoint, oldest first. A value after the first one is a change of what the endpoint
    says it serves. Values that come back (A → B → A) are not new and show no second event.
    Read from ``ProvenanceEvent`` rows (upserted by ``monitor.derived.rollups`` when a run is
    summarised): one small query, however many samples the endpoints have."""
    by_id = {ep.pk: ep for ep in endpoints}
    rows = ProvenanceEvent.objects.filter(endpoint_id__in=by_id).order_by("first_seen", "id")
    events: list[Any] = []
    seen: Counter[Any] = Counter()
    for row in rows:
        key = (row.endpoint_id, row.kind)
        seen[key] += 1
        if seen[key] > limit:
            continue
        ep = by_id[row.endpoint_id]
        events.append(
            {
                "endpoint": ep.name,
                "simulated": ep.simulated,
                "what": "model id" if row.kind == "model_id" else "fingerprint",
                "value": row.value,
                "first_seen": row.first_seen,
                "last_seen": row.last_seen,
                "n": row.count,
                "run_id": row.run_id,
                "change": seen[key] > 1,
            }
        )
    return events


def audit_runs(pair: Pair, limit: int = 50) -> list[Run]:
    """The pair's newest audit runs, newest first (summaries included, samples not)."""
    return list(
        Run.objects.filter(pair=pair, kind=RunKind.AUDIT)
        .order_by("-created_at", "-id")
        .only(
            "id",
            "pair_id",
            "kind",
            "status",
            "created_at",
            "started_at",
            "finished_at",
            "summary",
            "verdict",
            "error",
            "planned",
            "completed",
        )[:limit]
    )


def verdict_history(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """One row per audit run with a verdict, oldest first, for the history chart."""
    rows = []
    for r in sorted(runs, key=lambda r: (r.created_at, r.id)):
        v = r.summary_obj.verdict
        if not v:
            continue
        when: datetime = r.finished_at or r.created_at
        rows.append(
            {
                "run_id": r.id,
                "at": when.isoformat(),
                "label": v.label,
                "statistic": v.statistic,
                "detectable_80": v.detectable_80,
                "p_value": v.p_adjusted if v.p_adjusted is not None else v.p_value,
                "alarm": bool(v.monitor.get("alarm")),
                "sentence": v.sentence,
            }
        )
    return rows


def latest_done_runs(
    kind: str = RunKind.PROBE, pairs: QuerySet[Pair] | None = None
) -> dict[int, Run]:
    """Per pair id its newest finished run of the kind (probes: ``Run.objects.trend``): one
    query with a correlated subquery, then one ``in_bulk``, however many pairs there are."""
    done = (
        Run.objects.trend()
        if kind == RunKind.PROBE
        else Run.objects.filter(kind=kind, status=RunStatus.DONE)
    )
    newest = done.filter(pair=OuterRef("pk")).order_by("-created_at", "-id").values("id")[:1]
    ids = (
        (pairs if pairs is not None else Pair.objects.all())
        .annotate(latest_id=Subquery(newest))
        .values_list("pk", "latest_id")
    )
    by_pair = {pair_id: run_id for pair_id, run_id in ids if run_id is not None}
    runs = Run.objects.only(*RUN_LIST_FIELDS).in_bulk(list(by_pair.values()))
    return {pair_id: runs[run_id] for pair_id, run_id in by_pair.items()}


# Alert states the API filters on (``AlertState``); a silence is not a state (``silenced_until``).
ALERT_STATES = ("firing", "acknowledged", "resolved")


def alert_state(alert: Alert) -> str:
    return alert.state


def alerts(*, state: str | None = None, pair: str | None = None) -> QuerySet[Alert]:
    """Alerts newest first, optionally of one state and one pair (by name)."""
    qs = Alert.objects.select_related("rule", "pair", "acknowledged_by").order_by(
        "-opened_at", "-id"
    )
    if state is not None:
        qs = qs.filter(state=state)
    if pair is not None:
        qs = qs.filter(pair__name=pair)
    return qs


def newest_trend_runs(pair_ids: Sequence[int], runs: int) -> Q:
    """Each pair's newest ``runs`` comparable runs (and any tied with the oldest of them), as a
    filter: one query for each pair's ``runs``-th newest creation time, an index lookup per
    pair. A window function over every comparable run of every pair sorted 120,000 runs at
    2.9 M samples (~0.8 s; docs/benchmarks.md, "Scale")."""
    nth = (
        Run.objects.trend()
        .filter(pair=OuterRef("pk"))
        .order_by("-created_at", "-id")
        .values("created_at")[runs - 1 : runs]
    )
    since = Pair.objects.filter(pk__in=pair_ids).annotate(since=Subquery(nth))
    wanted = Q(pk__in=[])
    for pair_id, when in since.values_list("pk", "since"):
        wanted |= Q(pair_id=pair_id) if when is None else Q(pair_id=pair_id, created_at__gte=when)
    return wanted


def trend_ttft_p50s(pair_ids: Sequence[int], runs: int) -> QuerySet:
    """Rows ``(pair_id, min_n, fast p50, fast n, base p50, base n)`` of each pair's newest
    ``runs`` comparable runs, newest first per pair: the TTFT trend line of the overview. It
    reads the five numbers through JSON paths, not whole summaries (decoding every summary in
    Python cost more than the rest of the overview)."""
    paths = [
        KT(f"summary__tiers__{tier}__ttft_ms__{key}")
        for tier in ("fast", "base")
        for key in ("p50", "n")
    ]
    return (
        Run.objects.trend()
        .filter(newest_trend_runs(pair_ids, runs))
        .order_by("pair_id", "-created_at", "-id")
        .values_list("pair_id", KT("summary__min_n"), *paths)
    )


def alert_transitions(pair: Pair, since: datetime) -> QuerySet:
    """Every state change of the pair's alerts since ``since`` (the timeline)."""
    return AlertTransition.objects.filter(alert__pair=pair, at__gte=since).select_related(
        "alert__rule", "user"
    )


def done_runs_since(pair: Pair, since: datetime, limit: int) -> list[Run]:
    """The pair's newest ``limit`` done runs since ``since``, oldest first (the timeline's
    verdict and drift events)."""
    runs = list(
        Run.objects.filter(pair=pair, status=RunStatus.DONE, created_at__gte=since).order_by(
            "-created_at", "-pk"
        )[:limit]
    )
    runs.reverse()
    return runs


def newest_trend_run(pair: Pair) -> Run | None:
    """The pair's newest comparable probe (its summary holds the stored drift state)."""
    return (
        Run.objects.trend()
        .filter(pair=pair)
        .order_by("-created_at", "-id")
        .only("id", "finished_at", "summary")
        .first()
    )


def newest_audits(pair_ids: Sequence[int]) -> list[tuple[int, int, datetime | None, Any]]:
    """(pair id, run id, finished at, summary) of each pair's newest finished audit: one query,
    an index lookup per pair for the newest audit's id, then those runs' rows only."""
    newest = (
        Run.objects.filter(pair=OuterRef("pk"), kind=RunKind.AUDIT, status=RunStatus.DONE)
        .order_by("-created_at", "-id")
        .values("id")[:1]
    )
    ids = Pair.objects.filter(pk__in=pair_ids).annotate(newest=Subquery(newest)).values("newest")
    return list(
        Run.objects.filter(id__in=ids).values_list("pair_id", "id", "finished_at", "summary")
    )


def probe_ttft_sketches(
    pair_ids: Sequence[int], since: datetime
) -> list[tuple[int, str, datetime, dict[str, int] | None]]:
    """(pair id, tier, at, TTFT sketch) of the done probes' rollups since ``since``: the rows a
    windowed percentile merges, no samples read."""
    return list(
        RunRollup.objects.filter(
            pair_id__in=pair_ids, kind=RunKind.PROBE, at__gte=since, run__status=RunStatus.DONE
        ).values_list("pair_id", "tier", "at", "ttft_sketch")
    )


def run_summaries(run_ids: Sequence[int]) -> dict[int | None, Any]:
    """Run id → its stored summary JSON."""
    return dict(Run.objects.filter(id__in=run_ids).values_list("id", "summary"))


def baseline_times(baseline_ids: Sequence[int]) -> dict[int, datetime]:
    """Baseline id → when it was frozen."""
    return dict(Baseline.objects.filter(id__in=baseline_ids).values_list("id", "set_at"))


def case_samples(run: Run, case_key: str) -> list[Sample]:
    """The run's successful samples of one case, in plan order (the diff viewer)."""
    return list(
        Sample.objects.filter(run=run, case__key=case_key, ok=True)
        .select_related("case", "endpoint")
        .order_by("repetition", "batch")
    )


# The pair page: a date range and older pages ------------------------------------------------

RUNS_PER_PAGE = 50
RANGE_RUNS_MAX = 500  # runs a chart over a chosen range draws at most (the newest of them)


def pair_runs_between(
    pair: Pair,
    since: datetime | None,
    until: datetime | None,
    page: int = 1,
    per_page: int = RUNS_PER_PAGE,
) -> tuple[list[Run], bool]:
    """One page of the pair's runs created in [since, until), newest first, and whether an
    older page exists (one row more is read to know)."""
    runs = Run.objects.filter(pair=pair)
    if since:
        runs = runs.filter(created_at__gte=since)
    if until:
        runs = runs.filter(created_at__lt=until)
    start = (max(page, 1) - 1) * per_page
    rows = list(
        runs.only(*RUN_LIST_FIELDS).order_by("-created_at", "-id")[start : start + per_page + 1]
    )
    return rows[:per_page], len(rows) > per_page


def pair_trend_runs_between(
    pair: Pair, since: datetime | None, until: datetime | None, limit: int = RANGE_RUNS_MAX
) -> list[Run]:
    """The comparable finished runs the charts draw over a chosen range, newest first."""
    runs = Run.objects.trend().filter(pair=pair)
    if since:
        runs = runs.filter(created_at__gte=since)
    if until:
        runs = runs.filter(created_at__lt=until)
    return list(runs.only(*RUN_LIST_FIELDS).order_by("-created_at", "-id")[:limit])


def run_sketches(run_ids: Iterable[int]) -> dict[tuple[int, str], dict[str, dict[str, int]]]:
    """(run id, tier) → {"ttft_ms": counts, "e2e_ms": counts}: the runs' stored latency
    sketches (``monitor.derived.rollups``), for percentiles over windows of runs."""
    rows = RunRollup.objects.filter(run_id__in=list(run_ids)).values_list(
        "run_id", "tier", "ttft_sketch", "e2e_sketch"
    )
    return {
        (run_id, tier): {"ttft_ms": ttft or {}, "e2e_ms": e2e or {}}
        for run_id, tier, ttft, e2e in rows
    }


def episode_samples(run: Run, case_key: str, repetition: int = 0) -> list[Sample]:
    """An agent task's episodes in a run, both tiers (batch 0), each in its order of turns and
    steps (404 when the run played no such task)."""
    rows = list(
        run.samples.filter(case__key=case_key, repetition=repetition, batch=0)
        .select_related("case", "endpoint")
        .order_by("tier", "turn", "step")
    )
    if not rows:
        raise Http404(f"run {run.pk} played no episode of {case_key!r}")
    return rows


def run_episodes(run: Run) -> list[Sample]:
    """The last sample of each agent episode of a run (it carries the episode and its score),
    by case, repetition and tier."""
    return list(
        run.samples.filter(tests_detail__kind="agent")
        .select_related("case")
        .defer("text", "reasoning_text", "chunk_gaps_ms", "chunk_tokens", "logprobs", "headers")
        .order_by("case__key", "repetition", "tier")
    )
