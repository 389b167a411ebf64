"""``api_token create USER [--name NAME]`` prints a new API token once; ``api_token list
[USER]`` shows tokens by prefix; ``api_token revoke PREFIX`` deletes one."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.models import ApiToken
from monitor.setup.api_tokens import create_token


class Command(BaseCommand):
    help = "Create, list or revoke API tokens (sent as 'Authorization: Bearer TOKEN')."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="print a new token for USER, once")
        create.add_argument("user")
        create.add_argument("--name", default="")
        listing = sub.add_parser("list", help="tokens by prefix")
        listing.add_argument("user", nargs="?")
        revoke = sub.add_parser("revoke", help="delete the token with this prefix")
        revoke.add_argument("prefix")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["action"] == "create":
            user = get_user_model().objects.filter(username=opts["user"]).first()
            if user is None:
                raise CommandError(f"no user named {opts['user']!r}")
            _, token = create_token(user=user, name=opts["name"])
            self.stdout.write(token)
            self.stderr.write("Shown once; only its SHA-256 digest is stored.")
        elif opts["action"] == "list":
            rows = ApiToken.objects.select_related("user").order_by("created_at")
            if opts["user"]:
                rows = rows.filter(user__username=opts["user"])
            for row in rows:
                used = row.last_used_at.isoformat() if row.last_used_at else "never used"
                self.stdout.write(f"{row.prefix}…  {row.user}  {row.name}  {used}")
        else:
            deleted, _ = ApiToken.objects.filter(prefix=opts["prefix"]).delete()
            if not deleted:
                raise CommandError(f"no token with prefix {opts['prefix']!r}")
            self.stdout.write(f"revoked {deleted} token(s)")
