"""``load_probe PAIR``: each tier alone at concurrency 1, 4, 16 (bounded, short); a table."""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.models import Pair, RunStatus, Suite
from monitor.runs.load import LOAD_LEVELS, MAX_LOAD_REQUESTS, run_load_probe


def _ms(stat: dict) -> str:
    value = stat.get("p95") if stat else None
    return "n<min" if value is None else f"{value:.0f}"


class Command(BaseCommand):
    help = (
        "Probe PAIR's tiers one at a time at several concurrency levels and store the run "
        "(kind probe, trigger load); prints P50/P95 TTFT and E2E and goodput per level."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("pair")
        parser.add_argument(
            "--levels",
            default=",".join(map(str, LOAD_LEVELS)),
            help="comma-separated concurrency levels (default 1,4,16)",
        )
        parser.add_argument(
            "--requests",
            type=int,
            default=None,
            help=f"requests per level per tier (default max(8, 2 x level), "
            f"at most {MAX_LOAD_REQUESTS})",
        )
        parser.add_argument("--suite", default=None, help="suite name (default: the pair's)")
        parser.add_argument("--json", action="store_true", help="the load block as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        pair = Pair.objects.select_related("fast", "base").filter(name=opts["pair"]).first()
        if pair is None:
            names = ", ".join(Pair.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"no pair named {opts['pair']!r} (pairs: {names})")
        try:
            levels = [int(x) for x in opts["levels"].split(",") if x.strip()]
        except ValueError as exc:
            raise CommandError(f"--levels must be integers like 1,4,16: {exc}") from exc
        suite = None
        if opts["suite"]:
            suite = Suite.objects.filter(name=opts["suite"]).order_by("-version").first()
            if suite is None:
                raise CommandError(f"no suite named {opts['suite']!r}")
        run = run_load_probe(
            pair=pair, concurrency_levels=levels, requests_per_level=opts["requests"], suite=suite
        )
        if run.status != RunStatus.DONE:
            raise CommandError(f"load probe run {run.id} {run.status}: {run.error}")
        load = run.summary["load"]
        if opts["json"]:
            self.stdout.write(json.dumps({"run": run.id, "pair": pair.name, "load": load}))
            return
        self.stdout.write(f"load probe run {run.id} of {pair.name} (suite {run.suite})")
        self.stdout.write(
            f"{'conc':>4} {'tier':5} {'n':>4} {'ok':>4} {'TTFT P50':>9} "
            f"{'P95':>7} {'E2E P50':>8} {'P95':>7} {'goodput':>8} {'req/s':>6}"
        )
        for level in sorted(load, key=int):
            for tier in ("fast", "base"):
                b = load[level][tier]
                p50 = b["ttft_ms"].get("p50")
                e50 = b["e2e_ms"].get("p50")
                good = "—" if b["goodput"] is None else f"{b['goodput']:.0%}"
                self.stdout.write(
                    f"{level:>4} {tier:5} {b['n']:>4} {b['n_ok']:>4} "
                    f"{'n<min' if p50 is None else f'{p50:.0f}':>9} {_ms(b['ttft_ms']):>7} "
                    f"{'n<min' if e50 is None else f'{e50:.0f}':>8} {_ms(b['e2e_ms']):>7} "
                    f"{good:>8} {b['throughput_rps'] or 0:>6.1f}"
                )
        self.stdout.write("(times in ms; goodput against the pair's SLOs; each tier probed alone)")
