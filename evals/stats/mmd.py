"""Two-sample MMD test with a per-prompt character Hamming kernel.

Source: Gao, Liang & Guestrin, "Model Equality Testing: Which Model Is This API Serving?",
ICLR 2025 (arXiv:2410.20247). A sample is a (prompt, completion) pair and the kernel is

    k((p, x), (p', y)) = 1[p = p'] · (1/L) · #{i < L : x_i = y_i}

on completions right-padded / truncated to L characters. Code points are stored shifted by
one so that padding (0) differs from a real NUL character, and lone surrogates are kept
("surrogatepass"): any str the vendor returned can be tested. Padding is part of the text
on purpose: two answers that both end early agree about "the answer has ended", so output
length is part of what is compared. Positions where every text is padding add a constant to
the kernel, which cancels in MMD² (it only shrinks the scale), so short outputs do not bias the
test; they do make statistics measured at different L incomparable, hence ``L`` is recorded.

We default to L = 1000 characters: enough for the opening of a 256-token answer, where
temperature-1 samples of the same model still overlap, while the Gram matrices stay cheap.

The statistic is the mean over prompts of the per-prompt unbiased MMD² (Gretton et al., JMLR
2012, eq. 3) — with equal sample counts this is exactly the pair-count-normalised statistic of
the paper's implementation — so it is unbiased even when prompts have unequal sample counts,
and it does not grow or shrink with the number of prompts (statistics of different suites are
on one scale). The null is the permutation of tier labels *within* each prompt, which is exact
when the two tiers are exchangeable given the prompt; p = (1 + #{T_b ≥ T}) / (B + 1)
(Phipson & Smyth 2010, never 0).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evals.stats.textprep import prepare

DEFAULT_L = 1000
DEFAULT_B = 1000


@dataclass(frozen=True)
class MMDResult:
    """Outcome of :func:`mmd_test`. ``statistic`` and ``p_value`` are None when no prompt
    had at least two samples on each side (then ``dropped_prompts`` says why)."""

    statistic: float | None
    p_value: float | None
    null_stats: np.ndarray  # the B permutation statistics, for plotting
    n_prompts: int
    n_per_tier: tuple[int, int]  # samples used from a and from b
    L: int
    B: int
    min_per_prompt: tuple[int, int] = (0, 0)  # fewest samples of one prompt, a and b
    dropped_prompts: list[str] = field(default_factory=list)  # "key: reason"
    per_prompt: np.ndarray = field(default_factory=lambda: np.empty(0))  # observed, per prompt
    n_empty: tuple[int, int] = (0, 0)  # empty answers (after normalising) left out, a and b

    def critical_value(self, alpha: float = 0.05) -> float | None:
        """The (1 − α) quantile of the permutation null: the smallest statistic this run
        could flag at level α (a detection threshold, not an 80%-power effect size)."""
        if self.null_stats.size == 0:
            return None
        return float(np.quantile(self.null_stats, 1.0 - alpha))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the null is reduced to its quantiles)."""
        qs = (0.5, 0.9, 0.95, 0.99)
        null_q = (
            {f"q{int(q * 100)}": float(np.quantile(self.null_stats, q)) for q in qs}
            if self.null_stats.size  # no null when no prompt was usable (e.g. a silent tier)
            else {}
        )
        return {
            "statistic": self.statistic,
            "p_value": self.p_value,
            "n_prompts": self.n_prompts,
            "n_per_tier": list(self.n_per_tier),
            "min_per_prompt": list(self.min_per_prompt),
            "L": self.L,
            "B": self.B,
            "null_quantiles": null_q,
            "n_empty": list(self.n_empty),
            "dropped_prompts": list(self.dropped_prompts),
        }


def encode(texts: Sequence[str], L: int = DEFAULT_L) -> np.ndarray:
    """Texts as an (n, L) uint32 array of code points + 1, truncated to L, 0-padded."""
    out = np.zeros((len(texts), L), dtype=np.uint32)
    for i, text in enumerate(texts):
        codes = np.frombuffer(text[:L].encode("utf-32-le", "surrogatepass"), dtype="<u4")
        out[i, : codes.size] = codes + 1
    return out


