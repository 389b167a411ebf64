"""Agent tasks in a run: each planned (case, tier, repetition) of an agent case is played as an
episode (``evals.agent.loop.run_episode``) instead of sent as one request.

What is stored, and why so: every request of an episode is a sample like any other (its
timings count in the tier's latency, availability and cost), placed by its ``turn`` and
``step``, with the tool calls it made and what the environment answered (``Sample.calls``,
scrubbed); once the episode ends, its last sample carries the episode (``tests_detail``,
marked pending). Its score (``evals.agent.score.score_episode``: the ground truth played in a
fresh sandboxed environment, compared state by state and call by call) is computed in the
run's evaluate step, with the generated code, so scoring never competes with the run's timed
requests (the episode's own environment runs beside them, as it must); it lands in that
sample's ``tests_passed``. So every capability read — rollups, the "Is it worse?" window, the
loss detectors, the budget's rotation — counts one outcome per episode, through the paths it
already takes; no table of its own to join.

An episode is stored whole or played again: a taken-over run drops the samples of an episode
its lost worker had not closed (the environment's state between steps is not kept) and plays
it from its first turn. An episode that ends without any request (its environment never
started, its wall clock ran out first) has no sample to carry it: the run's ``skipped`` block
says so, with the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import httpx

from evals.agent.loop import Limits, run_episode
from evals.agent.records import AgentTask, Episode, Step, ToolCall
from evals.agent.score import score_episode
from evals.benchmarks import bfcl_multi_turn
from evals.plan import PlannedRequest, PlayEpisode
from evals.records import EndpointSpec, TimingRecord, storable
from evals.scrub import scrub_value
from monitor.derived.rollups import output_tokens
from monitor.derived.run_summary import SkippedCase
from monitor.judging.capability import spec_of
from monitor.models import Case, Endpoint, Run, RunKind, Sample

log = logging.getLogger(__name__)

# episodes stored unchecked (``score``), by the class their sample then names
UNCHECKED = {"error": "request_failed", "environment_error": "environment_error"}
KIND = "agent"  # ``tests_detail["kind"]`` of an episode's last sample
# key of ``tests_detail`` while a sample waits for the sandbox: generated code to test, or an
# episode to score (``monitor.runs.steps.evaluate``)
PENDING = "sandbox_pending"


@dataclass(frozen=True)
class StepDone:
    """One request of an episode, measured: stored as a sample at once."""

    item: PlannedRequest
    record: TimingRecord
    step: Step


@dataclass(frozen=True)
class EpisodeDone:
    """The episode ended (any stop reason): its calls and its record go on its samples."""

    item: PlannedRequest
    episode: Episode


def tasks_of(cases: dict[str, Case]) -> dict[str, AgentTask]:
    """The agent tasks of a run's cases, read from the benchmark's wheel before any request."""
    return {
        key: bfcl_multi_turn.task_for(spec_of(case)) for key, case in cases.items() if case.agent
    }


def players(
    tasks: dict[str, AgentTask],
    cases: dict[str, Case],
    put: Callable[[StepDone | EpisodeDone], None],
    after: Callable[[str, TimingRecord], Awaitable[None]] | None = None,
) -> dict[str, PlayEpisode]:
    """One player per agent case for ``evals.plan.execute_plan``: it plays the episode on the
    planned tier and hands each request, then the episode's end, to ``put`` (the run's queue
    of records, read on the caller's thread, which stores them and beats). ``after`` (the
    per-vendor limit's) sees the episode's last request: a 429 ends an episode, and the
    vendor's pause is then kept as after any single request."""

    def player(key: str) -> PlayEpisode:
        task, limits = tasks[key], Limits(max_tokens=cases[key].max_tokens)

        async def play(
            item: PlannedRequest, client: httpx.AsyncClient, endpoint: EndpointSpec
        ) -> None:
            last: list[TimingRecord] = []

            def on_request(record: TimingRecord, step: Step) -> None:
                last[:] = [record]
                put(StepDone(item, record, step))

            episode = await run_episode(
                client, endpoint, task, tier=item.tier, on_request=on_request, limits=limits
            )
            put(EpisodeDone(item, episode))
            if after is not None and last:
                await after(item.tier, last[0])

        return play

    return {key: player(key) for key in tasks}


def episode_rows(run: Run, item: PlannedRequest):
    return run.samples.filter(
        case__key=item.case_key, tier=item.tier, batch=item.batch, repetition=item.repetition
    )


def stored_step(run: Run, item: PlannedRequest, step: Step) -> Sample | None:
    return episode_rows(run, item).filter(turn=step.turn, step=step.step).first()


def step_calls(step: Step, endpoint: Endpoint) -> list[dict[str, Any]] | None:
    """A step's tool calls with the environment's answers, as its sample stores them (the loop
    handed the step over after running them); scrubbed again here, like any stored detail."""
    if not step.calls:
        return None
    return storable(scrub_value([asdict(c) for c in step.calls], endpoint.api_key()))


