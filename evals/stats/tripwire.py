"""Log-probability tripwires: a cheap, frequent test of "did this tier's model change?".

After Chauvin et al., "Log Probability Tracking of LLM APIs" (ICLR 2026, arXiv 2512.03816;
code ``timothee-chauvin/track-llm-apis``). A few short fixed prompts are sent with one output
token at temperature 0, asking for the top-k logprobs of that token. A model's first-token
distribution on a fixed prompt is a fingerprint: fine-tuning, quantization or a different
stack moves it by hundredths of a nat even when the chosen token stays the same, while the
text an audit compares does not move at all.

**The statistic** (the reference's ``logprob_two_sample_statistic``): per prompt, each query
gives a vector of logprobs over the tokens seen in either window; a token missing from a
query's top-k is set to that query's lowest listed logprob (left-censoring, as the reference
does: it was at most that likely). The distance between two windows is the mean over tokens
of |mean logprob in window A − mean in window B|; over several prompts, the mean of the
per-prompt distances.

**The p-value**: a permutation test that shuffles the window labels *within each prompt*
(prompts differ in scale, so pooling them would mix unlike things), B permutations, p =
(1 + #{permuted ≥ observed}) / (B + 1). Where this differs from the reference: the reference
tests one prompt at a time and returns #{≥}/B (which can be 0); here prompts are combined by a
stratified permutation, and the +1 keeps p valid and > 0, which the e-value needs. The
reference's monitor of real APIs alarms on the statistic's running mean + 12σ rather than on
p; here the p of each run becomes an e-value so evidence adds up across runs.

**The tolerance** of :func:`window_test` used alone: the p is computed on each token's shift
beyond ``tolerance`` nats (|Δ| − τ, at least 0), and is 1 without permuting when no token
moved more. A fixed tolerance cannot separate a serving stack's hour-level numerics from a
quantization (bf16 against f16 moves a token by a median 0.012 nats, p90 0.020; Q8_0 by a
median 0.042, p10 0.025), so the product does not test requests against a fixed tolerance.

**The product's test is** :func:`run_test`: the run, not the request, is the exchangeable
unit (``evals.stats.run_conformal``: a conformal rank among the tier's reference runs and a
tolerance bet beyond the farthest of them, whose request-level p is :func:`window_test` with
no fixed tolerance). Its e-value is folded into an e-CUSUM detector like the audits'
(``evals.stats.eprocess``) by ``monitor.derived.tripwire``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evals.records import ChatRequest, TimingRecord
from evals.stats import run_conformal

# A few short, fixed prompts (TrackLLM's "x" among them): short so each query costs a handful
# of input tokens, varied so a change that spares one prompt shows on another.
DEFAULT_PROMPTS = ("x", "Hi", "1+1=", "The capital of France is")
DEFAULT_TOP_K = 5  # many OpenAI-compatible servers cap top_logprobs at 5
DEFAULT_REPEATS = 6  # queries per prompt per run: the current window
DEFAULT_TOLERANCE = 0.02  # nats per token a serving stack's numerics may move a logprob
DEFAULT_PERMUTATIONS = 9999  # p down to 1e-4: e ≈ 118 a run, so 3 runs can reach the threshold

Observation = Mapping[str, float]  # one query: token → logprob of the first output token


def request(prompt: str, top_k: int = DEFAULT_TOP_K) -> ChatRequest:
    """The one request a tripwire query sends: one token, temperature 0, top-k logprobs."""
    return ChatRequest(
        messages=[{"role": "user", "content": prompt}],
        max_tokens=1,
        temperature=0.0,
        logprobs=True,
        top_logprobs=top_k,
    )


def first_token(record: TimingRecord) -> dict[str, float] | None:
    """The top-k logprobs of a record's first output token, or None (a failed request, or a
    server that returned no logprobs: then the tripwire cannot run on it)."""
    if not record.ok or not record.logprobs:
        return None
    entry = record.logprobs[0]
    top = {
        str(t["token"]): float(t["logprob"])
        for t in entry.get("top_logprobs") or ()
        if t.get("logprob") is not None and math.isfinite(float(t["logprob"]))
    }
    if not top and entry.get("logprob") is not None:
        top = {str(entry.get("token")): float(entry["logprob"])}
    return top or None


def window_of(
    answers: Sequence[tuple[str, TimingRecord]],
) -> tuple[dict[str, list[dict[str, float]]], int, str]:
    """(prompt, record) pairs as a window {prompt: [observation]}, with how many queries gave
    nothing usable and the first reason why (failed, or no logprobs in the answer)."""
    window: dict[str, list[dict[str, float]]] = {}
    failed, why = 0, ""
    for prompt, record in answers:
        top = first_token(record)
        if top is None:
            failed += 1
            why = why or (record.error_message or "no logprobs in the answer")[:200]
            continue
        window.setdefault(prompt, []).append(top)
    return window, failed, why


def _matrix(rows: Sequence[Observation], tokens: Sequence[str]) -> np.ndarray:
    out = np.empty((len(rows), len(tokens)))
    for i, row in enumerate(rows):
        floor = min(row.values())
        out[i] = [row.get(t, floor) for t in tokens]
    return out


def _tokens(*windows: Sequence[Observation]) -> list[str]:
    return sorted({t for w in windows for row in w for t in row})


def distance(a: Sequence[Observation], b: Sequence[Observation]) -> float:
    """Mean over the seen tokens of |mean logprob in ``a`` − mean in ``b``| (nats)."""
    if not a or not b:
        raise ValueError("distance needs at least one observation in each window")
    tokens = _tokens(a, b)
    return float(np.abs(_matrix(a, tokens).mean(0) - _matrix(b, tokens).mean(0)).mean())


def _permuted(
    pooled: np.ndarray, n_ref: int, permutations: int, rng: np.random.Generator, tolerance: float
) -> np.ndarray:
    """The distance of each of ``permutations`` relabellings of ``pooled``'s rows (the first
    ``n_ref`` of each permutation as "reference"). Why a 0/1 mask and one matrix product:
    gathering the shuffled rows builds a (B, n, tokens) array, five times slower for the same
    permutations (a month's replay runs this tens of thousands of times)."""
    order = np.argsort(rng.random((permutations, len(pooled))), axis=1)
    mask = np.zeros((permutations, len(pooled)))
    np.put_along_axis(mask, order[:, :n_ref], 1.0, axis=1)
    ref_sum = mask @ pooled
    diff = ref_sum / n_ref - (pooled.sum(0) - ref_sum) / (len(pooled) - n_ref)
    out: np.ndarray = _beyond(np.abs(diff), tolerance).mean(1)
    return out


def _beyond(shift: np.ndarray, tolerance: float) -> np.ndarray:
    """Each token's shift less the tolerance, at least 0: what serving numerics cannot explain."""
    out: np.ndarray = np.maximum(shift - tolerance, 0.0)
    return out


@dataclass(frozen=True)
class WindowTest:
    statistic: float  # mean over prompts of the per-prompt distance, nats
    p_value: float
    per_prompt: dict[str, float]
    n_reference: int  # queries per prompt (the smallest)
    n_current: int


def window_test(
    reference: Mapping[str, Sequence[Observation]],
    current: Mapping[str, Sequence[Observation]],
    *,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
    tolerance: float = DEFAULT_TOLERANCE,
) -> WindowTest:
    """Two windows of queries, per prompt, compared: statistic and stratified permutation p.
    Only prompts present in both windows count; none in common is an error that says so.

    The p is computed on the shifts beyond ``tolerance`` nats per token (module docstring):
    when no token moved more than that, nothing is left to explain and p = 1 without
    permuting. ``statistic`` stays the plain distance, the figure the page shows."""
    prompts = [p for p in reference if reference[p] and current.get(p)]
    if not prompts:
        raise ValueError(
            f"no prompt has queries in both windows (reference: {sorted(reference)}, "
            f"current: {sorted(current)})"
        )
    if permutations < 1:
        raise ValueError(f"permutations must be ≥ 1, got {permutations}")
    rng = np.random.default_rng(seed)
    distance, observed, per_prompt, pooled_by = 0.0, 0.0, {}, {}
    for prompt in prompts:
        ref, cur = list(reference[prompt]), list(current[prompt])
        tokens = _tokens(ref, cur)
        pooled_by[prompt] = np.vstack([_matrix(ref, tokens), _matrix(cur, tokens)])
        shift = np.abs(
            pooled_by[prompt][: len(ref)].mean(0) - pooled_by[prompt][len(ref) :].mean(0)
        )
        per_prompt[prompt] = float(shift.mean())
        distance += per_prompt[prompt] / len(prompts)
        observed += float(_beyond(shift, tolerance).mean()) / len(prompts)
    p = 1.0
    if observed > 1e-12:  # else every permutation is ≥ it: p = 1 exactly
        null = np.zeros(permutations)
        for prompt in prompts:
            n_ref = len(reference[prompt])
            null += _permuted(pooled_by[prompt], n_ref, permutations, rng, tolerance) / len(prompts)
        p = (1 + int(np.sum(null >= observed - 1e-12))) / (permutations + 1)
    return WindowTest(
        statistic=distance,
        p_value=p,
        per_prompt=per_prompt,
        n_reference=min(len(reference[p]) for p in prompts),
        n_current=min(len(current[p]) for p in prompts),
    )


def cross_distance(
    a: Mapping[str, Sequence[Observation]], b: Mapping[str, Sequence[Observation]]
) -> float | None:
    """Fast against base on the same prompts: the mean per-prompt distance, or None without a
    prompt in common. A distance, never a proof that the two serve the same model: read it
    against its own noise floor (the same distance between the tiers' reference windows)."""
    prompts = [p for p in a if a[p] and b.get(p)]
    if not prompts:
        return None
    return float(np.mean([distance(a[p], b[p]) for p in prompts]))


Window = Mapping[str, Sequence[Observation]]


def _pooled(windows: Sequence[Window], prompts: Sequence[str]) -> dict[str, list[Observation]]:
    return {p: [row for w in windows for row in w[p]] for p in prompts}


def run_test(
    reference_runs: Sequence[Window],
    current: Window,
    *,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> run_conformal.RunTest | None:
    """The current run against the tier's reference runs, the run as the exchangeable unit
    (``evals.stats.run_conformal``). A run's score is the mean over prompts of its
    :func:`distance` to the pool of the other runs, on the prompts every run answered; None
    (no evidence) when the current run shares no prompt with every reference run."""
    runs = [*reference_runs, current]
    prompts = [p for p in current if all(w.get(p) for w in runs)]
    if not prompts or not reference_runs:
        return None
    per_prompt = []
    for prompt in prompts:
        tokens = _tokens(*(w[prompt] for w in runs))
        sums = np.array([_matrix(w[prompt], tokens).sum(0) for w in runs])
        per_prompt.append((sums, np.array([float(len(w[prompt])) for w in runs])))
    pooled = _pooled(reference_runs, prompts)
    return run_conformal.test_runs(
        per_prompt,
        lambda: window_test(
            pooled, {p: current[p] for p in prompts}, permutations=permutations, seed=seed,
            tolerance=0.0,
        ).p_value,
        tv=False,
    )  # fmt: skip
