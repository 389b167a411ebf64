"""Roles over HTTP (Django's test client): what a viewer, an operator and an admin may open and
do on the pages and the admin; the groups the data migration made; ``manage.py roles``."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command

from monitor.models import Run
from monitor.setup import roles
from tests import factories

pytestmark = pytest.mark.django_db

READ_PAGES = (
    "/",
    "/pairs/demo/",
    "/pairs/demo/speed/",
    "/pairs/demo/verdict/",
    "/metrics/",
    "/reports/",
)


@pytest.fixture
def pair():
    row = factories.pair()
    factories.run(row, summary=factories.summary())
    return row


def login(client, role: str | None):
    client.force_login(factories.user(f"u-{role}", role))
    return client


def test_the_migration_made_the_three_groups_with_their_permissions():
    perms = {
        g.name: set(g.permissions.values_list("codename", flat=True))
        for g in Group.objects.filter(name__in=roles.ROLES)
    }
    assert {"view_pair", "view_run", "view_sample", "view_alert"} <= perms["viewer"]
    assert not {"change_alert", "add_run", "view_apitoken"} & perms["viewer"]
    # the add-a-pair page, and the Reports page's Generate button
    operator_extra = {"change_alert", "add_run", "add_pair", "add_endpoint", "add_reportarchive"}
    assert perms["operator"] == perms["viewer"] | operator_extra
    assert {"change_endpoint", "add_pair", "change_periodictask", "view_apitoken"} <= perms["admin"]


def test_ensuring_the_roles_twice_changes_nothing():
    before = {
        g.name: sorted(g.permissions.values_list("id", flat=True)) for g in Group.objects.all()
    }
    roles.ensure_roles(apps)
    roles.ensure_roles(apps)
    after = {
        g.name: sorted(g.permissions.values_list("id", flat=True)) for g in Group.objects.all()
    }
    assert after == before


@pytest.mark.parametrize("path", READ_PAGES)
def test_it_handles_anonymous_users_with_the_login_page(client, pair, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("path", READ_PAGES)
def test_a_user_without_a_role_gets_403(client, pair, path):
    assert login(client, None).get(path).status_code == 403


@pytest.mark.parametrize("path", READ_PAGES)
def test_a_viewer_reads_every_page(client, pair, path):
    assert login(client, roles.VIEWER).get(path).status_code == 200


def test_a_viewer_sees_no_run_button_and_cannot_post_one(client, pair):
    client = login(client, roles.VIEWER)
    html = client.get("/pairs/demo/").content.decode()
    assert "Run probe now" not in html
    assert "needs the operator role" in html
    assert client.post("/pairs/demo/probe/").status_code == 403
    assert client.post("/pairs/demo/verdict/audit/").status_code == 403
    assert Run.objects.filter(trigger="manual", status="queued").count() == 0


def test_an_operator_starts_a_probe_now(client, pair):
    client = login(client, roles.OPERATOR)
    assert "Run probe now" in client.get("/pairs/demo/").content.decode()
    response = client.post("/pairs/demo/probe/")
    assert response.status_code == 302
    run = Run.objects.get(status="queued")
    assert response["Location"] == f"/runs/{run.pk}/"


@pytest.mark.parametrize("role", [roles.VIEWER, roles.OPERATOR])
def test_the_admin_site_is_closed_below_admin(client, role):
    response = login(client, role).get("/admin/monitor/endpoint/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_an_admin_configures_in_the_admin(client, pair):
    client = login(client, roles.ADMIN)
    assert client.get("/admin/monitor/endpoint/").status_code == 200
    assert client.get("/admin/django_celery_beat/periodictask/").status_code == 200
    response = client.post(
        f"/admin/monitor/pair/{pair.pk}/change/",
        {
            "name": "demo",
            "fast": pair.fast_id,
            "base": pair.base_id,
            "suite": pair.suite_id,
            "claim_metric": "output_tps",
            "claim_form": "factor",
            "claim_value": "2.5",
            "repeat": "1",
            "active": "on",
        },
    )
    assert response.status_code == 302
    pair.refresh_from_db()
    assert (pair.claim_metric, pair.claim_form, pair.claim_value) == ("output_tps", "factor", 2.5)


def test_the_command_grants_one_role_at_a_time(capsys):
    user = factories.user("carol", roles.VIEWER)
    call_command("roles", "grant", "carol", "admin")
    user.refresh_from_db()
    assert [g.name for g in user.groups.all()] == ["admin"]
    assert user.is_staff
    call_command("roles", "grant", "carol", "operator")
    user.refresh_from_db()
    assert [g.name for g in user.groups.all()] == ["operator"]
    assert not user.is_staff
    assert user.has_perm("monitor.change_alert") and not user.has_perm("monitor.change_pair")
    call_command("roles", "list")
    assert "carol: operator" in capsys.readouterr().out


def test_the_command_names_an_unknown_user():
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("roles", "grant", "nobody", "viewer")


def test_every_migrate_puts_the_roles_permissions_back():
    viewer = Group.objects.get(name=roles.VIEWER)
    viewer.permissions.remove(*viewer.permissions.filter(codename="view_run"))
    call_command("migrate", verbosity=0)
    assert viewer.permissions.filter(codename="view_run").exists()
