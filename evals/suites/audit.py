"""The ``audit`` suite: short open-ended prompts for the two-sample test at temperature 1
(Gao, Liang & Guestrin, ICLR 2025: >= 25 prompts with short outputs)."""

from __future__ import annotations

from evals.records import CaseSpec, SuiteSpec
from evals.suites.text import user_message

_AUDIT_PROMPTS = [
    "Name an animal and one surprising fact about it, in one sentence.",
    "Invent a name for a new coffee shop and give its slogan.",
    "Describe the colour blue to someone in one sentence.",
    "Suggest a weekend hobby and say why in one sentence.",
    "Write the first line of a mystery novel.",
    "Give a one-sentence tip for writing clearer emails.",
    "Name a city you would like to visit and one thing to do there.",
    "Make up a short riddle.",
    "Describe a rainy morning in one sentence.",
    "Suggest a name for a pet robot and explain it briefly.",
    "Give one reason people enjoy gardening.",
    "Write a one-sentence bedtime story.",
    "Invent a new holiday and say how it is celebrated, in one sentence.",
    "Recommend a board game for four people and say why, briefly.",
    "Describe the taste of a lemon without using the word 'sour'.",
    "Write a motto for a software team.",
    "Give a short piece of advice to a new programmer.",
    "Name a fruit and a dish you could make with it.",
    "Describe a mountain in exactly one sentence.",
    "Invent a word and define it.",
    "Write a two-line poem about the sea.",
    "Suggest a title for a documentary about bees.",
    "What is a good question to ask at the start of a meeting?",
    "Describe your ideal workspace in one sentence.",
    "Give a one-sentence summary of why sleep matters.",
    "Suggest a creative use for an empty glass jar.",
    "Write a fortune-cookie message.",
    "Name a musical instrument and describe its sound in one sentence.",
    "Invent a superhero whose power is mildly useful, in one sentence.",
    "Describe autumn to someone who has never seen it, in one sentence.",
]


def build() -> SuiteSpec:
    cases = [
        CaseSpec(f"audit-{i:02d}", user_message(p), scenario="short", max_tokens=50)
        for i, p in enumerate(_AUDIT_PROMPTS)
    ]
    return SuiteSpec(
        "audit",
        1,
        "Thirty short open-ended prompts for the two-sample test at temperature 1.",
        cases,
    )
