"""The verdict of a run: does the fast tier serve the same model as the base tier?

``assess`` is the old whole verdict of one audit's texts (the three MMD tests, then
``decide``). Superseded in the product by :func:`evals.stats.labels.judge` (labels that claim
only what the tests show, 80%-power wording, no cause read off the size of MMD²), which
``monitor.judging.verdict`` calls. ``decide`` and ``assess`` are kept only for
``benchmarks/verdict_validation.py``, whose real-engine figures in docs/benchmarks.md were
measured with them; they go when that benchmark is moved onto ``judge`` and re-run on pools.
The ladder, ``TierCounts``, ``fmt_p`` and the wording helpers here are the product's.

Rules of ``decide`` (docs/measures.md, "The verdict"), in order:
1. *Inconclusive* when the run cannot support a statement: fewer than ``min_prompts`` prompts or
   ``min_samples`` samples of a prompt on a tier, more than ``max_failed_share`` failed requests
   or empty outputs on a tier, no base-vs-base calibration, or a calibration that rejects
   (base-vs-base or fast-vs-fast p < α: the tier differs from itself, so there is no stable
   noise floor to measure a difference against).
2. The evidence is the MMD test fast-vs-base and, when unit tests ran, McNemar on the paired
   pass/fail table; their p-values are Holm-adjusted as one family and ``p_value`` is the
   smallest adjusted one (a valid p-value for "no difference at all").
3. Nothing below α → *no detectable difference*, with what the run could have missed. Never
   "same model": absence of evidence is not evidence of absence.
4. A difference → graded against ``REFERENCE_LADDER`` on a log scale: *different model* when
   the statistic is nearest the different-model rung (i.e. above the geometric mean of the
   largest same-model rung and the different-model rung) or the pass rates differ
   significantly (a numerics-level change should not move unit-test pass rates measurably);
   otherwise *numerics-scale difference* (quantization, kernels, batching). A ladder measured
   at another L cannot grade; a difference is then treated as a different model, with a reason.

``min_detectable_effect`` is the (1 − α) quantile of the fast-vs-base permutation null: a
statistic below it cannot reach p < α in this run, so it is the smallest effect the run could
flag (a detection threshold, not an 80%-power effect size).
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from evals.stats.capability import PairedTable
from evals.stats.mmd import DEFAULT_B, MMDResult, mmd_test
from evals.stats.multiple import holm

Label = Literal[
    "no_detectable_difference", "numerics_scale_difference", "different_model", "inconclusive"
]
LADDER_PATH = Path(__file__).with_name("reference_ladder.json")

# PLACEHOLDER rungs, NOT measurements: orders of magnitude guessed for L = 1000 at
# temperature 1. To be replaced by MMD² measured on real engines (llama.cpp: a model against
# itself, its Q8_0 and Q4_0 quantizations, and a different model), written to
# evals/stats/reference_ladder.json in this same shape.
PLACEHOLDER_LADDER: dict[str, Any] = {
    "placeholder": True,
    "note": "placeholder values, not measured yet",
    "L": 1000,
    "rungs": [
        {"key": "a_vs_a", "label": "the same model against itself", "mmd2": 0.0},
        {"key": "q8_0", "label": "an 8-bit quantization of the same model", "mmd2": 0.001},
        {"key": "q4_0", "label": "a 4-bit quantization of the same model", "mmd2": 0.005},
        {"key": "different_model", "label": "a different model", "mmd2": 0.05},
    ],
}
DIFFERENT = "different_model"
FRACTIONS = (
    (1 / 20, "a twentieth"), (1 / 10, "a tenth"), (1 / 5, "a fifth"), (1 / 4, "a quarter"),
    (1 / 3, "a third"), (1 / 2, "half"), (2 / 3, "two thirds"), (3 / 4, "three quarters"),
)  # fmt: skip


def load_reference_ladder(path: Path = LADDER_PATH) -> dict[str, Any]:
    """The measured ladder when its JSON file exists, else ``PLACEHOLDER_LADDER``."""
    if not path.exists():
        return PLACEHOLDER_LADDER
    ladder = json.loads(path.read_text())
    keys = [r["key"] for r in ladder["rungs"]]
    if DIFFERENT not in keys or "L" not in ladder:
        raise ValueError(f"{path}: needs 'L' and a '{DIFFERENT}' rung")
    return ladder


REFERENCE_LADDER = load_reference_ladder()


@dataclass(frozen=True)
class TierCounts:
    """Requests of one tier in the run: total, failed (any error class), and successful
    requests whose output text was empty."""

    requests: int
    failed: int = 0
    empty: int = 0


@dataclass(frozen=True)
class Verdict:
    label: Label
    sentence: str
    p_value: float | None  # smallest Holm-adjusted p of the family
    adjusted_p_values: dict[str, float] = field(default_factory=dict)
    statistic: float | None = None  # MMD² fast vs base
    noise_floor: float | None = None  # MMD² base vs base (two independent base batches)
    min_detectable_effect: float | None = None
    effect: str | None = None  # the statistic in ladder words
    reasons: list[str] = field(default_factory=list)


def fmt_p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.2g}"


def _fraction_words(r: float) -> str:
    if r > 1.15:
        return f"{r:.1f} times"
    if r > 0.87:
        return "about"
    if r < 1 / 30:
        return "less than a twentieth of"
    words = min(FRACTIONS, key=lambda f: abs(math.log(r / f[0])))[1]
    return f"{words} of"


def _gradable(ladder: Mapping[str, Any], alpha: float = 0.05) -> list[dict[str, Any]]:
    """Rungs a statistic may be graded against: positive, and significant when measured (a
    measured rung carries its own p). A rung its own measurement could not tell from chance
    (on real engines: A-vs-A and Q8_0) is noise, and "about the distance of" it would dress a
    false alarm up as a finding (benchmarks/verdict_validation.py)."""
    return [r for r in ladder["rungs"] if r["mmd2"] > 0 and r.get("p_value", 0.0) < alpha]


def grade_effect(statistic: float | None, ladder: Mapping[str, Any]) -> tuple[str, str, str]:
    """(nearest rung key, "about the distance of …", "a tenth of the distance to …") for an
    MMD² on the ladder's log scale, among the gradable rungs; ("", "", "") when it cannot be
    graded (≤ 0, no rungs). The third part is empty when the nearest rung is the different
    model itself."""
    rungs = _gradable(ladder)
    if statistic is None or statistic <= 0 or not rungs:
        return "", "", ""
    lowest = min(rungs, key=lambda r: r["mmd2"])
    different = next(r for r in ladder["rungs"] if r["key"] == DIFFERENT)
    if statistic < lowest["mmd2"] / 2:
        nearest, near = lowest, f"below the distance of {lowest['label']}"
    else:
        nearest = min(rungs, key=lambda r: abs(math.log(statistic / r["mmd2"])))
        near = f"about the distance of {nearest['label']}"
    frac = ""
    if nearest is not different:
        frac = (
            f"{_fraction_words(statistic / different['mmd2'])} the distance to {different['label']}"
        )
    return nearest["key"], near, frac


def reach(threshold: float, ladder: Mapping[str, Any]) -> str:
    """What a run with this detection threshold would catch and could miss, in ladder words:
    the smallest reference difference above the threshold and the largest one below it. (The
    nearest rung to the threshold said the wrong thing: a run whose threshold lay near Q4_0
    caught Q4_0 every time and missed Q8_0.)"""
    rungs = sorted((r for r in ladder["rungs"] if r["key"] != "a_vs_a" and r["mmd2"] > 0),
                   key=lambda r: r["mmd2"])  # fmt: skip
    caught = [r for r in rungs if r["mmd2"] > threshold]
    missed = [r for r in rungs if r["mmd2"] <= threshold]
    parts = []
    if caught:
        parts.append(f"it would catch {caught[0]['label']}")
    if missed:
        parts.append(f"could miss {missed[-1]['label']}")
    return ", ".join(parts)


def _n_words(n_per_tier: tuple[int, int]) -> str:
    fast, base = n_per_tier
    return f"n = {fast} per tier" if fast == base else f"n = {fast} fast / {base} base"


def _points(diff: float) -> str:
    return f"pass@1 {diff:+.0f} points".replace("-", "\u2212")


def _t0_reason(fb: Mapping[str, Any], bb: Mapping[str, Any] | None) -> str:
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


def _insufficient(
    fvb: MMDResult,
    calibrations: Mapping[str, MMDResult | None],
    tiers: Mapping[str, TierCounts],
    alpha: float,
    calibration_alpha: float,
    min_prompts: int,
    min_samples: int,
    max_failed_share: float,
) -> list[str]:
    out = []
    if fvb.statistic is None:
        out.append("no prompt has 2 samples on both tiers")
    elif fvb.n_prompts < min_prompts:
        out.append(f"n too small: {fvb.n_prompts} prompts, need {min_prompts}")
    if fvb.statistic is not None and min(fvb.min_per_prompt) < min_samples:
        out.append(
            f"n too small: {min(fvb.min_per_prompt)} samples of a prompt on a tier, "
            f"need {min_samples}"
        )
    for tier, c in tiers.items():
        if c.requests and c.failed / c.requests > max_failed_share:
            out.append(
                f"{c.failed / c.requests:.0%} of {tier} requests failed, "
                f"limit {max_failed_share:.0%}"
            )
        ok = c.requests - c.failed
        if ok and c.empty / ok > max_failed_share:
            out.append(
                f"{c.empty / ok:.0%} of {tier} outputs were empty, limit {max_failed_share:.0%}"
            )
    for name, cal in calibrations.items():
        tier = name.split("_vs_")[0]
        if cal is None and name == "base_vs_base":
            out.append("no base-vs-base calibration (two independent base batches)")
        elif cal is not None and cal.p_value is None:
            out.append(f"{name.replace('_', '-')} calibration has no usable prompt")
        elif cal is not None and cal.p_value < calibration_alpha:
            out.append(
                f"the {tier} tier differs from itself: {name.replace('_', '-')} "
                f"{fmt_p(cal.p_value)}, no stable noise floor"
            )
    return out


def decide(
    *,
    fast_vs_base: MMDResult,
    base_vs_base: MMDResult | None,
    fast_vs_fast: MMDResult | None = None,
    t0_fast_vs_base: Mapping[str, Any] | None = None,
    t0_base_vs_base: Mapping[str, Any] | None = None,
    capability: PairedTable | None = None,
    tiers: Mapping[str, TierCounts] | None = None,
    alpha: float = 0.05,
    calibration_alpha: float = 0.01,
    min_prompts: int = 25,
    min_samples: int = 5,
    max_failed_share: float = 0.2,
    ladder: Mapping[str, Any] | None = None,
) -> Verdict:
    """The verdict of one run (rules in the module docstring).

    ``fast_vs_base`` is ``mmd_test(fast, base)`` (so ``n_per_tier`` is (fast, base));
    ``t0_*`` are :func:`evals.similarity.compare_pairs` summaries of temperature-0 answers;
    ``tiers`` maps "fast"/"base" to their request counts.
    ``calibration_alpha`` is stricter than ``alpha`` on purpose: a tier is declared unstable
    (no noise floor, so "inconclusive") only on strong evidence; at 0.05 each of the two
    calibrations would void about one honest run in twenty by chance alone.
    """
    ladder = REFERENCE_LADDER if ladder is None else ladder
    fvb = fast_vs_base
    reasons: list[str] = []
    family = {"mmd_fast_vs_base": fvb.p_value}
    if capability is not None and capability.n > 0:
        family["mcnemar"] = capability.p_value
    tested = {k: p for k, p in family.items() if p is not None}
    adjusted = dict(zip(tested, holm(list(tested.values())), strict=True))
    p_value = min(adjusted.values()) if adjusted else None
    mde = fvb.critical_value(alpha)
    noise = base_vs_base.statistic if base_vs_base is not None else None
    common = dict(
        p_value=p_value, adjusted_p_values=adjusted, statistic=fvb.statistic, noise_floor=noise,
        min_detectable_effect=mde,
    )  # fmt: skip

    if fvb.statistic is not None:
        reasons.append(
            f"fast vs base: MMD² {fvb.statistic:.2g} ({fmt_p(fvb.p_value)}, "
            f"{_n_words(fvb.n_per_tier)}, {fvb.n_prompts} prompts, L = {fvb.L})"
        )
    for name, cal in (("base vs base", base_vs_base), ("fast vs fast", fast_vs_fast)):
        if cal is not None and cal.statistic is not None:
            reasons.append(f"noise floor {name}: MMD² {cal.statistic:.2g} ({fmt_p(cal.p_value)})")
    if t0_fast_vs_base and t0_fast_vs_base.get("n"):
        reasons.append(_t0_reason(t0_fast_vs_base, t0_base_vs_base))
    if capability is not None and capability.n > 0:
        reasons.append(
            f"unit tests on {capability.n} cases: fast {capability.fast_pass_rate:.0%}, base "
            f"{capability.base_pass_rate:.0%} ({_points(capability.diff_points)}, McNemar "
            f"{fmt_p(capability.p_value)})"
        )
    if ladder.get("placeholder"):
        reasons.append("effect grading uses placeholder reference values (not measured yet)")

    problems = _insufficient(
        fvb, {"base_vs_base": base_vs_base, "fast_vs_fast": fast_vs_fast}, tiers or {},
        alpha, calibration_alpha, min_prompts, min_samples, max_failed_share,
    )  # fmt: skip
    if problems:
        sentence = f"inconclusive ({'; '.join(problems)})"
        return Verdict("inconclusive", sentence, reasons=problems + reasons, **common)

    ladder_ok = ladder.get("L") == fvb.L
    if not ladder_ok:
        reasons.append(f"effect not graded: reference ladder measured at L = {ladder.get('L')}")
    mmd_hit = adjusted["mmd_fast_vs_base"] < alpha
    cap_hit = adjusted.get("mcnemar", 1.0) < alpha
    cap_words = []
    if "mcnemar" in adjusted:
        cap_words = [_points(capability.diff_points) + ("" if cap_hit else " (not significant)")]

    if not (mmd_hit or cap_hit):
        miss = f"this run could miss differences below MMD² {mde:.2g}"
        words = reach(mde, ladder) if ladder_ok else ""
        miss += f": {words}" if words else ""
        # The primary test's own p: a Holm-adjusted family p (often 1) would hide how far from
        # significance the MMD test was; the adjusted values stay in ``adjusted_p_values``.
        parts = [fmt_p(fvb.p_value), _n_words(fvb.n_per_tier), miss]
        sentence = f"no detectable difference ({'; '.join(parts)})"
        return Verdict("no_detectable_difference", sentence, reasons=reasons, **common)

    rung, near, frac = grade_effect(fvb.statistic, ladder) if ladder_ok else ("", "", "")
    effect = "; ".join(w for w in (near, frac) if w) or None
    if not rung and not cap_hit:
        reasons.append("difference of ungraded size: treated as a different model")
    different = cap_hit or rung in ("", DIFFERENT)
    label: Label = "different_model" if different else "numerics_scale_difference"
    parts = [fmt_p(p_value), *cap_words, *([effect] if effect else [])]
    sentence = (
        f"{label.replace('_', ' ').replace('numerics scale', 'numerics-scale')} "
        f"({'; '.join(parts)})"
    )
    return Verdict(label, sentence, reasons=reasons, effect=effect, **common)


Texts = Mapping[Hashable, Sequence[str]]


@dataclass(frozen=True)
class Assessment:
    """The three tests of an audit and the verdict they give."""

    fast_vs_base: MMDResult
    base_vs_base: MMDResult | None
    fast_vs_fast: MMDResult | None
    verdict: Verdict


def halves(texts: Texts) -> tuple[dict[Hashable, list[str]], dict[Hashable, list[str]]]:
    """Even against odd samples of one batch, per prompt: the fast-vs-fast calibration."""
    return (
        {k: list(v[0::2]) for k, v in texts.items()},
        {k: list(v[1::2]) for k, v in texts.items()},
    )


def assess(
    fast: Texts,
    base0: Texts,
    base1: Texts | None,
    *,
    seed: int,
    B: int = DEFAULT_B,
    alpha: float = 0.05,
    t0_fast_vs_base: Mapping[str, Any] | None = None,
    t0_base_vs_base: Mapping[str, Any] | None = None,
    capability: PairedTable | None = None,
    tiers: Mapping[str, TierCounts] | None = None,
) -> Assessment:
    """Fast against base batch 0, calibrated by base batch 0 against batch 1 (the noise floor)
    and by fast against itself (even vs odd samples; left out when it has no statistic), each
    ``mmd_test`` on its own seed (seed, seed + 1, seed + 2), then :func:`decide`."""
    fvb = mmd_test(fast, base0, B=B, seed=seed)
    bvb = mmd_test(base0, base1, B=B, seed=seed + 1) if base1 else None
    fvf = mmd_test(*halves(fast), B=B, seed=seed + 2)
    fvf = fvf if fvf.statistic is not None else None
    verdict = decide(
        fast_vs_base=fvb,
        base_vs_base=bvb,
        fast_vs_fast=fvf,
        t0_fast_vs_base=t0_fast_vs_base,
        t0_base_vs_base=t0_base_vs_base,
        capability=capability,
        tiers=tiers,
        alpha=alpha,
    )
    return Assessment(fvb, bvb, fvf, verdict)
