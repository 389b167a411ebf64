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


@pytest.mark.django_db
def test_a_worker_s_database_is_a_complete_copy_of_the_run_s_migrated_template(request):
    """Under xdist on PostgreSQL each worker copies one migrated template
    (``tests.template_db``): the copy is this worker's own, has every migration applied, and
    the template it came from is there beside it."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from tests.template_db import applies, template_name

    if not applies(request.config):
        pytest.skip("only under xdist on PostgreSQL without --reuse-db")
    worker = request.config.workerinput["workerid"]
    mine = connection.settings_dict["NAME"]
    assert mine.endswith(f"_{worker}")
    executor = MigrationExecutor(connection)
    assert executor.migration_plan(executor.loader.graph.leaf_nodes()) == []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [template_name(mine, worker)]
        )
        assert cursor.fetchone() == (1,)


def test_the_long_tests_are_handed_out_first(request):
    """Under ``--dist loadgroup`` the session's order (which xdist hands out) starts with every
    ``long`` and ``browser`` test, the rest after them in their collected order."""
    from tests.support import FIRST

    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("the order is changed only under --dist loadgroup")
    first = [any(item.get_closest_marker(m) for m in FIRST) for item in request.session.items]
    if not any(first):
        pytest.skip("no long or browser test was collected")
    assert first == sorted(first, reverse=True)
