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
**Paired cases needed** to detect a drop of the tolerance D₀: the same variance with the mean
per-case term v̄ = (1/m) Σ_i [p(1−p)/n_b,i + q(1−q)/n_f,i] at q = p − D₀ is v̄/m, so
m ≥ (z_{1−α/2} + z_{0.8})² · v̄ / D₀² (at the answers per case seen so far).

**Routing advice** (:func:`routing_advice`) is decided by the controlled loss detector of
:mod:`evals.stats.capability_loss` and the tolerance, never by one look's p: keep on base when
the detector found a loss; route to the fast tier only when it found none *and* the window
would detect a drop of the tolerance (detectable drop ≤ D₀) *and* the estimate is not near it
(drop < D₀/2); otherwise undecided, saying why: a window loss not yet confirmed across runs,
an estimate near the tolerance, or how many more paired cases it takes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from evals.stats.multiple import holm

POWER = 0.8
MIN_CASES = 5  # fewer paired cases: no test, no advice
TOLERANCE_POINTS = 10.0  # the default largest drop a routing advice accepts


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
    tolerance_points: float = TOLERANCE_POINTS
    cases_needed: int | None = None  # paired cases to detect a tolerance-sized drop


def permutation_test(
    counts: list[CaseCounts], n_perm: int = 4000, seed: int = 0
) -> tuple[float, float]:
    """(T, two-sided p) of the stratified permutation test (module docstring)."""
    nf = np.array([c.n_fast for c in counts], dtype=float)
    nb = np.array([c.n_base for c in counts], dtype=float)
    kf = np.array([c.pass_fast for c in counts])
    kb = np.array([c.pass_base for c in counts])
    total = kf + kb
    t_obs = float(np.mean(kf / nf - kb / nb))
    rng = np.random.default_rng(seed)
    # hypergeometric(ngood=K, nbad=N-K, nsample=n_f) per case, B draws at once
    draws = rng.hypergeometric(
        total, (nf + nb).astype(int) - total, nf.astype(int), size=(n_perm, len(counts))
    )
    t_null = np.mean(draws / nf - (total - draws) / nb, axis=1)
    extreme = int(np.sum(np.abs(t_null) >= abs(t_obs) - 1e-12))
    return t_obs, (1 + extreme) / (n_perm + 1)


def min_detectable_drop(
    base_rate: float,
    n_fast: Iterable[int],
    n_base: Iterable[int],
    alpha: float = 0.05,
    power: float = POWER,
) -> float | None:
    """D (a fraction) from the module docstring's formula; None when nothing can be lost."""
    nf = np.asarray(list(n_fast), dtype=float)
    nb = np.asarray(list(n_base), dtype=float)
    m = len(nf)
    if m == 0 or base_rate <= 0:
        return None
    from scipy.stats import norm

    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    p = base_rate

    def gap(d: float) -> float:
        q = p - d
        sd = np.sqrt(np.sum(p * (1 - p) / nb + q * (1 - q) / nf)) / m
        return float(d - z * sd)

    if gap(p) < 0:  # even losing everything would go unseen
        return None
    lo, hi = 0.0, p
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if gap(mid) >= 0 else (mid, hi)
    return hi


def cases_needed(
    base_rate: float,
    n_fast: Iterable[int],
    n_base: Iterable[int],
    tolerance: float,
    alpha: float = 0.05,
    power: float = POWER,
) -> int | None:
    """Paired cases for a detectable drop ≤ ``tolerance`` (a fraction; module docstring), None
    when the base tier passes too little to lose that much."""
    nf = np.asarray(list(n_fast), dtype=float)
    nb = np.asarray(list(n_base), dtype=float)
    p, q = base_rate, base_rate - tolerance
    if not len(nf) or q < 0:
        return None
    v = float(np.mean(p * (1 - p) / nb + q * (1 - q) / nf))
    from scipy.stats import norm

    z = norm.ppf(1 - alpha / 2) + norm.ppf(power)
    return max(MIN_CASES, math.ceil(float(z * z * v / tolerance**2)))


