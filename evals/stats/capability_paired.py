"""Is the fast tier worse, per category, from per-case pass counts accumulated over runs?

Cases rotate through runs (a budget takes some cases per run), so after a window of runs each
case has been answered a different number of times by each tier. The data per case *i* is
``(n_f, k_f, n_b, k_b)``: answers and passes of the fast and the base tier.

**Test: a stratified permutation test with the case as stratum.** Statistic: the mean over
cases of the per-case pass-rate difference, T = (1/m) Σ_i (k_f,i/n_f,i − k_b,i/n_b,i), each
case weighing the same however often it ran. Null hypothesis: within every case, the two tiers
pass with the same probability (which may differ from case to case). Then, given case *i*'s
total passes K_i, which of its N_i = n_f,i + n_b,i answers carry the passes is exchangeable,
so the fast tier's pass count is hypergeometric(N_i, K_i, n_f,i), independently across cases.
Drawing those B times gives T's exact null distribution conditional on the margins, and
p = (1 + #{|T*| ≥ |T|}) / (B + 1) (Phipson & Smyth 2010) holds its level for any mix of
samples per case and per tier. Why not a sign-flip test on the d_i: flipping a case's sign
is exact only when both tiers have the same n in that case; why not McNemar: it needs one
answer per tier per case. (The design is the stratified permutation test of a Cochran-Mantel-
Haenszel-type setting; Good 2005, "Permutation, Parametric and Bootstrap Tests", ch. 3.)

**Per category, Holm** (:func:`evals.stats.multiple.holm`) across the categories of a pair.

**Minimum detectable drop at 80% power**: the smallest drop D of the fast tier's pass rate
below the base's observed rate p that a two-sided z-test on T detects with probability 0.8,
with cases treated as homogeneous: Var(T) = (1/m²) Σ_i [p(1−p)/n_b,i + (p−D)(1−p+D)/n_f,i],
D = (z_{1−α/2} + z_{0.8}) · sd(T) solved by bisection. Case-to-case differences in pass rate
only lower the true variance (Σ p_i(1−p_i) ≤ m·p̄(1−p̄)), so the stated D is conservative.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from evals.stats.multiple import holm

POWER = 0.8
MIN_CASES = 5  # fewer paired cases: no test, no advice


@dataclass
class CaseCounts:
    category: str
    n_fast: int = 0
    pass_fast: int = 0
    n_base: int = 0
    pass_base: int = 0


def accumulate(outcomes: Iterable[tuple[str, str, str, bool]]) -> dict[str, CaseCounts]:
    """Per-case counts from ``(case key, category, tier "fast"|"base", passed)`` outcomes of a
    window of runs (the caller picks the window)."""
    counts: dict[str, CaseCounts] = {}
    for key, category, tier, passed in outcomes:
        c = counts.setdefault(key, CaseCounts(category))
        if tier == "fast":
            c.n_fast += 1
            c.pass_fast += bool(passed)
        elif tier == "base":
            c.n_base += 1
            c.pass_base += bool(passed)
        else:
            raise ValueError(f"tier: expected fast or base, got {tier!r}")
    return counts


@dataclass(frozen=True)
class PairedResult:
    category: str
    n_cases: int  # cases answered by both tiers
    n_fast: int  # answers of the fast tier over those cases
    n_base: int
    fast_rate: float | None  # mean over cases of the per-case pass rate
    base_rate: float | None
    diff_points: float | None  # 100 · T: negative = fast is worse
    p_value: float | None
    p_adjusted: float | None  # Holm across the categories tested together
    mde_points: float | None  # the drop detectable at 80% power
    alpha: float


def permutation_test(counts: list[CaseCounts], n_perm: int = 4000,
                     seed: int = 0) -> tuple[float, float]:
    """(T, two-sided p) of the stratified permutation test (module docstring)."""
    nf = np.array([c.n_fast for c in counts], dtype=float)
    nb = np.array([c.n_base for c in counts], dtype=float)
    kf = np.array([c.pass_fast for c in counts])
    kb = np.array([c.pass_base for c in counts])
    total = kf + kb
    t_obs = float(np.mean(kf / nf - kb / nb))
    rng = np.random.default_rng(seed)
    # hypergeometric(ngood=K, nbad=N-K, nsample=n_f) per case, B draws at once
    draws = rng.hypergeometric(total, (nf + nb).astype(int) - total, nf.astype(int),
                               size=(n_perm, len(counts)))
    t_null = np.mean(draws / nf - (total - draws) / nb, axis=1)
    extreme = int(np.sum(np.abs(t_null) >= abs(t_obs) - 1e-12))
    return t_obs, (1 + extreme) / (n_perm + 1)


def min_detectable_drop(base_rate: float, n_fast: Iterable[int], n_base: Iterable[int],
                        alpha: float = 0.05, power: float = POWER) -> float | None:
    """D (a fraction) from the module docstring's formula; None when nothing can be lost."""
    nf = np.asarray(list(n_fast), dtype=float)
    nb = np.asarray(list(n_base), dtype=float)
    m = len(nf)
    if m == 0 or base_rate <= 0:
        return None
    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    p = base_rate

    def gap(d: float) -> float:
        q = p - d
        sd = np.sqrt(np.sum(p * (1 - p) / nb + q * (1 - q) / nf)) / m
        return d - z * sd

    if gap(p) < 0:  # even losing everything would go unseen
        return None
    lo, hi = 0.0, p
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if gap(mid) >= 0 else (mid, hi)
    return hi


