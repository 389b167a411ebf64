"""Runs: create, plan, measure (store every sample as it completes), summarise from the
stored samples, mark done or failed. ``monitor.runs.pipeline`` puts these steps in order.

The summary is always recomputed from the rows in the database, never from memory, so a page,
a report and a re-summarise after a crash all agree (its shape: ``monitor.derived.run_summary``).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import F
from django.db.models.functions import Greatest

from evals.constraints import check_all
from evals.plan import AUDIT_TIERS, STREAMS, PlannedRequest, execute_plan, plan_run
from evals.records import ChatRequest, TimingRecord, storable
from evals.sandbox import extract_code, run_unit_tests
from evals.scrub import scrub_value
from evals.suites import context_needed, fill_nonce, prompt_estimate
from monitor.derived import failures
from monitor.derived.run_summary import RunSummary
from monitor.derived.summary import summarise_samples
from monitor.judging import capability
from monitor.models import Case, Endpoint, Pair, Run, RunKind, RunStatus, RunTrigger, Sample
from monitor.runs import budget, episodes, heartbeat
from monitor.runs.ratelimit import RunGate
from monitor.setup.suites import audit_suite

log = logging.getLogger(__name__)

AUDIT_SAMPLES_PER_PROMPT = 10
AUDIT_TEMPERATURE = 1.0


def create_run(
    *,
    pair: Pair,
    kind: str = RunKind.PROBE,
    trigger: str = RunTrigger.MANUAL,
    repeat: int | None = None,
    seed: int | None = None,
) -> Run:
    if kind == RunKind.AUDIT:
        repeat = repeat or AUDIT_SAMPLES_PER_PROMPT
        temperature = AUDIT_TEMPERATURE
    else:
        repeat = repeat or pair.repeat
        temperature = 0.0
    return Run.objects.create(
        pair=pair,
        suite=audit_suite(pair) if kind == RunKind.AUDIT else pair.suite,
        kind=kind,
        trigger=trigger,
        repeat=repeat,
        temperature=temperature,
        seed=seed if seed is not None else random.randrange(2**31),
    )


class RunAlreadyQueued(Exception):
    """A run of the pair and kind is queued already: a second would only wait behind it, and
    a flood of them (a script, a fuzzer, an impatient click) starves the scheduled probes."""

    def __init__(self, run: Run) -> None:
        self.run = run
        super().__init__(
            f"{run.kind} run {run.pk} of {run.pair.name} is queued already; wait for it to start"
        )


def queue_run(
    *,
    pair: Pair,
    kind: str = RunKind.PROBE,
    trigger: str = RunTrigger.MANUAL,
    repeat: int | None = None,
    seed: int | None = None,
) -> Run:
    """``create_run`` unless a run of the pair and kind is still queued
    (``RunAlreadyQueued``): the one way the buttons, the API, the schedules and ``manage.py
    probe`` start a run. The pair's row is locked while checking, so two requests at once
    cannot both pass (PostgreSQL; SQLite serialises writers anyway)."""
    with transaction.atomic():
        Pair.objects.select_for_update().filter(pk=pair.pk).exists()
        queued = (
            Run.objects.select_related("pair")
            .filter(pair=pair, kind=kind, status=RunStatus.QUEUED)
            .order_by("id")
            .first()
        )
        if queued is not None:
            raise RunAlreadyQueued(queued)
        return create_run(pair=pair, kind=kind, trigger=trigger, repeat=repeat, seed=seed)


def split_by_context(
    cases: Iterable[Case], endpoints: Sequence[Endpoint]
) -> tuple[list[Case], list[dict[str, str]]]:
    """Cases that fit every endpoint's context window (``evals.suites.context_needed``), and
    the others with a reason. An endpoint without a window runs all. An agent task's last
    request carries every turn's messages and the tools (``budget.agent_prompt``; its tool
    results come on top, so this is the least it needs)."""
    kept, skipped = [], []
    for case in cases:
        need = context_needed(case.messages, case.max_tokens, case.scenario)
        prompt = prompt_estimate(case.messages)
        if case.agent:
            prompt = budget.agent_prompt(case)
            need = max(need, prompt + case.max_tokens)
        small = [ep for ep in endpoints if ep.context_window and need > ep.context_window]
        if not small:
            kept.append(case)
            continue
        windows = ", ".join(f"{ep.name}: {ep.context_window:,}" for ep in small)
        skipped.append(
            {
                "case": case.key,
                "scenario": case.scenario,
                "reason": f"needs ~{need:,} tokens (prompt ~{prompt:,} estimated + max_tokens "
                f"{case.max_tokens}) but the context window is smaller ({windows})",
            }
        )
    return kept, skipped


def select_cases(run: Run, limit: int | None) -> list[Case]:
    """The run's cases: those that fit both endpoints' context windows (the others are kept in
    the summary's ``skipped`` block, shown on the speed page), sampled down to ``limit``; with
    a daily budget, the cases it affords (``monitor.runs.budget``)."""
    pair = run.pair
    cases, skipped = split_by_context(run.suite.cases.order_by("key"), [pair.fast, pair.base])
    if skipped:
        Run.objects.merge_summary(run.id, skipped=skipped)
    if run.kind in budget.SPENDING and pair.daily_budget_usd is not None:
        cases, block = budget.take_cases(run, cases, limit)  # rotating, stratified, capped
        Run.objects.merge_summary(run.id, budget=block)
        return cases
    if limit and limit < len(cases):
        cases = sorted(random.Random(run.seed).sample(cases, limit), key=lambda c: c.key)
    return cases


def run_tiers(run: Run) -> tuple[tuple[str, int], ...]:
    """Fast and base, one batch each, for every kind of run: an audit's second in-plan base
    batch could detect nothing (``evals.plan.AUDIT_TIERS`` says why)."""
    return AUDIT_TIERS if run.kind == RunKind.AUDIT else (("fast", 0), ("base", 0))


def claim_run(run_id: int) -> int | None:
    """Only one worker executes a run, even if the task is delivered twice (acks_late); an
    abandoned running run may be claimed again (``heartbeat.claim``). The attempt number, or
    None when the run is not this delivery's to execute."""
    return heartbeat.claim(run_id)


def not_yet_stored(
    run: Run, plan: list[PlannedRequest], agent_keys: set[str] | None = None
) -> list[PlannedRequest]:
    """A taken-over run resumes: requests already stored, keyed by (case, tier, batch,
    repetition), are not sent again, so no sample is duplicated. An agent episode counts as
    stored once closed; one its lost worker left open is dropped and played again
    (``monitor.runs.episodes``)."""
    agent_keys = agent_keys or set()
    if agent_keys:
        episodes.drop_unclosed(run, agent_keys)
    stored = set(
        run.samples.exclude(case__key__in=agent_keys).values_list(
            "case__key", "tier", "batch", "repetition"
        )
    ) | (episodes.closed(run) if agent_keys else set())
    return [p for p in plan if (p.case_key, p.tier, p.batch, p.repetition) not in stored]


def measure(*, run_id: int, cases_limit: int | None = None) -> None:
    """Plan a claimed run and send what is not stored yet, storing each sample as it
    completes."""
    run = Run.objects.select_related("pair__fast", "pair__base", "suite").get(id=run_id)
    check_keys(run.pair)
    cases = select_cases(run, cases_limit or run.pair.cases_per_run)
    plan = plan_run([c.key for c in cases], repeat=run.repeat, seed=run.seed, tiers=run_tiers(run))
    mine = Run.objects.filter(id=run.id, attempt=run.attempt)  # writes only while it is ours
    # requests: an agent task's episode counts at its expected requests (``budget``)
    by_key = {c.key: c for c in cases}
    expected = {k: budget.agent_requests(c) for k, c in by_key.items() if c.agent}
    mine.update(planned=sum(expected.get(p.case_key, 1) for p in plan))
    fast, base = run.pair.fast.max_concurrency, run.pair.base.max_concurrency
    with STREAMS.reserve(
        fast + base,
        settings.TIERWATCH_MAX_STREAMS,
        on_wait=partial(heartbeat.beat, run),
        what=f" (max_concurrency: fast {fast} + base {base})",
    ):
        _execute(run, by_key, not_yet_stored(run, plan, set(expected)))
    completed = run.samples.count()  # exact even after a save was retried
    mine.update(completed=completed, planned=Greatest("planned", completed))


def _mine(run_id: int, attempt: int | None):
    """The run while it is still running under this attempt (a reaped or taken-over run is not
    marked by the worker that lost it)."""
    rows = Run.objects.filter(id=run_id, status__in=(RunStatus.RUNNING, RunStatus.EVALUATING))
    return rows if attempt is None else rows.filter(attempt=attempt)


def mark_done(*, run_id: int, attempt: int | None = None) -> None:
    _mine(run_id, attempt).end(RunStatus.DONE)


def mark_failed(*, run_id: int, exc: BaseException, attempt: int | None = None) -> None:
    """The run says why it failed; samples already stored stay. A failure that is already in
    words (the vendor's, a missing key, the database's outage) is kept as it is, without a
    Python class name. After an outage the mark waits for the database again (up to
    ``TIERWATCH_DB_OUTAGE_S``): unwritten, the watchdog would call the run's worker lost."""
    said = isinstance(exc, (*VENDOR_FAILURES, heartbeat.DatabaseUnavailable))
    error = str(exc) if said else f"{type(exc).__name__}: {exc}"
    if isinstance(exc, heartbeat.DatabaseUnavailable):
        heartbeat.until_database_returns(time.monotonic(), "the run could not be marked failed")
    _mine(run_id, attempt).end(RunStatus.FAILED, error=error)


class MissingKey(Exception):
    """An endpoint names a key variable that is not set in the worker's environment."""


# failures already in words, of the vendor or its set-up: the run's error as they say it
VENDOR_FAILURES = (failures.VendorFailed, MissingKey)


def check_keys(pair: Pair) -> None:
    """Before any request: every endpoint that names a key variable finds it set. Without
    this, requests go out with no Authorization header and the vendor's 401s are the first
    sign, far from the cause."""
    missing = [
        f"{tier} endpoint {ep.name!r} names api_key_env {ep.api_key_env!r}"
        for tier, ep in (("fast", pair.fast), ("base", pair.base))
        if ep.api_key_env and not ep.api_key()
    ]
    if missing:
        raise MissingKey(
            "API key not set: "
            + "; ".join(missing)
            + ", but that environment variable is unset or empty in the worker's environment "
            "(set it where the worker runs, then run again)"
        )


def check_answered(*, run_id: int) -> None:
    """After summarising: a run whose requests mostly failed is a failed run, with the top
    error in words (``monitor.derived.failures``)."""
    said = failures.failure(Run.objects.only("summary").get(id=run_id).summary_obj.tiers)
    if said:
        raise failures.VendorFailed(said)


def _execute(run: Run, cases: dict[str, Case], plan: list[PlannedRequest]) -> None:
    """The event loop runs in its own thread and only does I/O and timing; every database
    write happens here, on the caller's thread and connection (and so inside its transaction),
    as each record arrives through a queue."""
    pair = run.pair
    tier_endpoint = {"fast": pair.fast, "base": pair.base}
    specs = {tier: ep.spec() for tier, ep in tier_endpoint.items()}
    concurrency = {t: ep.max_concurrency for t, ep in tier_endpoint.items()}
    records: queue.Queue = queue.Queue()
    # agent cases are played as episodes; each of their requests comes through ``records`` too
    tasks = episodes.tasks_of(cases)

    def build_request(item: PlannedRequest) -> ChatRequest:
        case = cases[item.case_key]
        return ChatRequest(
            messages=fill_nonce(case.messages, f"{run.id}-{item.seq}"),
            max_tokens=case.max_tokens,
            temperature=run.temperature,
            seed=None if run.temperature > 0 else 0,
            tools=case.tools or [],
            response_format=case.response_format,
        )

    stop = threading.Event()  # the consumer gave up: the request loop must not go on unread
    running: list[tuple[asyncio.AbstractEventLoop, asyncio.Task]] = []

    async def on_record(item: PlannedRequest, record: TimingRecord) -> None:
        if stop.is_set():
            raise RuntimeError("the run stopped reading records")  # ends execute_plan's gather
        records.put((item, record))

    async def plan_task() -> None:
        """With Redis, a per-vendor limit shared by all workers (monitor.runs.ratelimit)."""
        running.append((asyncio.get_running_loop(), asyncio.current_task()))  # type: ignore[arg-type]
        gate = RunGate.from_settings({t: ep.base_url for t, ep in tier_endpoint.items()})

        async def on_gated_record(item: PlannedRequest, record: TimingRecord) -> None:
            await on_record(item, record)
            if gate:
                await gate.after(item.tier, record)

        try:
            if not stop.is_set():
                await execute_plan(
                    plan,
                    endpoints=specs,
                    build_request=build_request,
                    concurrency=concurrency,
                    on_record=on_gated_record,
                    gate=gate.gate if gate else None,
                    episodes=episodes.players(
                        tasks, cases, records.put, after=gate.after if gate else None
                    ),
                )
        finally:
            if gate:
                await gate.close()

    def produce() -> None:
        try:
            asyncio.run(plan_task())
            records.put(_DONE)
        except BaseException as exc:  # handed to the caller's thread, which raises it
            records.put(exc)

    loop_thread = threading.Thread(target=produce, name=f"run-{run.id}-loop", daemon=True)
    loop_thread.start()
    spool = Spool(run, cases, tier_endpoint)
    try:
        while (message := _next(records, run)) is not _DONE:
            if isinstance(message, BaseException):
                raise message
            spool.add(message)
            heartbeat.beat(run)
        spool.flush(final=True)
    finally:
        stop.set()
        for loop, task in running:  # requests in flight are cancelled, not waited for
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop has already closed
                pass
        loop_thread.join()


class Spool:
    """Measured samples waiting for the database, in memory, in the order they came.

    A save that still meets a lost connection after ``TIERWATCH_DB_RETRY_S`` no longer stops
    the run (the vendor had answered every request of a run whose database was down for 100 s,
    and 4 of 32 were stored): the record waits here while the request loop goes on, each later
    record tries once, and at the end of the plan the run waits for the database up to
    ``TIERWATCH_DB_OUTAGE_S`` from the first loss, then stores them all, each once
    (``heartbeat.store_once`` looks for the row first). Past that the run fails as
    "database unavailable" (``heartbeat.DatabaseUnavailable``), never as a lost worker."""

    def __init__(self, run: Run, cases: dict[str, Case], endpoints: dict[str, Endpoint]) -> None:
        self.run, self.cases, self.endpoints = run, cases, endpoints
        # each a save and a look for what an interrupted save may have stored
        self.waiting: list[tuple[Callable[[], Any], Callable[[], Any]]] = []
        self.down_since: float | None = None  # time.monotonic() of the first loss
        self.lost_once = False

    def add(self, message: Any) -> None:
        """A measured request ``(item, record)``, or an agent episode's step or end."""
        run = self.run
        if isinstance(message, episodes.EpisodeDone):
            item = message.item
            save = partial(
                episodes.close, run=run, item=item, episode=message.episode, **self._of(item)
            )
            self.waiting.append((save, lambda: None))  # updates only: safe to repeat
        elif isinstance(message, episodes.StepDone):
            item, step = message.item, message.step
            save = partial(
                save_sample,
                run=run,
                item=item,
                record=message.record,
                turn=step.turn,
                step=step.step,
                calls=episodes.step_calls(step, self.endpoints[item.tier]),
                **self._of(item),
            )
            self.waiting.append((save, partial(episodes.stored_step, run, item, step)))
        else:
            item, record = message
            save = partial(
                save_sample,
                run=run,
                item=item,
                record=record,
                defer_sandbox=True,
                **self._of(item),
            )
            self.waiting.append((save, partial(stored_sample, run, item)))
        self.flush(final=False)

    def _of(self, item: PlannedRequest) -> dict[str, Any]:
        return {"case": self.cases[item.case_key], "endpoint": self.endpoints[item.tier]}

    def flush(self, *, final: bool) -> None:
        while self.waiting:
            save, stored = self.waiting[0]
            retry_s = 0.0 if self.down_since is not None else None
            try:
                heartbeat.store_once(save, stored, retry_s, self.lost_once)
            except heartbeat.DB_LOST:
                self.lost_once = True
                if self.down_since is None:
                    self.down_since = time.monotonic()
                    log.warning(
                        "run %s: database unavailable; measured samples wait in memory "
                        "(up to %.0f s)",
                        self.run.id,
                        settings.TIERWATCH_DB_OUTAGE_S,
                    )
                if not final:
                    return
                what = f"{len(self.waiting)} measured samples could not be stored"
                heartbeat.until_database_returns(self.down_since, what)
                continue
            self.waiting.pop(0)
        if self.down_since is not None:
            silent = time.monotonic() - self.down_since
            log.warning(
                "run %s: database back after %.0f s; the waiting samples are stored",
                self.run.id,
                silent,
            )
            self.down_since = None


def stored_sample(run: Run, item: PlannedRequest) -> Sample | None:
    return run.samples.filter(
        case__key=item.case_key, tier=item.tier, batch=item.batch, repetition=item.repetition
    ).first()


def _next(records: queue.Queue, run: Run) -> Any:  # a record pair, _DONE or an exception
    """The next record; the owner beats while it waits, so a slow vendor is not a lost worker."""
    while True:
        try:
            return records.get(timeout=max(1.0, settings.TIERWATCH_HEARTBEAT_S))
        except queue.Empty:
            heartbeat.beat(run)


_DONE = object()


# TimingRecord fields stored as Sample columns of the same name (``started_at`` is converted,
# the two nullable strings become "" below).
RECORD_COLUMNS = frozenset(
    {f.name for f in Sample._meta.concrete_fields}
    - {"id", "started_at", "error_class", "finish_reason"}
)


def task_check(*, case: Case, record: TimingRecord) -> tuple[bool | None, dict | None]:
    """The task-level check of a temperature-0 sample (the article's "verify, don't trust"):
    generated code against the case's unit tests, inside the sandbox, or the text against the
    case's stacked constraints. ``(None, None)`` for a case with neither. A failed request is
    not checked (``None``, its detail says why): the vendor's refusal says nothing of the
    code its model writes, and a missing key must not read as a pass rate of 0 %."""
    if case.is_benchmark:  # tool calls, formats, benchmark categories
        return capability.check(case, record)
    if not (case.unit_tests or case.constraints):
        return None, None
    if not record.ok:
        return None, {"error_class": "request_failed", "output": record.error_class or ""}
    if case.unit_tests:
        result = run_unit_tests(extract_code(record.text), case.unit_tests)
        return result.passed, {
            "n_tests": result.n_tests,
            "n_failed": result.n_failed,
            "error_class": result.error_class,
            "output": result.output[-2000:],
            "duration_ms": result.duration_ms,
            "isolation": result.isolation,
            "n_in_child": result.n_in_child,
        }
    n_passed, n_total, failures = check_all(record.text, case.constraints)
    return n_passed == n_total, {
        "kind": "constraints",
        "n_tests": n_total,
        "n_failed": n_total - n_passed,
        "output": "; ".join(failures),
    }


PENDING = episodes.PENDING  # key of ``tests_detail`` while a sample waits for the sandbox


def needs_sandbox(case: Case, record: TimingRecord) -> bool:
    """The sample's check runs its generated code against unit tests (``task_check``, and
    ``evals.benchmarks.score`` for benchmark cases): what ``evaluate`` defers until the run's
    timed requests are over, so a burst of sandboxes never competes with them."""
    return bool(
        record.ok and case.unit_tests and case.tool_answers is None and case.response_format is None
    )


def evaluate(*, run_id: int, attempt: int | None = None) -> int:
    """The sandbox step: run the pending samples' generated code against their unit tests,
    one sample at a time, beating after each (a killed sandbox worker is noticed like a killed
    measuring one). Resumable: a sample is pending until its result is stored. Returns how
    many were evaluated."""
    run = Run.objects.get(id=run_id)
    if attempt is not None:
        run.attempt = attempt
    pending = Sample.objects.filter(run_id=run_id, tests_detail__has_key=PENDING)
    done = 0
    for sample in pending.select_related("case", "endpoint").order_by("seq"):
        detail: dict[str, Any] | None
        if sample.tests_detail.get("kind") == episodes.KIND:  # an episode: its ground truth
            passed, detail = episodes.score(sample)
        else:
            record = TimingRecord(
                ok=sample.ok,
                error_class=sample.error_class or None,
                text=sample.text,
                tool_calls=sample.tests_detail.get("tool_calls") or [],
            )
            passed, detail = task_check(case=sample.case, record=record)
        detail = scrub_value(detail, sample.endpoint.api_key())  # the sandbox's output too
        Sample.objects.filter(id=sample.id, tests_detail__has_key=PENDING).update(
            tests_passed=passed, tests_detail=storable(detail)
        )
        heartbeat.beat(run)
        done += 1
    return done


def has_pending(run_id: int) -> bool:
    return Sample.objects.filter(run_id=run_id, tests_detail__has_key=PENDING).exists()


def save_sample(
    *,
    run: Run,
    case: Case,
    endpoint: Endpoint,
    item: PlannedRequest,
    record: TimingRecord,
    defer_sandbox: bool = False,
    turn: int | None = None,
    step: int = 0,
    calls: list[dict[str, Any]] | None = None,
) -> Sample:
    """One row per request, failed or not; its task check runs here, except generated code
    with ``defer_sandbox`` (``measure`` sets it): that is marked pending for ``evaluate``. A
    request of an agent episode (``turn`` set) is not checked alone: its episode is, once it
    ends (``monitor.runs.episodes``).

    Every text and JSON value is made storable first (``evals.records.storable``). Should the
    row still not save, the sample is kept as a failed one of class ``store_error`` (its
    times and texts lost, the reason kept) and the run goes on: one bad reply never costs the
    other samples (a savepoint keeps PostgreSQL's transaction usable). The run's ``completed``
    goes up by one in the row's own transaction, so it stays the count of its samples without
    counting them again per sample (``measure`` recounts once at the end)."""
    tests_passed, tests_detail = None, None
    # storable before the sandbox too: code with a lone surrogate cannot even be written out
    record = replace(record, text=storable(record.text))
    if case.agent:
        pass  # scored as an episode
    elif run.kind == RunKind.PROBE and defer_sandbox and needs_sandbox(case, record):
        tests_detail = {PENDING: True, "tool_calls": record.tool_calls}
    elif run.kind == RunKind.PROBE:
        tests_passed, tests_detail = task_check(case=case, record=record)
    # generated code can print the key rebuilt from pieces no scrubber sees in the text
    tests_detail = scrub_value(tests_detail, endpoint.api_key())
    measured = {f.name: getattr(record, f.name) for f in fields(record) if f.name in RECORD_COLUMNS}
    row = dict(
        run=run,
        case=case,
        endpoint=endpoint,
        tier=item.tier,
        batch=item.batch,
        repetition=item.repetition,
        seq=item.seq,
        turn=turn,
        step=step,
        started_at=datetime.fromtimestamp(record.started_at or datetime.now().timestamp(), tz=UTC),
    )
    try:
        with transaction.atomic():
            sample = Sample.objects.create(
                **row,
                **storable(measured),
                calls=calls,  # apart from ``row``: a row that fails to store keeps none of it
                error_class=record.error_class or "",
                finish_reason=storable(record.finish_reason or ""),
                tests_passed=tests_passed,
                tests_detail=storable(tests_detail),
            )
            _count_one(run)
    except heartbeat.DB_LOST:
        raise  # the connection is gone, not the row: heartbeat.store_once reconnects and retries
    except (DatabaseError, ValueError, TypeError) as exc:
        log.warning(
            "run %s: sample %s could not be stored (%s)", run.id, item.seq, type(exc).__name__
        )
        first_line = (str(exc).splitlines() or [""])[0][:200]  # no row values (PG's DETAIL)
        with transaction.atomic():
            sample = Sample.objects.create(
                **row,
                ok=False,
                error_class="store_error",
                error_message=storable(f"not stored: {type(exc).__name__}: {first_line}"),
            )
            _count_one(run)
    return sample


def _count_one(run: Run) -> None:
    """One more stored sample, in the transaction that stored it (the progress a page shows)."""
    Run.objects.filter(id=run.id).update(completed=F("completed") + 1)


def summarise_run(*, run_id: int) -> RunSummary:
    """The samples' blocks of the summary; blocks other steps wrote (skipped cases, load
    levels, verdict, drift) are kept."""
    samples = list(Sample.objects.filter(run_id=run_id).select_related("case").order_by("seq"))
    pair = Pair.objects.select_related("fast", "base").get(runs__id=run_id)
    expected = {pair.fast_id: pair.fast.expected_tier, pair.base_id: pair.base.expected_tier}
    blocks = summarise_samples(
        samples, expected=expected, include_downgraded=pair.include_downgraded
    )
    return Run.objects.merge_summary(run_id, **blocks)