def compare(
    counts: dict[str, CaseCounts],
    alpha: float = 0.05,
    n_perm: int = 4000,
    seed: int = 0,
    tolerance_points: float = TOLERANCE_POINTS,
) -> list[PairedResult]:
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
        c: permutation_test(by_cat[c], n_perm, seed) for c in tested
    }
    adjusted = dict(zip(tested, holm([raw[c][1] for c in tested]), strict=True))
    level = alpha / max(1, len(tested))
    out = []
    for cat in cats:
        rows = by_cat[cat]
        fast = float(np.mean([r.pass_fast / r.n_fast for r in rows]))
        base = float(np.mean([r.pass_base / r.n_base for r in rows]))
        mde = (
            min_detectable_drop(base, [r.n_fast for r in rows], [r.n_base for r in rows], level)
            if cat in raw
            else None
        )
        need = cases_needed(
            base, [r.n_fast for r in rows], [r.n_base for r in rows], tolerance_points / 100, level
        )
        out.append(
            PairedResult(
                category=cat,
                n_cases=len(rows),
                n_fast=sum(r.n_fast for r in rows),
                n_base=sum(r.n_base for r in rows),
                fast_rate=fast,
                base_rate=base,
                diff_points=100 * raw[cat][0] if cat in raw else 100 * (fast - base),
                p_value=raw[cat][1] if cat in raw else None,
                p_adjusted=adjusted.get(cat),
                mde_points=100 * mde if mde is not None else None,
                alpha=alpha,
                tolerance_points=tolerance_points,
                cases_needed=need,
            )
        )
    return out


def routing_advice(result: PairedResult, *, loss_detected: bool) -> str:
    """The sentence a page shows for one category (module docstring, "Routing advice").
    ``loss_detected``: the category's controlled decision (the loss detector), not a p."""
    cat, tol = result.category, result.tolerance_points
    diff = result.diff_points or 0.0
    p = (
        ""
        if result.p_value is None
        else f", window p = {result.p_adjusted:.3g}"
        + (" after Holm" if result.p_adjusted != result.p_value else "")
    )
    if loss_detected:
        return (
            f"keep `{cat}` on base: loss detected across runs ({diff:+.0f} points over "
            f"{result.n_cases} paired cases{p})"
        )
    if result.p_adjusted is None:
        return (
            f"undecided on `{cat}`: {result.n_cases} paired cases, fewer than the "
            f"{MIN_CASES} a test needs"
        )
    mde = result.mde_points
    if mde is not None and mde <= tol and -diff < tol / 2:
        return (
            f"route `{cat}` to the fast tier: no loss detected over {result.n_cases} "
            f"paired cases ({diff:+.0f} points{p}), would detect a {mde:.0f}-point drop "
            f"at 80% power (tolerance {tol:.0f})"
        )
    if result.p_adjusted < result.alpha and diff < 0:
        why = (
            "the window shows a loss, not yet confirmed across runs (the loss detector "
            "decides; a single look at the window would report false losses too often)"
        )
    elif mde is not None and mde <= tol:
        why = (
            f"{diff:+.0f} points is near the {tol:.0f}-point tolerance, and no loss is "
            "detected yet; more runs will tell"
        )
    elif result.cases_needed is None:
        why = f"base passes too few of these cases to lose {tol:.0f} points"
    else:
        more = max(0, result.cases_needed - result.n_cases)
        detect = (
            f"would detect a {mde:.0f}-point drop"
            if mde is not None
            else "could not detect even a total loss"
        )
        why = (
            f"needs ~{more} more paired cases to detect a {tol:.0f}-point drop (now "
            f"{result.n_cases}: {detect})"
        )
    return f"undecided on `{cat}` ({diff:+.0f} points{p}): {why}"
