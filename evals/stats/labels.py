"""The verdict of one run in words that claim only what its tests show.

The one verdict engine (``monitor.judging.verdict`` calls :func:`judge`). It names no cause:
the size of MMD² depends on output length, entropy and the prompts, so it cannot tell
quantization from another model ("A" vs "B" one-character answers have a small MMD² and are
entirely different). Labels, in order:

1. **inconclusive (why)** — no prompt with 2 texts on both tiers, fewer than ``min_prompts``
   prompts or ``min_samples`` texts of a prompt on a tier, more than ``max_dropped_share`` of
   the prompts lost, or more than ``max_failed_share`` of a tier's requests failed.
2. **capability difference (metric, points, p)** — the paired pass/fail of *this run's* cases
   (McNemar) is significant after Holm over the family {MMD, McNemar}. Evidence from another
   run (an earlier probe) is shown as context and never counted: counted again at every
   audit, one chance rejection would label every audit.
3. **outputs differ (p, n)** — the MMD test rejects (Holm-adjusted p < α). The MMD² is given
   with its interval over prompts (:mod:`evals.stats.effect`).
4. **no detectable difference (p, n; 80% power only above …)** — never "same model".

A tier whose every answer was empty (refusals, a reasoning model that spent its tokens
thinking, tool calls only) leaves the text test nothing to compare; when the other tier did
answer and Fisher's test on empty answers rejects, the label is **outputs differ** with
"fast tier answered nothing in N of N samples" (:func:`silent_tiers`), else inconclusive with
those words.

Empty answers and failed requests are rates of their own, compared by Fisher's exact test
(:func:`rate_test`) and counted in the sentence; they do not enter the MMD test (the texts are
normalised and empties left out by :func:`evals.stats.mmd.mmd_test`). The reference ladder is
context only, only when measured on the same suite and L, and only its rungs that were
significant when measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from evals.stats.capability import PairedTable
from evals.stats.effect import EffectSize, effect_size
from evals.stats.ladder import REFERENCE_LADDER
from evals.stats.mmd import MMDResult
from evals.stats.multiple import holm

# The one definition of the verdict labels the product writes: /metrics, the API schema and
# the pages take their label set from here, so a label added here reaches all of them.
Label = Literal["outputs_differ", "no_detectable_difference", "capability_difference",
                "inconclusive"]  # fmt: skip
LABELS: tuple[Label, ...] = get_args(Label)
LABEL_WORDS: dict[str, str] = {  # keyed by Label; str keys so stored labels look up
    "outputs_differ": "outputs differ",
    "no_detectable_difference": "no detectable difference",
    "capability_difference": "capability difference",
    "inconclusive": "inconclusive",
}


@dataclass(frozen=True)
class TierCounts:
    """Requests of one tier in the run: total, failed (any error class), and successful
    requests whose output text was empty."""

    requests: int
    failed: int = 0
    empty: int = 0


def fmt_p(p: float | None) -> str:
    """A p-value as the sentences print it (the page's tables use the same words); a test that
    had no statistic has no p."""
    if p is None:
        return "p = —"
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def n_words(n_per_tier: tuple[int, int]) -> str:
    """Samples per tier, (fast, base), in the sentence's words."""
    fast, base = n_per_tier
    return f"n = {fast} per tier" if fast == base else f"n = {fast} fast / {base} base"


def t0_reason(fb: Mapping[str, Any], bb: Mapping[str, Any] | None) -> str:
    """Temperature-0 diagnostics fast-vs-base beside base-vs-base. A pair probed with
    ``repeat = 1`` has no base-vs-base pairs (their median is None): then the fast-vs-base
    figures are given alone, with why there is nothing to set them against."""
    head = (
        f"temperature 0: median Indel ratio fast-vs-base {fb['median_ratio']:.3f}, "
        f"exact matches {fb['exact_match_rate']:.0%}"
    )
    if not bb or not bb.get("n") or bb.get("median_ratio") is None:
        return f"{head} (no base-vs-base pairs to compare with: the probe ran each case once)"
    return (
        f"{head}; base-vs-base {bb['median_ratio']:.3f}, exact matches {bb['exact_match_rate']:.0%}"
    )


@dataclass(frozen=True)
class RateTest:
    """One count compared between tiers: fast k of n against base k of n."""

    what: str  # "empty answers" | "failed requests"
    fast: tuple[int, int]
    base: tuple[int, int]
    p_value: float

    def words(self) -> str:
        (fk, fn), (bk, bn) = self.fast, self.base
        return f"{self.what} fast {fk}/{fn} vs base {bk}/{bn} (Fisher {fmt_p(self.p_value)})"


def rate_test(what: str, fast: tuple[int, int], base: tuple[int, int]) -> RateTest:
    """Two-sided Fisher exact test of two proportions k/n (Fisher 1935; ``scipy.stats``);
    p = 1 when either n is 0."""
    (fk, fn), (bk, bn) = fast, base
    if fn <= 0 or bn <= 0:
        return RateTest(what, fast, base, 1.0)
    from scipy.stats import fisher_exact

    p = fisher_exact([[fk, fn - fk], [bk, bn - bk]]).pvalue
    return RateTest(what, fast, base, float(p))


@dataclass(frozen=True)
class Judgement:
    label: Label
    sentence: str
    p_value: float | None  # the MMD test's own p
    adjusted_p_values: dict[str, float] = field(default_factory=dict)  # Holm, the family
    effect: EffectSize | None = None
    rates: list[RateTest] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)  # ladder, earlier evidence: never labels