def compare(counts: dict[str, CaseCounts], alpha: float = 0.05, n_perm: int = 4000,
            seed: int = 0) -> list[PairedResult]:
    """One result per category (sorted by name), Holm-adjusted across them. The minimum
    detectable drop is computed at α / (number of categories), the level Holm's first step
    uses, so "would detect" holds after the adjustment too."""
    by_cat: dict[str, list[CaseCounts]] = {}
    for c in counts.values():
        if c.n_fast and c.n_base:
            by_cat.setdefault(c.category, []).append(c)
    cats = sorted(by_cat)
    tested = [c for c in cats if len(by_cat[c]) >= MIN_CASES]
    raw: dict[str, tuple[float, float]] = {
        c: permutation_test(by_cat[c], n_perm, seed) for c in tested}
    adjusted = dict(zip(tested, holm([raw[c][1] for c in tested]), strict=True))
    level = alpha / max(1, len(tested))
    out = []
    for cat in cats:
        rows = by_cat[cat]
        fast = float(np.mean([r.pass_fast / r.n_fast for r in rows]))
        base = float(np.mean([r.pass_base / r.n_base for r in rows]))
        mde = min_detectable_drop(base, [r.n_fast for r in rows], [r.n_base for r in rows],
                                  level) if cat in raw else None
        out.append(PairedResult(
            category=cat, n_cases=len(rows), n_fast=sum(r.n_fast for r in rows),
            n_base=sum(r.n_base for r in rows), fast_rate=fast, base_rate=base,
            diff_points=100 * raw[cat][0] if cat in raw else 100 * (fast - base),
            p_value=raw[cat][1] if cat in raw else None, p_adjusted=adjusted.get(cat),
            mde_points=100 * mde if mde is not None else None, alpha=alpha,
        ))
    return out


def routing_advice(result: PairedResult) -> str:
    """The sentence a page shows for one category (the article's routing question). A drop
    that is not significant but at least half the detectable one is "undecided", not a
    recommendation to route: absence of evidence is not evidence of absence."""
    cat = result.category
    if result.p_adjusted is None:
        return (f"`{cat}`: not enough paired cases yet ({result.n_cases} < {MIN_CASES}); "
                "no advice")
    diff = result.diff_points or 0.0
    p = f"p = {result.p_adjusted:.3g}" + (" after Holm" if result.p_adjusted != result.p_value
                                          else "")
    if result.p_adjusted < result.alpha and diff < 0:
        return f"keep `{cat}` on base: {diff:+.0f} points, {p}"
    if result.p_adjusted < result.alpha:
        return (f"route `{cat}` to the fast tier: it does better, {diff:+.0f} points, {p}")
    if diff < 0 and result.mde_points is not None and -diff >= result.mde_points / 2:
        return (f"undecided on `{cat}`: {diff:+.0f} points so far over {result.n_cases} "
                f"paired cases, not significant ({p}); would detect a "
                f"{result.mde_points:.0f}-point drop at 80% power")
    detect = (f"would detect a {result.mde_points:.0f}-point drop"
              if result.mde_points is not None else
              "too few cases to detect even a total loss")
    return (f"route `{cat}` to the fast tier: no loss detected over {result.n_cases} paired "
            f"cases ({diff:+.0f} points, {p}), {detect} at 80% power")
