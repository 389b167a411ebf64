"""``probe PAIR``: one paired probe now, in this process, printed as a table or JSON."""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.models import Pair, RunStatus
from monitor.runs.pipeline import execute_run
from monitor.runs.steps import RunAlreadyQueued, queue_run


def _fmt(value, unit: str = "") -> str:
    return "—" if value is None else f"{value:.1f}{unit}"


class Command(BaseCommand):
    help = (
        "Run one paired probe of PAIR now and print per-tier latency, tokens, errors, similarity."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("pair")
        parser.add_argument("--cases", type=int, default=None, help="use N cases of the suite")
        parser.add_argument(
            "--repeat", type=int, default=None, help="repetitions per case and tier"
        )
        parser.add_argument("--kind", choices=["probe", "audit"], default="probe")
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument("--json", action="store_true", help="one JSON object on stdout")

    def handle(self, *args: Any, **opts: Any) -> None:
        pair = Pair.objects.filter(name=opts["pair"]).first()
        if pair is None:
            names = ", ".join(Pair.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"no pair named {opts['pair']!r} (pairs: {names})")
        try:
            queued = queue_run(
                pair=pair, kind=opts["kind"], repeat=opts["repeat"], seed=opts["seed"]
            )
        except RunAlreadyQueued as exc:
            raise CommandError(str(exc)) from exc
        run = execute_run(run_id=queued.id, cases_limit=opts["cases"])
        if run is None:
            raise CommandError(f"run #{queued.id} was deleted while it ran")
        if run.status != RunStatus.DONE:
            raise CommandError(f"run {run.id} {run.status}: {run.error}")
        summary = run.summary
        if opts["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "run": run.id,
                        "pair": pair.name,
                        "kind": run.kind,
                        "seed": run.seed,
                        **summary,
                    },
                    indent=None,
                )
            )
            return
        self.stdout.write(f"run {run.id} of {pair.name} ({run.kind}, seed {run.seed})")
        header = (
            f"{'tier':5} {'n':>4} {'ok':>4} {'TTFT P50':>9} {'P95':>8} {'E2E P50':>9} "
            f"{'P95':>8} {'TPOT P50':>9} {'tok srv':>8} {'tok est':>8}  errors"
        )
        self.stdout.write(header)
        for tier in ("fast", "base"):
            t = summary["tiers"][tier]
            errors = ", ".join(f"{k}={v}" for k, v in t["errors"].items()) or "none"
            self.stdout.write(
                f"{tier:5} {t['n']:>4} {t['n_ok']:>4} {_fmt(t['ttft_ms']['p50']):>9} "
                f"{_fmt(t['ttft_ms']['p95']):>8} {_fmt(t['e2e_ms']['p50']):>9} "
                f"{_fmt(t['e2e_ms']['p95']):>8} {_fmt(t['tpot_ms']['p50']):>9} "
                f"{t['tokens_server']:>8} {t['tokens_estimated']:>8}  {errors}"
            )
        self.stdout.write(f"(times in ms; percentiles need n >= {summary['min_n']})")
        for name, sim in summary["similarity"].items():
            if sim:
                self.stdout.write(
                    f"similarity {name}: mean Indel ratio {sim['mean_ratio']:.3f}, "
                    f"exact {sim['exact_rate']:.0%}, n={sim['n']}"
                )
        sp = summary["speedup"]
        self.stdout.write(
            f"speed-up (fast vs base): TTFT {_fmt(sp['ttft'], 'x')}, "
            f"E2E {_fmt(sp['e2e'], 'x')}, decode {_fmt(sp['decode'], 'x')}"
        )
        for tier in ("fast", "base"):
            if summary["tiers"][tier]["pass_rate"] is not None:
                t = summary["tiers"][tier]
                self.stdout.write(
                    f"unit-test pass rate {tier}: {t['pass_rate']:.0%} (n={t['n_tested']})"
                )