def ladder_context(
    ladder: Mapping[str, Any], *, suite: str | None, L: int, alpha: float = 0.05
) -> str:
    """The reference ladder as context, or "" when it was measured on another suite or L, or
    no rung other than A-vs-A was significant when measured."""
    if ladder.get("placeholder") or suite is None or ladder.get("suite") != suite:
        return ""
    if ladder.get("L") != L:
        return ""
    rungs = [r for r in ladder["rungs"]
             if r["key"] != "a_vs_a" and r.get("p_value", 1.0) < alpha]  # fmt: skip
    if not rungs:
        return ""
    listed = ", ".join(f"{r['label']} {r['mmd2']:.2g}" for r in rungs)
    return (f"for context, MMD² measured on suite {suite} at L = {L}: {listed} (context, not a "
            "label: MMD² depends on output length, entropy and prompts)")  # fmt: skip


def silent_tiers(tiers: Mapping[str, TierCounts]) -> list[str]:
    """ "fast tier answered nothing in 250 of 250 samples" for each tier whose every
    successful answer was empty (refusals, a reasoning model that spent its tokens thinking,
    tool calls only): the text test has nothing to compare there, and that is the finding."""
    out = []
    for tier, c in tiers.items():
        answered = c.requests - c.failed
        if answered and c.empty == answered:
            out.append(f"{tier} tier answered nothing in {c.empty} of {answered} samples")
    return out


def _inconclusive(
    fvb: MMDResult,
    tiers: Mapping[str, TierCounts],
    min_prompts: int,
    min_samples: int,
    max_dropped_share: float,
    max_failed_share: float,
) -> list[str]:
    out: list[str] = silent_tiers(tiers)
    if fvb.statistic is None:
        if not out:
            out.append("no prompt has 2 non-empty texts on both tiers")
    else:
        if fvb.n_prompts < min_prompts:
            out.append(f"n too small: {fvb.n_prompts} prompts, need {min_prompts}")
        if min(fvb.min_per_prompt) < min_samples:
            out.append(f"n too small: {min(fvb.min_per_prompt)} texts of a prompt on a tier, "
                       f"need {min_samples}")  # fmt: skip
        lost = len(fvb.dropped_prompts)
        if lost and lost / (lost + fvb.n_prompts) > max_dropped_share:
            out.append(f"{lost} of {lost + fvb.n_prompts} prompts lost (fewer than 2 texts)")
    for tier, c in tiers.items():
        if c.requests and c.failed / c.requests > max_failed_share:
            out.append(f"{c.failed}/{c.requests} {tier} requests failed, "
                       f"limit {max_failed_share:.0%}")  # fmt: skip
    return out


