"""Generated code cannot forge HumanEval's ``check(candidate)`` verdict: the checks run in the
judge, the candidate's results cross in a typed encoding, so fake reply lines, an
always-equal object and an early exit all fail; tests that must run in the child say so."""

import pytest

from evals.sandbox import isolation, run_unit_tests

pytestmark = [
    pytest.mark.skipif(isolation() == "none", reason="no sandbox on this machine"),
    # the sandbox's uid shares one RLIMIT_NPROC: with the other sandbox tests, one at a time
    # (tests/evals/test_sandbox.py says why)
    pytest.mark.xdist_group("serial"),
]

HUMANEVAL_FORM = (
    "def check(candidate):\n"
    "    assert candidate([1, 2, 3]) == 6\n"
    "    assert candidate([]) == 0\n"
    "    assert abs(candidate([0.5, 0.25]) - 0.75) < 1e-9\n\n"
    "def test_check():\n"
    "    check(total)\n"
)
FAKE_OK_LINES = (
    "import os, sys\n"
    "fd = int(sys.argv[1])\n"
    'os.write(fd, b\'{"kind": "setup", "error": null}\\n\')\n'
    "for k in range(200):\n"
    '    os.write(fd, (\'{"i": %d, "n": %d, "ok": true}\\n\' % (k, k)).encode())\n'
    "os._exit(0)\n"
)
ALWAYS_EQUAL = (
    "class Anything:\n"
    "    def __eq__(self, other): return True\n"
    "    def __ne__(self, other): return False\n"
    "    def __lt__(self, other): return True\n"
    "    def __sub__(self, other): return self\n"
    "    __rsub__ = __sub__\n"
    "    def __abs__(self): return self\n"
    "def total(xs):\n    return Anything()\n"
)
EARLY_EXIT = "import os\ndef total(xs):\n    os._exit(0)\n"


def test_an_honest_solution_passes_with_every_check_decided_in_the_judge():
    result = run_unit_tests("def total(xs):\n    return sum(xs)\n", HUMANEVAL_FORM)
    assert result.passed, result.output
    assert (result.n_tests, result.n_in_child) == (1, 0)


@pytest.mark.parametrize(
    "code", [FAKE_OK_LINES, ALWAYS_EQUAL, EARLY_EXIT], ids=["fake-ok", "always-equal", "exit"]
)
def test_each_forging_trick_fails_the_humaneval_form(code):
    result = run_unit_tests(code, HUMANEVAL_FORM)
    assert not result.passed, result
    assert result.n_in_child == 0


def test_tests_that_need_the_child_are_counted_as_decided_there():
    tests = "import os\nassert os.getuid() >= 0\n"
    result = run_unit_tests("x = 1\n", tests)
    assert result.passed and result.n_in_child == 1
