"""The process's stream budget (``evals.plan.StreamBudget``): refused beyond the limit, a wait
when other runs hold it, given back at the end."""

import threading

import pytest

from evals.plan import StreamBudget, TooManyStreams


def test_a_run_asking_more_streams_than_the_limit_is_refused_with_the_reason():
    budget = StreamBudget()
    with pytest.raises(
        TooManyStreams,
        match=r"120 concurrent streams asked \(fast 60 \+ base "
        r"60\), .* only up to 100 \(TIERWATCH_MAX_STREAMS",
    ):
        with budget.reserve(120, 100, what=" (fast 60 + base 60)"):
            pass
    assert budget.in_use == 0


def test_a_run_that_would_pass_the_limit_waits_for_another_to_end():
    budget, waiting, order = StreamBudget(), threading.Event(), []

    def second() -> None:
        with budget.reserve(60, 100, on_wait=waiting.set, poll_s=0.01):
            order.append(("second", budget.in_use))

    with budget.reserve(60, 100):
        thread = threading.Thread(target=second)
        thread.start()
        assert waiting.wait(10)  # it cannot start while the first holds 60 of 100
        order.append(("first ends", budget.in_use))
    thread.join(10)
    assert order == [("first ends", 60), ("second", 60)]
    assert budget.in_use == 0
