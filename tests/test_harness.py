"""The harness itself: what ``tests/conftest.py`` and ``tests/support.py`` change in how pytest
and pytest-xdist see the tests."""

from __future__ import annotations

import pytest

from tests.support import group_ids


@pytest.mark.xdist_group("harness")
def test_a_grouped_test_carries_its_group_in_its_id_once(request):
    """``--dist loadgroup`` groups by the id's ``@<group>`` suffix: without it the serial tests
    ran beside each other."""
    item = request.node
    before = item._id
    try:
        group_ids([item])
        group_ids([item])
        assert item.nodeid.endswith(
            "::test_a_grouped_test_carries_its_group_in_its_id_once@harness"
        )
        assert item.nodeid.count("@") == 1
    finally:
        item._id = before
