"""``roles grant USER viewer|operator|admin``, ``roles list``, ``roles sync`` (re-apply the
roles' permissions, e.g. after a new model was added)."""

from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.setup.roles import ROLES, ensure_roles, grant


class Command(BaseCommand):
    help = "Give a user one role (viewer reads; operator acknowledges, silences, runs; admin "
    "configures and is staff), list users' roles, or re-sync the roles' permissions."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        give = sub.add_parser("grant", help="give USER exactly this role")
        give.add_argument("user")
        give.add_argument("role", choices=ROLES)
        sub.add_parser("list", help="every user with their role")
        sub.add_parser("sync", help="recreate the groups and their permissions")

    def handle(self, *args: Any, **opts: Any) -> None:
        users = get_user_model().objects
        if opts["action"] == "sync":
            ensure_roles(apps)
            self.stdout.write(f"roles: {', '.join(ROLES)}")
        elif opts["action"] == "list":
            for user in users.prefetch_related("groups").order_by("username"):
                roles = [g.name for g in user.groups.all() if g.name in ROLES]
                extra = " (superuser)" if user.is_superuser else ""
                self.stdout.write(f"{user.username}: {', '.join(roles) or 'no role'}{extra}")
        else:
            user = users.filter(username=opts["user"]).first()
            if user is None:
                raise CommandError(f"no user named {opts['user']!r}")
            grant(user, opts["role"])
            self.stdout.write(f"{user.username} is now {opts['role']}")