def hamming_gram(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """k(x_i, y_j) = share of the L positions where the encoded texts agree, shape (n, m)."""
    gram: np.ndarray = (x[:, None, :] == y[None, :, :]).mean(axis=-1)
    return gram


def _usable(
    samples_a: Mapping[Any, Sequence[str]], samples_b: Mapping[Any, Sequence[str]]
) -> tuple[list[Hashable], list[str]]:
    keys, dropped = [], []
    for key in sorted(set(samples_a) | set(samples_b), key=str):
        na, nb = len(samples_a.get(key, ())), len(samples_b.get(key, ()))
        if na < 2 or nb < 2:
            dropped.append(f"{key}: {na} vs {nb} samples (need 2 on each side)")
        else:
            keys.append(key)
    return keys, dropped


def _statistics(
    labels: np.ndarray, gram0: np.ndarray, weights: np.ndarray, per_prompt: bool = False
) -> np.ndarray:
    """The statistic for a stack of labelings, by index arithmetic on precomputed Grams.

    labels (B, P, N) is 1 where a sample is labelled tier a (0 on padding); gram0 (P, N, N)
    is each prompt's Gram with a zero diagonal and zero padding. With s the label vector,
    r = G0·1 and T = 1ᵀG0·1: S_aa = sᵀG0s, S_ab = s·r − S_aa, S_bb = T − 2 s·r + S_aa, and
    the prompt's unbiased MMD² is S_aa/(a(a−1)) + S_bb/(b(b−1)) − 2 S_ab/(ab).
    """
    row = gram0.sum(axis=2)  # (P, N)
    total = row.sum(axis=1)  # (P,)
    s_aa = np.einsum("bpi,pij,bpj->bp", labels, gram0, labels, optimize=True)
    s_r = np.einsum("bpi,pi->bp", labels, row)
    s_ab = s_r - s_aa
    s_bb = total - 2.0 * s_r + s_aa
    w_aa, w_bb, w_ab = weights
    terms = w_aa * s_aa + w_bb * s_bb - 2.0 * w_ab * s_ab
    out: np.ndarray = terms if per_prompt else terms.sum(axis=1)
    return out


def mmd_test(
    samples_a: Mapping[Any, Sequence[str]],
    samples_b: Mapping[Any, Sequence[str]],
    *,
    L: int = DEFAULT_L,
    B: int = DEFAULT_B,
    seed: int = 0,
    normalise: bool = True,
) -> MMDResult:
    """Test whether two tiers' completions come from one distribution, prompt by prompt.

    ``samples_x`` maps a prompt key to that tier's completions (temperature > 0). Prompts
    missing on a side or with fewer than 2 samples on a side are dropped and listed (the
    per-prompt unbiased estimator needs two). Each prompt's Gram matrix is computed once;
    every permutation is then index arithmetic on those matrices (:func:`_statistics`).
    With ``normalise`` (the default) texts are first put in NFC and stripped, and empty
    answers left out and counted (:mod:`evals.stats.textprep`): formatting is not a model.
    """
    if B < 1:
        raise ValueError("B must be at least 1")
    empty = (0, 0)
    if normalise:
        (samples_a, ea), (samples_b, eb) = prepare(samples_a), prepare(samples_b)
        empty = (ea, eb)
    keys, dropped = _usable(samples_a, samples_b)
    if not keys:
        return MMDResult(None, None, np.empty(0), 0, (0, 0), L, B, (0, 0), dropped,
                         n_empty=empty)  # fmt: skip

    n_a = np.array([len(samples_a[k]) for k in keys])
    n_b = np.array([len(samples_b[k]) for k in keys])
    P, N = len(keys), int((n_a + n_b).max())
    gram0 = np.zeros((P, N, N))
    for p, key in enumerate(keys):
        x = encode(list(samples_a[key]) + list(samples_b[key]), L)
        g = hamming_gram(x, x)
        np.fill_diagonal(g, 0.0)
        gram0[p, : len(x), : len(x)] = g
    weights = np.stack([1.0 / (n_a * (n_a - 1)), 1.0 / (n_b * (n_b - 1)), 1.0 / (n_a * n_b)])
    weights /= P

    positions = np.arange(N)
    observed_labels = (positions[None, :] < n_a[:, None]).astype(float)[None]
    per_prompt = _statistics(observed_labels, gram0, weights, per_prompt=True)[0] * P
    observed = float(per_prompt.mean())

    # A uniform random permutation within each prompt: rank i.i.d. uniform keys, with
    # padding pushed last; the a_p lowest ranks are labelled tier a.
    rng = np.random.default_rng(seed)
    keys_u = rng.random((B, P, N))
    keys_u[:, positions[None, :] >= (n_a + n_b)[:, None]] = np.inf
    ranks = keys_u.argsort(axis=2).argsort(axis=2)
    labels = (ranks < n_a[None, :, None]).astype(float)
    null = _statistics(labels, gram0, weights)

    # Float tolerance: a labeling equivalent to the observed one (a reordering within a tier)
    # gives the same statistic up to rounding and must count as "as extreme".
    tol = 1e-12 * max(1.0, abs(observed))
    p_value = (1.0 + np.count_nonzero(null >= observed - tol)) / (B + 1.0)
    return MMDResult(
        statistic=observed,
        p_value=float(p_value),
        null_stats=null,
        n_prompts=P,
        n_per_tier=(int(n_a.sum()), int(n_b.sum())),
        L=L,
        B=B,
        min_per_prompt=(int(n_a.min()), int(n_b.min())),
        dropped_prompts=dropped,
        per_prompt=per_prompt,
        n_empty=empty,
    )
