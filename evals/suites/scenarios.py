"""The ``scenarios`` suite: the speed matrix (``evals.suites.rules.SCENARIOS``), one cell a case."""

from __future__ import annotations

from evals.records import CaseSpec, SuiteSpec
from evals.suites.rules import NONCE
from evals.suites.text import codebase, service_log, user_message

_LONG_CHARS = 3500  # ~1k tokens of code at ~3.6 characters per token
_XL_CHARS = 36_000  # ~10k tokens


def build() -> SuiteSpec:
    doc, functions = codebase(101, _LONG_CHARS)
    picks = [functions[0], functions[len(functions) // 2], functions[-1]]
    cases: list[CaseSpec] = []
    for i, (name, _result) in enumerate(picks):
        question = (
            f"\n\nIn the code above, what does `{name}` return, and how many rows at most? "
            "Answer in at most ten words."
        )
        text = f"Repository excerpt:\n\n{doc}{question}"
        cases.append(CaseSpec(f"scn-long-cached-{i}", user_message(text), scenario="long_cached",
                              max_tokens=16))  # fmt: skip
        cases.append(CaseSpec(f"scn-long-cold-{i}", user_message(f"Request {NONCE}.\n{text}"),
                              scenario="long_cold", max_tokens=16))  # fmt: skip
    for i, topic in enumerate(
        ["how a hash map grows when it fills up", "how TCP recovers from a lost packet"]
    ):
        prompt = f"Explain {topic}, in about 300 words of plain prose."
        cases.append(CaseSpec(f"scn-long-out-{i}", user_message(prompt), scenario="short_long_out",
                              max_tokens=400))  # fmt: skip
    for i, seed in enumerate([201, 202]):
        log = service_log(seed, 9)
        prompt = (
            f"Service log:\n{log}\n\nWhat happened in this window? Name the busiest service and "
            "any warnings, in at most three sentences."
        )
        cases.append(CaseSpec(f"scn-mid-{i}", user_message(prompt), scenario="mid", max_tokens=100))
    xl_doc, xl_functions = codebase(301, _XL_CHARS)
    name = xl_functions[len(xl_functions) // 3][0]
    xl = (
        f"Repository excerpt:\n\n{xl_doc}\n\nRecent log:\n{service_log(302, 20)}\n\n"
        f"In the code above, what does `{name}` return? Answer in at most ten words."
    )
    cases.append(
        CaseSpec("scn-xl-context-0", user_message(xl), scenario="xl_context", max_tokens=16)
    )
    return SuiteSpec(
        "scenarios",
        1,
        "The speed matrix: long cached prefix vs the same prompt with a unique prefix, short "
        "prompt with long output, mid, and an optional ~10k-token context.",
        cases,
    )
