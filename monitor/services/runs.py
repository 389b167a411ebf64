"""Runs: plan, execute, store every sample as it completes, summarise from stored samples.

The summary is always recomputed from the rows in the database, never from memory, so a page,
a report and a re-summarise after a crash all agree (the contract is in ``summarise_run``).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import random
import threading
from dataclasses import fields
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from evals.constraints import check_all
from evals.plan import PlannedRequest, execute_plan, plan_run
from evals.records import ChatRequest, EndpointSpec, TimingRecord
from evals.sandbox import extract_code, run_unit_tests
from evals.suites import fill_nonce
from monitor.models import Case, Endpoint, Pair, Run, Sample
from monitor.services.summary import summarise_samples
from monitor.services.verdict import after_summary, audit_suite

log = logging.getLogger(__name__)

AUDIT_SAMPLES_PER_PROMPT = 10
AUDIT_TEMPERATURE = 1.0


def endpoint_spec(endpoint: Endpoint) -> EndpointSpec:
    """The key is read from the environment now and lives only in memory."""
    return EndpointSpec(
        name=endpoint.name,
        protocol=endpoint.protocol,  # type: ignore[arg-type]
        base_url=endpoint.base_url.rstrip("/"),
        model=endpoint.model,
        api_key=endpoint.api_key(),
        timeout_s=endpoint.timeout_s,
        extra_body=dict(endpoint.extra_body or {}),
        served_tier_fields=tuple(endpoint.served_tier_fields or ()),
    )


def create_run(
    *,
    pair: Pair,
    kind: str = "probe",
    trigger: str = "manual",
    repeat: int | None = None,
    seed: int | None = None,
) -> Run:
    if kind == "audit":
        repeat = repeat or AUDIT_SAMPLES_PER_PROMPT
        temperature = AUDIT_TEMPERATURE
    else:
        repeat = repeat or pair.repeat
        temperature = 0.0
    return Run.objects.create(
        pair=pair,
        suite=audit_suite(pair) if kind == "audit" else pair.suite,
        kind=kind,
        trigger=trigger,
        repeat=repeat,
        temperature=temperature,
        seed=seed if seed is not None else random.randrange(2**31),
    )


def enqueue_run(*, pair: Pair, kind: str = "probe", trigger: str = "manual") -> Run:
    """Create the run now; the worker picks it up once the transaction has committed."""
    from monitor.tasks import execute_run_task

    run = create_run(pair=pair, kind=kind, trigger=trigger)
    transaction.on_commit(lambda: execute_run_task.delay(run.id))
    return run


def select_cases(run: Run, limit: int | None) -> list[Case]:
    from monitor.services.speed import split_by_context  # skip cases too long for an endpoint

    pair = run.pair
    cases, skipped = split_by_context(run.suite.cases.order_by("key"), [pair.fast, pair.base])
    if skipped:  # kept by summarise_run; shown on the speed page
        run.summary = {**(run.summary or {}), "skipped": skipped}
        Run.objects.filter(id=run.id).update(summary=run.summary)
    if limit and limit < len(cases):
        cases = sorted(random.Random(run.seed).sample(cases, limit), key=lambda c: c.key)
    return cases


def run_tiers(run: Run) -> tuple[tuple[str, int], ...]:
    """An audit sends base twice in independent batches: the base-vs-base noise floor."""
    if run.kind == "audit":
        return (("fast", 0), ("base", 0), ("base", 1))
    return (("fast", 0), ("base", 0))


def claim_run(run_id: int) -> bool:
    """Only one worker executes a run, even if the task is delivered twice (acks_late)."""
    return bool(
        Run.objects.filter(id=run_id, status="queued").update(
            status="running", started_at=timezone.now()
        )
    )


def execute_run(*, run_id: int, cases_limit: int | None = None) -> Run | None:
    """Execute a queued run; ``None`` when it no longer exists (a stale redelivered task)."""
    if not claim_run(run_id):
        log.info("run %s is not queued (or gone); skipping", run_id)
        return Run.objects.filter(id=run_id).first()
    run = Run.objects.select_related("pair__fast", "pair__base", "suite").get(id=run_id)
    try:
        cases = select_cases(run, cases_limit or run.pair.cases_per_run)
        plan = plan_run(
            [c.key for c in cases], repeat=run.repeat, seed=run.seed, tiers=run_tiers(run)
        )
        Run.objects.filter(id=run.id).update(planned=len(plan))
        _execute(run, {c.key: c for c in cases}, plan)
        summarise_run(run_id=run.id)
        after_summary(run_id=run.id)  # an audit's verdict; drift of every run
        Run.objects.filter(id=run.id).update(status="done", finished_at=timezone.now())
    except Exception as exc:  # the run is marked failed with its reason; samples stay
        log.exception("run %s failed", run.id)
        Run.objects.filter(id=run.id).update(
            status="failed", finished_at=timezone.now(), error=f"{type(exc).__name__}: {exc}"
        )
    return Run.objects.get(id=run.id)


def _execute(run: Run, cases: dict[str, Case], plan: list[PlannedRequest]) -> None:
    """The event loop runs in its own thread and only does I/O and timing; every database
    write happens here, on the caller's thread and connection (and so inside its transaction),
    as each record arrives through a queue."""
    pair = run.pair
    tier_endpoint = {"fast": pair.fast, "base": pair.base}
    specs = {tier: endpoint_spec(ep) for tier, ep in tier_endpoint.items()}
    concurrency = {t: ep.max_concurrency for t, ep in tier_endpoint.items()}
    records: queue.Queue = queue.Queue()

    def build_request(item: PlannedRequest) -> ChatRequest:
        case = cases[item.case_key]
        return ChatRequest(
            messages=fill_nonce(case.messages, f"{run.id}-{item.seq}"),
            max_tokens=case.max_tokens,
            temperature=run.temperature,
            seed=None if run.temperature > 0 else 0,
        )

    async def on_record(item: PlannedRequest, record: TimingRecord) -> None:
        records.put((item, record))

    def produce() -> None:
        try:
            asyncio.run(
                execute_plan(
                    plan,
                    endpoints=specs,
                    build_request=build_request,
                    concurrency=concurrency,
                    on_record=on_record,
                )
            )
            records.put(_DONE)
        except BaseException as exc:  # handed to the caller's thread, which raises it
            records.put(exc)

    loop_thread = threading.Thread(target=produce, name=f"run-{run.id}-loop", daemon=True)
    loop_thread.start()
    while (message := records.get()) is not _DONE:
        if isinstance(message, BaseException):
            raise message
        item, record = message
        save_sample(
            run=run,
            case=cases[item.case_key],
            endpoint=tier_endpoint[item.tier],
            item=item,
            record=record,
        )
    loop_thread.join()


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
    case's stacked constraints. ``(None, None)`` for a case with neither; a failed request
    fails the check."""
    if not (case.unit_tests or case.constraints):
        return None, None
    if not record.ok:
        return False, {"error_class": "request_failed", "output": record.error_class or ""}
    if case.unit_tests:
        result = run_unit_tests(extract_code(record.text), case.unit_tests)
        return result.passed, {
            "n_tests": result.n_tests,
            "n_failed": result.n_failed,
            "error_class": result.error_class,
            "output": result.output[-2000:],
            "duration_ms": result.duration_ms,
        }
    n_passed, n_total, failures = check_all(record.text, case.constraints)
    return n_passed == n_total, {
        "kind": "constraints", "n_tests": n_total, "n_failed": n_total - n_passed,
        "output": "; ".join(failures),
    }


