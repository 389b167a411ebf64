"""tierwatch's own benchmark cases: instructions (strict and loose), structured outputs, and the
long tail. Each case's reference answer must pass and its weak answer fail, or the checks
cannot tell the tiers apart."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from evals.benchmarks import instructions, longtail, simulate, structured
from evals.records import CaseSpec

C = [{"kind": "starts_with", "prefix": "Answer"}, {"kind": "max_words", "n": 3}]
CASE = CaseSpec(key="i", messages=[{"role": "user", "content": "q"}], constraints=C)


def test_it_ships_forty_instruction_prompts_whose_references_pass_strictly():
    cases = instructions.load_cases()
    assert len(cases) == 40
    for case in cases:
        assert instructions.check(case, case.reference_solution).prompt_strict, case.key
        assert not instructions.check(case, case.weak_solution).prompt_strict, case.key


def test_it_forgives_a_preamble_and_emphasis_only_when_loose():
    result = instructions.check(CASE, "Sure, here it is:\n**Answer** yes")
    assert result.strict == [False, False]
    assert result.loose == [True, True]
    assert instructions.check(CASE, "no").loose == [False, True]


def test_it_scores_prompt_and_instruction_level_accuracy():
    results = [
        instructions.check(CASE, t)
        for t in ("Answer yes", "Sure:\nAnswer yes", "no", "Answer is too long here")
    ]
    acc = instructions.accuracy(results)
    assert (acc.n_prompts, acc.n_instructions) == (4, 8)
    assert acc.prompt_strict == 1 / 4
    assert acc.prompt_loose == 2 / 4
    assert acc.instruction_strict == 5 / 8
    assert acc.instruction_loose == 6 / 8


def test_it_checks_structured_outputs_against_their_schema():
    cases = structured.load_cases()
    assert len(cases) == 10
    verdicts = [structured.check(c, c.reference_solution) for c in cases]
    assert structured.validity_rate(verdicts) == 1.0
    weak = [structured.check(c, c.weak_solution) for c in cases]
    assert structured.validity_rate(weak) == 0.0
    assert {v.error_class for v in weak} == {"invalid_json", "schema_mismatch"}
    person = next(c for c in cases if c.key == "structured/person")
    assert structured.check(person, '```json\n{"name": "A", "age": 3}\n```').valid
    assert structured.check(person, "[1, 2]").error_class == "not_object"


def test_it_ships_eight_long_tail_cases_per_category():
    cases = longtail.load_cases()
    assert Counter(c.category for c in cases) == {cat: 8 for cat in longtail.CATEGORIES}
    assert all(c.unit_tests or c.constraints for c in cases)


def _both(case: CaseSpec) -> tuple[bool, bool]:
    good = simulate.answer_text(case, "base")
    weak = case.weak_solution if not case.unit_tests else f"```python\n{case.weak_solution}```"
    return longtail.passes(case, good), longtail.passes(case, weak)


def test_it_passes_each_long_tail_reference_and_fails_each_weak_answer():
    cases = longtail.load_cases()
    with ThreadPoolExecutor(4) as pool:
        outcomes = dict(zip((c.key for c in cases), pool.map(_both, cases), strict=True))
    assert {k: v for k, v in outcomes.items() if v != (True, False)} == {}


@pytest.mark.parametrize(
    "category,rate",
    [
        ("long_tail/rare_apis", 0.40),
        ("instructions/verifiable", 0.25),
        ("tool_calls/simple", 0.30),
        ("long_tail", 0.0),
    ],
)
def test_it_configures_the_simulated_distilled_loss_per_category(category, rate):
    case = CaseSpec(key="x", messages=[], category=category, difficulty="easy")
    assert simulate.loss_rate(case) == rate  # the built-in suites' "long_tail" keeps its story
    assert not simulate.loses(case, "base")
