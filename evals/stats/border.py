"""Border-input tripwires: "did this tier's model change?" for an API that returns no logprobs.

After Chauvin, Lalanne et al., "Token-efficient change detection in LLM APIs" (B3IT; ICML 2026,
arXiv 2602.11083; code ``timothee-chauvin/token-efficient-change-detection-llm-apis``). A
*border input* is a short prompt whose temperature-0, one-token answer is not always the same
token: the model's top two tokens are so close that the serving stack's numerics decide. Such
a near tie is a sensitive fingerprint: a quantization, a fine-tune or another model moves the
share of each answer, while ordinary prompts answer the same token before and after.

**Discovery** (once per tier, again after an acknowledged change): each candidate prompt is
asked ``DISCOVERY_QUERIES`` times; a candidate with ≥ 2 distinct non-empty answers is a border
input (the reference's criterion). Up to ``DISCOVERY_TARGET`` of them get
``REFERENCE_SAMPLES`` answers each, the reference distributions; the ``KEEP`` with the best
balance (share of the second answer / share of the first, the reference's ``balance_score``)
are kept. The paper's sizes: 5,000 single-token candidates × 3 queries, 50 border inputs
sampled 100 times, the best 20 kept; then 20 inputs × 10 samples a day. The defaults here are
scaled down (``discovery_requests`` says how many requests they are); a simulated or local
vendor finds enough border inputs among a few hundred candidates, a real API may need more.

**Each run**: the kept inputs × ``SAMPLES`` one-token answers; the statistic is the mean over
inputs of the total-variation distance between the run's answer distribution and the
reference (the reference's ``compute_tv_distance`` and daily mean). Where this differs from
the reference: it alarms when the daily mean stays 4σ and 0.2 above a trailing baseline for 3
days; here a permutation test shuffles the reference/run labels *within each input* and gives
p = (1 + #{permuted ≥ observed}) / (B + 1), so the run's p becomes an e-value in the same
e-detector as the logprob tripwire (``evals.stats.tripwire``), under one budget.
"""

from __future__ import annotations

import random
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evals.records import ChatRequest, TimingRecord
from evals.stats import run_conformal

DISCOVERY_CANDIDATES = 300  # the paper: 5,000
DISCOVERY_QUERIES = 3  # the paper: 3
DISCOVERY_TARGET = 30  # border inputs given a reference; the paper: 50
REFERENCE_SAMPLES = 30  # the paper: 100
KEEP = 20  # the paper: 20
MIN_KEEP = 5  # fewer border inputs than this: the tripwire cannot run (the paper: 10)
SAMPLES = 10  # answers per input per run; the paper: 10 a day
PERMUTATIONS = 9999  # p down to 1e-4, as the logprob tripwire

Distribution = Mapping[str, int]  # answer token → count


def candidates(n: int = DISCOVERY_CANDIDATES, seed: int = 0) -> list[str]:
    """``n`` short candidate prompts in a seeded order: printable characters and two-letter
    strings (the paper draws single tokens from the model's tokenizer; an API's tokenizer is
    not always public, and these are one or two tokens in any of them)."""
    pool = [c for c in string.printable if not c.isspace()]
    pool += [a + b for a in string.ascii_lowercase for b in string.ascii_lowercase]
    random.Random(seed).shuffle(pool)
    if n > len(pool):
        raise ValueError(f"at most {len(pool)} candidates, asked for {n}")
    return pool[:n]


def discovery_requests(
    n_candidates: int = DISCOVERY_CANDIDATES,
    queries: int = DISCOVERY_QUERIES,
    target: int = DISCOVERY_TARGET,
    reference: int = REFERENCE_SAMPLES,
) -> int:
    """The most requests one tier's discovery sends (candidates × queries, then a reference
    for up to ``target`` border inputs): stated before it starts."""
    return n_candidates * queries + target * reference


def request(prompt: str) -> ChatRequest:
    """One border-input query: one output token at temperature 0, no logprobs asked."""
    return ChatRequest(
        messages=[{"role": "user", "content": prompt}], max_tokens=1, temperature=0.0
    )


def answer(record: TimingRecord) -> str | None:
    """The answered token, or None for a failed request or an empty answer (not counted)."""
    if not record.ok or not record.text:
        return None
    return record.text


def distributions(answers: Sequence[tuple[str, str | None]]) -> dict[str, Counter[str]]:
    """(prompt, answer) pairs as {prompt: Counter of answers}, failures left out."""
    out: dict[str, Counter[str]] = {}
    for prompt, token in answers:
        if token is not None:
            out.setdefault(prompt, Counter())[token] += 1
    return out


def is_border(dist: Distribution) -> bool:
    return sum(1 for t, c in dist.items() if t and c) >= 2


def balance(dist: Distribution) -> float:
    """Count of the second most frequent answer / count of the first (0 for one answer)."""
    counts = sorted(dist.values(), reverse=True)
    return counts[1] / counts[0] if len(counts) > 1 and counts[0] else 0.0