def judge(
    *,
    fast_vs_base: MMDResult,
    tiers: Mapping[str, TierCounts] | None = None,
    capability: PairedTable | None = None,
    capability_from_run: bool = True,
    t0_fast_vs_base: Mapping[str, Any] | None = None,
    t0_base_vs_base: Mapping[str, Any] | None = None,
    base_stability: MMDResult | None = None,
    suite: str | None = None,
    ladder: Mapping[str, Any] | None = None,
    alpha: float = 0.05,
    min_prompts: int = 25,
    min_samples: int = 5,
    max_dropped_share: float = 0.1,
    max_failed_share: float = 0.2,
) -> Judgement:
    """The label and sentence of one run (rules in the module docstring).

    ``tiers`` counts requests, failures and empty answers per tier ("fast", "base").
    ``capability_from_run`` False marks the table as another run's (context only).
    ``base_stability`` is base now against base in an earlier time window
    (:func:`evals.plan.base_stability_batches`): reported, never a label.
    """
    ladder = REFERENCE_LADDER if ladder is None else ladder
    fvb, tiers = fast_vs_base, tiers or {}
    reasons: list[str] = []
    context: list[str] = []
    fam: dict[str, float | None] = {"mmd_fast_vs_base": fvb.p_value}
    own = (
        capability if capability is not None and capability.n > 0 and capability_from_run else None
    )
    if own is not None:
        fam["mcnemar"] = own.p_value
    tested = {k: p for k, p in fam.items() if p is not None}
    adjusted = dict(zip(tested, holm(list(tested.values())), strict=True))
    effect = effect_size(fvb, alpha=alpha)

    rates = []
    if "fast" in tiers and "base" in tiers:
        f, b = tiers["fast"], tiers["base"]
        rates = [
            rate_test("failed requests", (f.failed, f.requests), (b.failed, b.requests)),
            rate_test("empty answers", (f.empty, f.requests - f.failed),
                      (b.empty, b.requests - b.failed)),
        ]  # fmt: skip
    rate_words = [r.words() for r in rates if r.fast[0] or r.base[0]]
    if fvb.statistic is not None and effect is not None:
        ci = f" [{effect.low:.2g}, {effect.high:.2g}]" if effect.low is not None else ""
        reasons.append(
            f"fast vs base: MMD² {fvb.statistic:.2g}{ci} ({fmt_p(fvb.p_value)}, "
            f"{n_words(fvb.n_per_tier)}, {fvb.n_prompts} prompts, L = {fvb.L})"
        )
    if fvb.dropped_prompts:
        reasons.append(f"prompts left out: {'; '.join(fvb.dropped_prompts)}")
    if t0_fast_vs_base and t0_fast_vs_base.get("n"):
        reasons.append(t0_reason(t0_fast_vs_base, t0_base_vs_base))
    if base_stability is not None and base_stability.p_value is not None:
        reasons.append(
            f"base now vs base in an earlier window: {fmt_p(base_stability.p_value)}"
            f" ({n_words(base_stability.n_per_tier)})"
        )
    if capability is not None and capability.n > 0 and not capability_from_run:
        context.append(
            f"unit tests of an earlier run (not counted): fast "
            f"{capability.fast_pass_rate:.0%}, base {capability.base_pass_rate:.0%}"
        )
    words = ladder_context(ladder, suite=suite, L=fvb.L, alpha=alpha)
    if words:
        context.append(words)

    problems = _inconclusive(fvb, tiers, min_prompts, min_samples, max_dropped_share,
                             max_failed_share)  # fmt: skip

    def judgement(label: Label, sentence: str, why: list[str]) -> Judgement:
        return Judgement(label, sentence, p_value=fvb.p_value, adjusted_p_values=adjusted,
                         effect=effect, rates=rates, reasons=why, context=context)  # fmt: skip

    silent = silent_tiers(tiers)
    emptier = [r for r in rates if r.what == "empty answers" and r.p_value < alpha]
    if silent and emptier:  # one tier silent, the other not: the outputs differ, by count
        sentence = f"{LABEL_WORDS['outputs_differ']} ({'; '.join(silent + rate_words)})"
        return judgement("outputs_differ", sentence, silent + reasons)
    if problems:
        sentence = f"inconclusive ({'; '.join(problems + rate_words)})"
        return judgement("inconclusive", sentence, problems + reasons)

    n = n_words(fvb.n_per_tier)
    mmd_p = adjusted["mmd_fast_vs_base"]
    if own is not None and adjusted["mcnemar"] < alpha:
        pts = f"{own.diff_points:+.0f}".replace("-", "\u2212")
        parts = [f"unit tests pass@1 {pts} points", f"McNemar {fmt_p(adjusted['mcnemar'])}",
                 f"{own.n} cases"]  # fmt: skip
        if mmd_p < alpha:
            parts.append(f"outputs differ too, {fmt_p(mmd_p)}")
        label: Label = "capability_difference"
    elif mmd_p < alpha:
        parts = [fmt_p(mmd_p), n]
        if effect is not None and effect.low is not None:
            parts.append(f"MMD² {fvb.statistic:.2g} [{effect.low:.2g}, {effect.high:.2g}]")
        label = "outputs_differ"
    else:
        parts = [fmt_p(fvb.p_value), n]
        if effect is not None and effect.detectable_80 is not None:
            parts.append(f"80% power only above MMD² {effect.detectable_80:.2g}")
        label = "no_detectable_difference"
    sentence = f"{LABEL_WORDS[label]} ({'; '.join(parts + rate_words)})"
    return judgement(label, sentence, reasons)