def close(*, run: Run, case: Case, endpoint: Endpoint, item: PlannedRequest, episode: Episode):
    """The episode's end stored: the episode on its last sample, pending its score.
    Idempotent: an update."""
    key = endpoint.api_key()
    rows = {(s.turn, s.step): s.id for s in episode_rows(run, item).only("id", "turn", "step")}
    last = max(rows, key=lambda ts: (ts[0] or 0, ts[1]), default=None)
    if last is None:
        _no_request(run, case, item, episode)
        return
    # the steps are the samples themselves; the states after each turn are not read again
    kept = replace(episode, steps=[], states=[])
    detail: dict[str, Any] = {"kind": KIND, "episode": scrub_value(kept.to_json(), key)}
    if run.kind == RunKind.PROBE:  # scored in probes only, as every task check
        detail[PENDING] = True
    Sample.objects.filter(id=rows[last]).update(tests_detail=storable(detail))


def _no_request(run: Run, case: Case, item: PlannedRequest, episode: Episode) -> None:
    reason = (
        f"agent episode on {item.tier} (repetition {item.repetition}) ended before its first "
        f"request: {episode.stop}" + (f" ({episode.stop_detail})" if episode.stop_detail else "")
    )
    log.warning("run %s, case %s: %s", run.id, case.key, reason)
    skipped = Run.objects.only("summary").get(id=run.id).summary_obj.skipped
    entry = SkippedCase(case=case.key, scenario=case.scenario, reason=storable(reason))
    Run.objects.merge_summary(run.id, skipped=(*skipped, entry))


def closed(run: Run) -> set[tuple[str, str, int, int]]:
    """(case, tier, batch, repetition) of the run's episodes stored whole."""
    return set(
        run.samples.filter(tests_detail__kind=KIND).values_list(
            "case__key", "tier", "batch", "repetition"
        )
    )


def drop_unclosed(run: Run, agent_keys: set[str]) -> int:
    """Samples of episodes a lost worker left open, deleted so the episode is played again from
    its first turn; how many."""
    whole = closed(run)
    open_ids = [
        sample_id
        for sample_id, *slot in run.samples.filter(case__key__in=agent_keys).values_list(
            "id", "case__key", "tier", "batch", "repetition"
        )
        if tuple(slot) not in whole
    ]
    if open_ids:
        Sample.objects.filter(id__in=open_ids).delete()
    return len(open_ids)


def score(sample: Sample) -> tuple[bool | None, dict[str, Any]]:
    """The pending episode on ``sample`` scored (blocking: the ground truth is played in the
    sandbox). A vendor that failed a request of the episode, or an environment that failed
    (the sandbox, a result or call over its caps), leaves it unchecked (None), as a failed
    single request is: neither says anything of the model's agent work. An episode stopped by
    a turn's step limit or by its request limit or wall clock is failed, as BFCL fails a
    force-quit one."""
    case = sample.case
    rows = list(episode_rows_of(sample).order_by("turn", "step"))
    episode = stored_episode(sample.tests_detail["episode"], rows)
    detail: dict[str, Any] = {
        "kind": KIND,
        "category": case.category,
        "stop": episode.stop,
        "stop_detail": episode.stop_detail,
        "turns_done": episode.turns_done,
        "turns": (case.agent or {}).get("turns"),
        **totals(rows),
    }
    if episode.stop in UNCHECKED:
        return None, {**detail, "error_class": UNCHECKED[episode.stop]}
    result = score_episode(bfcl_multi_turn.task_for(spec_of(case)), episode)
    if result.failure in UNCHECKED:  # the sandbox failed while playing the ground truth
        return None, {**detail, "error_class": UNCHECKED[result.failure]}
    detail.update(
        error_class=result.failure or None,
        state_ok=result.state_ok,
        response_ok=result.response_ok,
        first_failing_turn=result.first_failing_turn,
        score=result.to_json(),
    )
    return result.passed, detail


def episode_rows_of(sample: Sample):
    """The samples of the episode ``sample`` belongs to."""
    return Sample.objects.filter(
        run_id=sample.run_id,
        case_id=sample.case_id,
        tier=sample.tier,
        batch=sample.batch,
        repetition=sample.repetition,
    )


def stored_episode(data: dict[str, Any], rows: list[Sample]) -> Episode:
    """An episode as stored: its record (``data``) with its steps rebuilt from its samples, in
    order of turn and step (what scoring and the first divergence read: the calls)."""
    steps = [
        Step(
            turn=s.turn or 0,
            step=s.step,
            ok=s.ok,
            error_class=s.error_class or None,
            ttft_ms=s.ttft_ms,
            e2e_ms=s.e2e_ms,
            prompt_tokens=s.prompt_tokens,
            output_tokens=output_tokens(s),
            finish_reason=s.finish_reason or None,
            calls=[ToolCall(**c) for c in s.calls or []],
        )
        for s in rows
    ]
    return replace(Episode.from_json({**data, "steps": []}), steps=steps)


def totals(rows: list[Sample]) -> dict[str, float]:
    """Requests, tokens and model time (the requests' E2E summed) of an episode, from its
    samples: what the episode cost and how long the model took, the environment's time
    left out."""
    return {
        "requests": len(rows),
        "prompt_tokens": sum(s.prompt_tokens or 0 for s in rows),
        "output_tokens": sum(output_tokens(s) or 0 for s in rows),
        "model_ms": round(sum(s.e2e_ms or 0.0 for s in rows), 1),
    }
