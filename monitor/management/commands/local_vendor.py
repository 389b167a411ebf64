"""``local_vendor up|down|status [--targets ...]``: the real llama.cpp vendor, in the database.

``up`` builds llama-server and prepares the models when the cache lacks them (minutes, once),
starts the targets (``evals.vendors.llamacpp.vendor``) and registers one Endpoint per target and one
Pair per vendor pair whose two ends are up (``monitor.setup.local_vendor.register``,
idempotent: the new ports replace the old ones). ``down`` stops the servers by pid and
deactivates the local pairs so schedules do not probe dead ports; ``status`` shows processes
and rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evals.vendors.llamacpp import EngineError, vendor
from monitor.models import Endpoint
from monitor.setup.local_vendor import deactivate, register


class Command(BaseCommand):
    help = "Start/stop the local llama.cpp vendor and register its endpoints and pairs."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["up", "down", "status"])
        parser.add_argument(
            "--targets",
            nargs="+",
            choices=list(vendor.TARGETS),
            help="a subset (default: all six; 2 cores suit 2-3 at a time)",
        )
        parser.add_argument("--threads", type=int, default=1, help="threads per server")
        parser.add_argument("--ctx", type=int, default=4096, help="context size per server")
        parser.add_argument("--suite", default="smoke", help="built-in suite of the pairs")
        parser.add_argument(
            "--state",
            type=Path,
            default=None,
            help="state file (default: $TIERWATCH_CACHE/run/vendor.json)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            getattr(self, f"_{opts['action']}")(opts)
        except EngineError as exc:
            raise CommandError(str(exc)) from exc

    def _up(self, opts):
        urls = vendor.up(
            opts["targets"],
            ctx=opts["ctx"],
            threads=opts["threads"],
            state=opts["state"],
            log=self.stdout.write,
        )
        pairs = register(urls=urls, ctx=opts["ctx"], suite_name=opts["suite"])
        for name, url in urls.items():
            self.stdout.write(f"endpoint {name:20} {url}")
        for pair in pairs:
            self.stdout.write(f"pair     {pair.name:24} fast={pair.fast} base={pair.base}")
        if pairs:
            self.stdout.write(
                self.style.SUCCESS(f"probe one with: python manage.py probe {pairs[0].name}")
            )

    def _down(self, opts):
        stopped = vendor.down(opts["targets"], state=opts["state"])
        n = deactivate(targets=opts["targets"])
        self.stdout.write(
            f"stopped: {', '.join(stopped) or 'none running'}; {n} local pair(s) deactivated"
        )

    def _status(self, opts):
        known = {e.name: e for e in Endpoint.objects.filter(name__in=list(vendor.TARGETS))}
        for name, st in vendor.status(state=opts["state"]).items():
            row = known.get(name)
            registered = (
                "not registered"
                if row is None
                else "registered"
                if row.base_url == st.url
                else f"registered at {row.base_url}"
            )
            self.stdout.write(f"{name:20} {st.state:10} {st.url or '-':28} {registered}")
            if st.detail:
                self.stdout.write("    " + st.detail.replace("\n", "\n    "))
