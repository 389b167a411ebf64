"""``sla_report [--week YYYY-Www | --month YYYY-MM] [--format text|csv|html|pdf] [--output FILE]
[--email] [--archive]``."""

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.reporting.archive import RENDERERS, archive_report
from monitor.reporting.sla import build_sla_report, email_weekly_report, last_complete_week


class Command(BaseCommand):
    help = (
        "The vendor SLA report, weekly or monthly: per endpoint availability, error budget, "
        "TTFT/E2E P50/P95/P99 with n, errors by class, served-tier downgrade rate; per pair "
        "goodput, similarity and pass rate; the accounting stated."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        period = parser.add_mutually_exclusive_group()
        period.add_argument("--week", help="ISO week YYYY-Www (default: the last complete week)")
        period.add_argument("--month", help="month YYYY-MM, e.g. 2026-11")
        parser.add_argument("--format", choices=sorted(RENDERERS), default="text")
        parser.add_argument("--output", help="write the report to FILE instead of stdout")
        parser.add_argument(
            "--email",
            action="store_true",
            help="email it to TIERWATCH_REPORT_RECIPIENTS instead of printing it (weekly reports)",
        )
        parser.add_argument(
            "--archive", action="store_true", help="store the PDF and CSV in the reports archive"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        month = opts["month"]
        week = None if month else (opts["week"] or last_complete_week())
        try:
            report = build_sla_report(week=week, month=month)
        except ValueError as e:
            raise CommandError(str(e)) from None
        if opts["email"] and month:
            raise CommandError("--email sends the weekly report; archive a month with --archive")
        if opts["archive"]:
            rows = archive_report(week=week, month=month)
            self.stderr.write(
                f"SLA report {report.period} archived: "
                + ", ".join(f"{r.format} ({r.size} bytes)" for r in rows)
            )
        if opts["email"]:
            sent = email_weekly_report(week=report.week)
            self.stderr.write(f"SLA report {report.period}: {sent} email(s) sent")
        if (opts["email"] or opts["archive"]) and not opts["output"]:
            return
        rendered = RENDERERS[opts["format"]](report)
        if opts["output"]:
            Path(opts["output"]).write_bytes(rendered)
            self.stderr.write(f"SLA report {report.period} written to {opts['output']}")
        elif opts["format"] == "pdf":
            raise CommandError("a PDF goes to a file: add --output FILE")
        else:
            self.stdout.write(rendered.decode(), ending="")