def select(reference: Mapping[str, Distribution], keep: int = KEEP) -> list[str]:
    """The ``keep`` border inputs with the best balance (ties broken by the prompt)."""
    scored = sorted(reference, key=lambda p: (-balance(reference[p]), p))
    return [p for p in scored if balance(reference[p]) > 0][:keep]


def tv(a: Distribution, b: Distribution) -> float:
    """Total-variation distance between two answer distributions: ½ Σ |p_a − p_b|."""
    na, nb = sum(a.values()), sum(b.values())
    if not na or not nb:
        raise ValueError("tv needs answers in both distributions")
    return 0.5 * sum(abs(a.get(t, 0) / na - b.get(t, 0) / nb) for t in set(a) | set(b))


@dataclass(frozen=True)
class BorderTest:
    statistic: float  # mean over inputs of the TV distance to the reference
    p_value: float
    per_input: dict[str, float]
    n_inputs: int


def _counts(labels: np.ndarray, k: int) -> np.ndarray:
    """Rows of category labels (B, n) as count vectors (B, k)."""
    out = np.zeros((labels.shape[0], k))
    for c in range(k):
        out[:, c] = (labels == c).sum(1)
    return out


def window_test(
    reference: Mapping[str, Distribution],
    current: Mapping[str, Distribution],
    *,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> BorderTest:
    """The run's answers against the reference, per input: mean TV and the stratified
    permutation p. Only inputs with answers in both count; none in common is an error."""
    inputs = [
        p for p in reference if sum(reference[p].values()) and sum(current.get(p, {}).values())
    ]
    if not inputs:
        raise ValueError(
            f"no border input has answers in both the reference ({len(reference)} inputs) "
            f"and the run ({len(current)} inputs)"
        )
    if permutations < 1:
        raise ValueError(f"permutations must be ≥ 1, got {permutations}")
    rng = np.random.default_rng(seed)
    per_input, null = {}, np.zeros(permutations)
    for prompt in inputs:
        ref, cur = reference[prompt], current[prompt]
        per_input[prompt] = tv(ref, cur)
        tokens = sorted(set(ref) | set(cur))
        pooled = np.array(
            [i for i, t in enumerate(tokens) for _ in range(ref.get(t, 0))]
            + [i for i, t in enumerate(tokens) for _ in range(cur.get(t, 0))]
        )
        n_ref = sum(ref.values())
        order = np.argsort(rng.random((permutations, len(pooled))), axis=1)
        shuffled = pooled[order]
        a = _counts(shuffled[:, :n_ref], len(tokens)) / n_ref
        b = _counts(shuffled[:, n_ref:], len(tokens)) / (len(pooled) - n_ref)
        null += 0.5 * np.abs(a - b).sum(1) / len(inputs)
    observed = float(np.mean(list(per_input.values())))
    p = (1 + int(np.sum(null >= observed - 1e-12))) / (permutations + 1)
    return BorderTest(statistic=observed, p_value=p, per_input=per_input, n_inputs=len(inputs))


def cross_distance(a: Mapping[str, Distribution], b: Mapping[str, Distribution]) -> float | None:
    """Fast against base on the inputs both kept: mean TV, or None with none in common. A
    distance to read against its noise floor, never a proof that both serve one model."""
    common = [p for p in a if sum(a[p].values()) and sum(b.get(p, {}).values())]
    if not common:
        return None
    return float(np.mean([tv(a[p], b[p]) for p in common]))


def _pooled(
    runs: Sequence[Mapping[str, Distribution]], inputs: Sequence[str]
) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {i: Counter() for i in inputs}
    for run in runs:
        for i in inputs:
            out[i].update(run[i])
    return out


def run_test(
    reference_runs: Sequence[Mapping[str, Distribution]],
    current: Mapping[str, Distribution],
    *,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> run_conformal.RunTest | None:
    """The current run against the tier's reference runs, the run (a day, an hour) as the
    exchangeable unit (``evals.stats.run_conformal``): a run's score is the mean over inputs
    of its :func:`tv` to the pool of the other runs, on the inputs every run answered. None
    (no evidence) when the current run answered none of them: a batch with no answers."""
    runs = [*reference_runs, current]
    inputs = [i for i in current if all(sum(r.get(i, {}).values()) for r in runs)]
    if not inputs or not reference_runs:
        return None
    per_input = []
    for i in inputs:
        tokens = sorted({t for r in runs for t in r[i]})
        sums = np.array([[float(r[i].get(t, 0)) for t in tokens] for r in runs])
        per_input.append((sums, sums.sum(1)))
    pooled = _pooled(reference_runs, inputs)
    return run_conformal.test_runs(
        per_input,
        lambda: (
            window_test(
                pooled, {i: current[i] for i in inputs}, permutations=permutations, seed=seed
            ).p_value
        ),
        tv=True,
    )
