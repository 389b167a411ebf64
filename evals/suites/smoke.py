"""The ``smoke`` suite: eight short general cases to check a pair end to end."""

from __future__ import annotations

from evals.records import CaseSpec, SuiteSpec
from evals.suites.text import codebase, service_log, user_message


def build() -> SuiteSpec:
    short = [
        ("smoke-capital", "What is the capital of Australia? Answer in one word."),
        ("smoke-arith", "What is 17 * 23? Reply with the number only."),
        ("smoke-translate", "Translate into French: 'The meeting has moved to Thursday.'"),
        ("smoke-haiku", "Write a haiku about network latency."),
        ("smoke-hash-table", "In two sentences, what is a hash table?"),
        ("smoke-primes", "List three prime numbers greater than 50, separated by commas."),
    ]
    cases = [CaseSpec(k, user_message(p), scenario="short", max_tokens=64) for k, p in short]
    log = service_log(11, 9)
    cases.append(
        CaseSpec(
            "smoke-log-first-error",
            user_message(
                f"Service log:\n{log}\n\nWhich service logged the first WARN or ERROR line, "
                "and at what time? Answer in one sentence."
            ),  # fmt: skip
            scenario="mid",
            max_tokens=100,
        )
    )
    code, functions = codebase(12, 900)
    cases.append(
        CaseSpec(
            "smoke-code-summary",
            user_message(f"{code}\nSummarise in three sentences what this code does."),
            scenario="mid",
            max_tokens=100,
        )
    )
    return SuiteSpec("smoke", 1, "Eight short general cases to check a pair end to end.", cases)
