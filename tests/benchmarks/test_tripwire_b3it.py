"""The border tripwire on a real vendor's recorded swap (``benchmarks/tripwire_b3it.py``):
B3IT's daily samples of Together's mistral-7b-instruct-v0.3, redirected to Ministral-3-14B
on 2026-01-29. The recording states no licence, so it is not in this repository: the test
reads it from ``TIERWATCH_B3IT_DATA`` (the recording's folder) and is skipped without it."""

from __future__ import annotations

import os

import pytest

from benchmarks import tripwire_b3it as b3it

DATA = os.environ.get("TIERWATCH_B3IT_DATA", "")
pytestmark = pytest.mark.skipif(
    not DATA or not os.path.exists(DATA),
    reason="set TIERWATCH_B3IT_DATA to B3IT's recording (benchmarks/tripwire_b3it.py)",
)


@pytest.mark.parametrize("reference", [30, 100])
def test_no_alarm_before_the_swap_and_one_on_the_second_batch_after_it(reference):
    rows = b3it.replay(b3it.load(DATA), reference)
    assert not [r["day"] for r in rows if r["day"] < b3it.SWAP and r.get("new_alarm")]
    assert b3it.first_alarm(rows) == "2026-01-31"
    after = [r for r in rows if r["day"] >= b3it.B3IT_CAUGHT and "rank" in r]
    assert after[0]["rank"] == 1 and after[0]["statistic"] > after[0]["tolerance"]


def test_batches_without_answers_bring_no_evidence_and_change_nothing():
    rows = b3it.replay(b3it.load(DATA))
    empty = [r for r in rows if r.get("no_evidence")]
    assert [r["day"] for r in empty] == ["2026-02-26", "2026-02-27", "2026-02-28"]
    before = rows[rows.index(empty[0]) - 1]["detector"]
    assert {r["detector"] for r in empty} == {before}
