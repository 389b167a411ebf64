"""A vendor's speed claim in its own metric and form, and how it is checked (docs/measures.md,
"Claims").

Vendors promise different things: Anthropic "up to 2.5× output tokens per second" (a factor
over the standard tier), OpenAI "99 % of requests > 80 tok/s" (a floor at a percentile),
others "P95 TTFT < 300 ms". A claim is therefore four fields:

- ``metric``: ``output_tps`` (output tokens / (E2E − TTFT), ``evals.latency.output_tps``'s
  "generation" definition, the one vendors selling output speed use), ``ttft`` or ``e2e``.
- ``form``: ``factor`` (fast over base, a speed-up) or ``floor`` (an absolute value the
  fast tier meets at a percentile).
- ``value``: the factor (×), or the floor (tok/s for output_tps, ms for ttft and e2e).
- ``percentile``: floor only, in (0, 100): the share of requests that must meet the floor.

Checks, each with an interval so a noisy week is "not yet" rather than a verdict:

- factor: the speed-up in the claim's metric and its cluster-bootstrap interval
  (``evals.stats.speedup_runs``); confirmed when the lower bound reaches the claim,
  contradicted when the upper bound is below it, else not yet.
- floor: the share of fast-tier requests meeting the floor with its Wilson score interval
  (Wilson 1927, "Probable inference, the law of succession, and statistical inference",
  JASA 22:209-212); confirmed when the lower bound reaches the percentile, contradicted when
  the upper bound is below it, else not yet. A failed request counts as missing the floor
  (it delivered nothing); a request without the value (one output token has no output
  speed) is left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Metric = Literal["output_tps", "ttft", "e2e"]
Form = Literal["factor", "floor"]
Word = Literal["confirmed", "contradicted", "not yet"]
METRICS: dict[str, str] = {"output_tps": "output tok/s", "ttft": "TTFT", "e2e": "E2E"}
FORMS: dict[str, str] = {"factor": "a factor over base", "floor": "a floor at a percentile"}
UNITS: dict[str, str] = {"output_tps": "tok/s", "ttft": "ms", "e2e": "ms"}
Z95 = 1.959963984540054  # two-sided 95 % normal quantile


@dataclass(frozen=True)
class Claim:
    metric: Metric
    form: Form
    value: float
    percentile: float | None = None

    @property
    def higher_is_better(self) -> bool:
        """Output speed must stay above its floor; a duration below it."""
        return self.metric == "output_tps"

    def text(self) -> str:
        """The claim as the vendor words it: "2.5× output tok/s", "99 % of requests ≥ 80
        tok/s", "95 % of requests TTFT ≤ 300 ms"."""
        name = METRICS[self.metric]
        if self.form == "factor":
            return f"{self.value:g}× {name}"
        sign = "≥" if self.higher_is_better else "≤"
        what = "" if self.metric == "output_tps" else f"{name} "
        return f"{self.percentile:g} % of requests {what}{sign} {self.value:g} {UNITS[self.metric]}"


def problems(
    metric: Any, form: Any, value: Any, percentile: Any, *, where: str = "claim"
) -> list[str]:
    """Everything wrong with a claim's fields, one "field: problem" per line (empty: valid)."""
    out = []
    if metric not in METRICS:
        out.append(f"{where}.metric: must be one of {', '.join(METRICS)} (got {metric!r})")
    if form not in FORMS:
        out.append(f"{where}.form: must be one of {', '.join(FORMS)} (got {form!r})")
    if not _number(value) or not value > 0:
        out.append(f"{where}.value: must be a number > 0 (got {value!r})")
    if form == "floor" and percentile is None:
        out.append(f"{where}.percentile: a floor needs the percentile it holds at, e.g. 99")
    if percentile is not None and (not _number(percentile) or not 0 < percentile < 100):
        out.append(f"{where}.percentile: must be between 0 and 100 exclusive (got {percentile!r})")
    if form == "factor" and percentile is not None:
        out.append(f"{where}.percentile: only a floor has a percentile; a factor has none")
    return out


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of the proportion k/n (module docstring); (0, 1) when n = 0."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def judge(low: float | None, high: float | None, target: float) -> Word | None:
    """Confirmed when the interval's low reaches the target, contradicted when its high is
    below it, else not yet; None without an interval."""
    if low is None or high is None:
        return None
    return "confirmed" if low >= target else "contradicted" if high < target else "not yet"


@dataclass(frozen=True)
class FloorCheck:
    n: int  # requests with a value or failed
    met: int
    share: float | None
    low: float | None
    high: float | None
    word: Word | None  # None: no request yet

    def line(self, claim: Claim) -> str:
        """ "97.5 % [95.1, 98.8] of 400 requests met it (claim: 99 %): contradicted"."""
        if not self.n or self.share is None or self.low is None or self.high is None:
            return f"claim {claim.text()}: not yet (no fast-tier request)"
        return (
            f"claim {claim.text()}: {self.word} · {100 * self.share:.1f} % "
            f"[{100 * self.low:.1f}, {100 * self.high:.1f}] of {self.n} requests met it"
        )


def check_floor(claim: Claim, values: Iterable[float | None | bool]) -> FloorCheck:
    """The floor claim over the fast tier's requests: ``values`` holds each request's value in
    the claim's metric, None for a request without one (left out) and False for a failed
    request (a miss)."""
    if claim.form != "floor" or claim.percentile is None:
        raise ValueError("check_floor needs a floor claim with a percentile")
    n = met = 0
    for v in values:
        if v is None:
            continue
        n += 1
        if v is False:
            continue
        met += (v >= claim.value) if claim.higher_is_better else (v <= claim.value)
    if not n:
        return FloorCheck(0, 0, None, None, None, None)
    low, high = wilson(met, n)
    return FloorCheck(n, met, met / n, low, high, judge(low, high, claim.percentile / 100))
