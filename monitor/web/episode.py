"""A multi-turn agent task of a run, replayed turn by turn for both tiers side by side: each
turn's user message, each model request (TTFT, E2E, tokens), the tool calls it made and what
the task's environment answered, where the tiers first diverged, and each tier's score, cost
and requests. Also the run page's table of its agent tasks.

Read from the stored samples (``monitor.runs.episodes``): a request is a sample, its calls are
on it, the episode and its score on its last one. The user's messages are the task's own, read
from the benchmark (``evals.benchmarks.bfcl_multi_turn``); the first divergence is
``evals.agent.score.first_divergence`` over the stored calls. Nothing is played again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from evals.agent.score import first_divergence
from evals.benchmarks import bfcl_multi_turn
from evals.records import TIERS
from monitor import selectors
from monitor.derived.rollups import output_tokens
from monitor.judging.capability import spec_of
from monitor.models import Case, Run, Sample
from monitor.runs import budget
from monitor.runs.episodes import PENDING, stored_episode
from monitor.web.access import VIEW_RUN, requires
from monitor.web.htmx import render_page
from monitor.web.worse import usd

RESULT_SHOWN = 2000  # characters of one tool result on the page (the sample keeps what it got)
STOPS = {
    "done": "answered every turn",
    "step_limit": "stopped at a turn's step limit",
    "error": "the vendor failed a request",
    "environment_error": "the environment failed (a result or call over its limits)",
    "timeout": "ran out of its request limit or wall clock",
}


@dataclass
class StepRow:
    sample: Sample
    calls: list[dict[str, Any]]
    diverged: bool = False


@dataclass
class TurnRow:
    index: int
    user: list[str]
    steps: dict[str, list[StepRow]] = field(default_factory=dict)


@dataclass
class TierEpisode:
    """One tier's episode as the page states it."""

    tier: str
    outcome: str  # passed | failed | not checked | being scored
    detail: dict[str, Any]
    requests: int
    prompt_tokens: int
    output_tokens: int
    model_ms: float  # sum of the requests' E2E
    cost: str
    stop: str
    turns: str  # "3 of 4": the turns the episode played to their end


def _outcome(last: Sample | None) -> str:
    if last is None:
        return "not played"
    if PENDING in (last.tests_detail or {}):
        return "being scored"
    return {True: "passed", False: "failed", None: "not checked"}[last.tests_passed]


def tier_episode(tier: str, rows: list[Sample], n_turns: int | None) -> TierEpisode:
    last = next((s for s in reversed(rows) if (s.tests_detail or {}).get("kind")), None)
    detail = (last.tests_detail or {}) if last else {}
    played = {**(detail.get("episode") or {}), **detail}  # pending: the episode; scored: on top
    stop = played.get("stop") or ""
    done = played.get("turns_done")
    endpoint = rows[0].endpoint if rows else None
    costs = [
        budget.sample_cost(endpoint, s.prompt_tokens, output_tokens(s), s.cached_tokens)
        for s in rows
        if endpoint is not None and s.prompt_tokens is not None
    ]
    return TierEpisode(
        tier=tier,
        outcome=_outcome(last),
        detail=detail,
        requests=len(rows),
        prompt_tokens=sum(s.prompt_tokens or 0 for s in rows),
        output_tokens=sum(output_tokens(s) or 0 for s in rows),
        model_ms=sum(s.e2e_ms or 0.0 for s in rows),
        cost=usd(None if not costs or None in costs else sum(c for c in costs if c is not None)),
        stop=STOPS.get(stop, stop),
        turns="—" if done is None else f"{done} of {n_turns}" if n_turns else str(done),
    )


def user_turns(case: Case) -> tuple[list[list[str]], str]:
    """Each turn's user messages as the task states them, and a note when they cannot be
    read (the benchmark's wheel missing from this machine's cache)."""
    try:
        task = bfcl_multi_turn.task_for(spec_of(case))
    except Exception as exc:  # the page still shows every request; it says what is missing
        return [], f"the task's own messages could not be read ({type(exc).__name__}: {exc})"
    return [[str(m.get("content", "")) for m in turn] for turn in task.turns], ""


def _calls(sample: Sample) -> list[dict[str, Any]]:
    out = []
    for c in sample.calls or []:
        result = str(c.get("result", ""))
        cut = len(result) > RESULT_SHOWN
        out.append({**c, "result": result[:RESULT_SHOWN], "cut": len(result) if cut else 0})
    return out


def turn_rows(
    by_tier: dict[str, list[Sample]], users: list[list[str]], diverged: tuple[int, int] | None
) -> list[TurnRow]:
    n_turns = max(
        [len(users)] + [(s.turn or 0) + 1 for rows in by_tier.values() for s in rows],
    )
    turns = [
        TurnRow(index=t, user=users[t] if t < len(users) else [], steps={x: [] for x in TIERS})
        for t in range(n_turns)
    ]
    for tier, rows in by_tier.items():
        for s in rows:
            turns[s.turn or 0].steps[tier].append(
                StepRow(s, _calls(s), diverged=diverged == (s.turn or 0, s.step))
            )
    return turns


def episode_context(run: Run, case_key: str, repetition: int) -> dict[str, Any]:
    rows = selectors.episode_samples(run, case_key, repetition)
    case = rows[0].case
    by_tier = {tier: [s for s in rows if s.tier == tier] for tier in TIERS}
    episodes = {
        tier: stored_episode({"task_key": case.key, "tier": tier}, by_tier[tier]) for tier in TIERS
    }
    diverged = first_divergence(episodes["fast"], episodes["base"])
    users, note = user_turns(case)
    return {
        "run": run,
        "pair": run.pair,
        "simulated": run.pair.simulated,
        "case": case,
        "repetition": repetition,
        "repetitions": range(run.repeat),
        "tiers": [tier_episode(t, by_tier[t], (case.agent or {}).get("turns")) for t in TIERS],
        "turns": turn_rows(by_tier, users, diverged),
        "diverged": diverged,
        "users_note": note,
    }


@requires(VIEW_RUN)
@require_GET
def episode_page(request: HttpRequest, run_id: int, case_key: str) -> HttpResponse:
    run = selectors.get_run(run_id)
    try:
        repetition = max(0, int(request.GET.get("rep") or 0))
    except ValueError:
        repetition = 0
    context = episode_context(run, case_key, repetition)
    return render_page(request, "monitor/episode.html", "replay", context)


def run_agent_rows(run: Run) -> list[dict[str, Any]]:
    """The run page's agent tasks: per task, repetition and tier its outcome, requests and
    tokens (from the episode's last sample, where its score put them)."""
    rows = []
    for s in selectors.run_episodes(run):
        d = s.tests_detail or {}
        stop = d.get("stop") or (d.get("episode") or {}).get("stop", "")
        rows.append(
            {
                "key": s.case.key,
                "category": s.case.category,
                "repetition": s.repetition,
                "tier": s.tier,
                "outcome": _outcome(s),
                "failure": d.get("error_class") or "",
                "stop": STOPS.get(stop, stop),
                "requests": d.get("requests"),
                "prompt_tokens": d.get("prompt_tokens"),
                "output_tokens": d.get("output_tokens"),
            }
        )
    return rows
