"""Roles as Django groups: viewer reads, operator also acts on alerts and starts runs, admin
configures (every permission, and staff so the admin site opens).

Permissions are Django's own model permissions, so pages, the API and the admin check one thing
(``user.has_perm``). ``ensure_roles`` is idempotent and takes an app registry: the data
migration (historical models), ``manage.py roles sync`` and a ``post_migrate`` receiver
(``monitor.apps``, so a model added by a later migration is covered) share it. No model import
at the top: ``monitor.apps`` imports this module while apps are still loading.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps as global_apps

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
ROLES = (VIEWER, OPERATOR, ADMIN)
# What an operator may do beyond reading: acknowledge or silence an alert, start a run now,
# add a pair and its two endpoints (the add-a-pair page; changing or deleting stays admin's),
# generate an SLA report (the Reports page's Generate button).
OPERATOR_EXTRA = ("change_alert", "add_run", "add_pair", "add_endpoint", "add_reportarchive")
# Readable by nobody below admin: a token's row is its owner's business.
NOT_FOR_VIEWERS = ("view_apitoken",)


def ensure_roles(apps: Any) -> None:
    """Create the three groups and set their permissions to exactly the role's set."""
    from_app = apps.get_model("auth", "Permission").objects
    group_model = apps.get_model("auth", "Group")
    views = from_app.filter(content_type__app_label="monitor", codename__startswith="view_")
    views = views.exclude(codename__in=NOT_FOR_VIEWERS)
    extra = from_app.filter(content_type__app_label="monitor", codename__in=OPERATOR_EXTRA)
    wanted = {
        VIEWER: list(views),
        OPERATOR: [*views, *extra],
        ADMIN: list(from_app.all()),
    }
    for name, perms in wanted.items():
        group, _ = group_model.objects.get_or_create(name=name)
        group.permissions.set(perms)


def grant(user: Any, role: str) -> None:
    """Give the user exactly one role: other role groups are left, staff only for admin."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; choose one of {', '.join(ROLES)}")
    ensure_roles(global_apps)  # also picks up models added since the last migrate
    Group = global_apps.get_model("auth", "Group")  # noqa: N806 (a model class)
    user.groups.remove(*Group.objects.filter(name__in=ROLES))
    user.groups.add(Group.objects.get(name=role))
    user.is_staff = role == ADMIN
    user.save(update_fields=["is_staff"])
