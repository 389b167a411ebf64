"""Numbers and terms for people: one place for how a page words a statistic.

Why one module: the same e-value, p-value or MMD² appears on the verdict page, the overview,
the worse page and the SLA report; formatted in each template it drifted ("0.000" here,
"3898952.877" there). Every filter returns text a lead can read aloud, and where rounding hides
the raw value, the raw value goes in a tooltip. ``{% term "mmd" %}`` links a technical word to
its definition on the metrics page; ``GLOSSARY`` is the one list of those words, and a test
checks that each anchor exists there.
"""

from __future__ import annotations

import math

from django import template
from django.urls import reverse
from django.utils.html import format_html

from monitor.derived.rollups import failed_class

register = template.Library()

# anchor on the metrics page → (the word as pages print it, a one-line tooltip)
GLOSSARY: dict[str, tuple[str, str]] = {
    "mmd": ("MMD", "maximum mean discrepancy: how far apart two tiers' output distributions are"),
    "e-detector": ("e-detector", "adds up the evidence of every audit; alarms past a threshold"),
    "e-value": ("e-value", "evidence against 'same outputs': 1 is none, 20 is strong"),
    "verdict": ("verdict", "what one audit could and could not detect"),
    "drift": ("drift", "a tier changed against its own frozen baseline"),
    "baseline": ("baseline", "the frozen set of early probe runs drift is measured against"),
    "holm": ("Holm", "the correction that keeps several tests at one false-alarm rate"),
    "power": ("power", "the chance a test catches a difference of a given size"),
    "wilson": ("Wilson", "the interval around a rate such as availability or a pass rate"),
    "mcnemar": ("McNemar", "the paired test of unit-test passes, case by case"),
    "ttft": ("TTFT", "time to first token"),
    "e2e": ("E2E", "end-to-end latency: request sent to last token"),
    "tpot": ("TPOT", "time per output token after the first"),
    "goodput": ("goodput", "share of requests meeting every SLO, errors counted"),
    "routing": ("routing advice", "which tier a team should send a category of work to"),
    "p-value": ("p", "how often chance alone gives a difference this large"),
    "episode": ("episode", "one tier's play of a multi-turn agent task, request by request"),
    "task-success": (
        "task success",
        "the environment's state and the calls' results after every turn match the benchmark's",
    ),
}


@register.simple_tag
def term(anchor: str, label: str | None = None) -> str:
    """A technical word linked to its definition: ``{% term "mmd" %}`` or with its own label."""
    word, tip = GLOSSARY[anchor]  # a KeyError names a word missing from the glossary
    href = reverse("monitor:metrics") + "#" + anchor
    return format_html('<a class="term" href="{}" title="{}">{}</a>', href, tip, label or word)


def _finite(value: object) -> float | None:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


@register.filter
def times(value: object) -> str:
    """A large factor as a person says it: 3898952.9 → "3.9 M×", 25920 → "25,920×",
    12.345 → "12.3×", 0.42 → "0.42×"."""
    if isinstance(value, float) and math.isinf(value):
        return "∞×" if value > 0 else "—"
    x = _finite(value)
    if x is None:
        return "—"
    for size, suffix in ((1e12, " T"), (1e9, " G"), (1e6, " M")):
        if abs(x) >= size:
            return f"{x / size:.2g}{suffix}×" if abs(x) < 10 * size else f"{x / size:,.0f}{suffix}×"
    if abs(x) >= 1000:
        return f"{x:,.0f}×"
    return f"{x:.3g}×"


@register.simple_tag
def evidence(value: object, alarm_at: object) -> str:
    """An e-value with its threshold: "evidence 3.9 M× against 'same outputs', alarm at 25,920×"."""
    return f"evidence {times(value)} against 'same outputs', alarm at {times(alarm_at)}"


@register.filter
def pvalue(value: object) -> str:
    """A p-value never printed as "0.000": below 0.001 it is "< 0.001"; from 0.001 to 0.01 three
    decimals; above, two significant digits (0.045 stays below 0.05, as ``labels.fmt_p``)."""
    p = _finite(value)
    if p is None:
        return "—"
    if p < 0.001:
        return "< 0.001"
    return f"{p:.3f}" if p < 0.01 else f"{p:.2g}"


@register.filter
def p_is(value: object) -> str:
    """A p-value in a sentence: "p < 0.001" or "p = 0.04"."""
    words = pvalue(value)
    return f"p {words}" if words.startswith("<") else f"p = {words}"


@register.filter
def mmd2(value: object) -> str:
    """An MMD² for people. The unbiased estimate is negative when the tiers differ less than
    sampling noise; a negative number reads as an error, so it is "≈ 0 (no difference
    measurable)" with the raw value in the tooltip. Positive values keep 3 significant digits."""
    x = _finite(value)
    if x is None:
        return "—"
    if x <= 0:
        return format_html(
            '<span class="approx" title="raw estimate {}: below sampling noise">'
            "≈ 0 (no difference measurable)</span>",
            f"{x:.3g}",
        )
    return f"{x:.3g}"


@register.filter
def check_class(sample: object) -> str:
    """A failed check's class as every page names it (``rollups.failed_class``)."""
    detail = getattr(sample, "tests_detail", None) or {}
    return failed_class(detail.get("kind"), detail.get("error_class"))