def save_sample(
    *, run: Run, case: Case, endpoint: Endpoint, item: PlannedRequest, record: TimingRecord
) -> Sample:
    """One row per request, failed or not; unit tests run here, inside the sandbox."""
    tests_passed, tests_detail = None, None
    if run.kind == "probe":
        tests_passed, tests_detail = task_check(case=case, record=record)
    measured = {f.name: getattr(record, f.name) for f in fields(record) if f.name in RECORD_COLUMNS}
    sample = Sample.objects.create(
        run=run,
        case=case,
        endpoint=endpoint,
        tier=item.tier,
        batch=item.batch,
        repetition=item.repetition,
        seq=item.seq,
        started_at=datetime.fromtimestamp(record.started_at or datetime.now().timestamp(), tz=UTC),
        **measured,
        error_class=record.error_class or "",
        finish_reason=record.finish_reason or "",
        tests_passed=tests_passed,
        tests_detail=tests_detail,
    )
    Run.objects.filter(id=run.id).update(completed=Sample.objects.filter(run_id=run.id).count())
    return sample


def summarise_run(*, run_id: int) -> dict:
    run = Run.objects.get(id=run_id)
    samples = list(run.samples.select_related("case").order_by("seq"))
    # Keys other services added (skipped cases, load levels, verdict, drift) are kept.
    summary = {**(run.summary or {}), **summarise_samples(samples)}
    Run.objects.filter(id=run_id).update(summary=summary)
    return summary
