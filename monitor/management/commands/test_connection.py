"""``test_connection NAME``: one request to an endpoint, or to both endpoints of a pair, through
the product's client; prints what each answered and exits non-zero when one failed."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.models import Endpoint, Pair
from monitor.setup import connection


class Command(BaseCommand):
    help = (
        "Send one short request to ENDPOINT (or to both endpoints of PAIR) and say what came back."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="an endpoint's or a pair's name")

    def handle(self, *args: Any, **opts: Any) -> None:
        name = opts["name"]
        pair = Pair.objects.select_related("fast", "base").filter(name=name).first()
        if pair is not None:
            targets = [("fast", pair.fast), ("base", pair.base)]
        elif (endpoint := Endpoint.objects.filter(name=name).first()) is not None:
            targets = [("", endpoint)]
        else:
            raise CommandError(f"no pair or endpoint named {name!r}")
        checks = [connection.check(ep) for _, ep in targets]
        connection.record(checks, source="manage.py test_connection")
        for (tier, ep), c in zip(targets, checks, strict=True):
            label = f"{tier} {ep.name}" if tier else ep.name
            self.stdout.write(f"{label}: {c.summary}")
        failed = [c.endpoint for c in checks if not c.ok]
        if failed:
            raise CommandError(f"test connection failed: {', '.join(failed)}")
