"""``sla_report [--week YYYY-Www] [--format text|csv|html] [--output FILE] [--email]``."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from monitor.services.reports import (
    build_sla_report,
    email_weekly_report,
    last_complete_week,
    render_csv,
    render_html,
    render_text,
)

RENDERERS = {"text": render_text, "csv": render_csv, "html": render_html}


class Command(BaseCommand):
    help = ("The weekly vendor SLA report: per endpoint availability, TTFT/E2E P50/P95/P99 with "
            "n, errors by class; per pair similarity and pass rate.")

    def add_arguments(self, parser):
        parser.add_argument("--week", help="ISO week YYYY-Www (default: the last complete week)")
        parser.add_argument("--format", choices=sorted(RENDERERS), default="text")
        parser.add_argument("--output", help="write the report to FILE instead of stdout")
        parser.add_argument("--email", action="store_true",
                            help="email it to TIERWATCH_REPORT_RECIPIENTS instead of printing it")

    def handle(self, *args, **opts):
        week = opts["week"] or last_complete_week()
        try:
            report = build_sla_report(week=week)
        except ValueError as e:
            raise CommandError(str(e)) from None
        if opts["email"]:
            sent = email_weekly_report(week=report.week)
            self.stderr.write(f"SLA report {report.week}: {sent} email(s) sent")
            if not opts["output"]:
                return
        rendered = RENDERERS[opts["format"]](report)
        if opts["output"]:
            Path(opts["output"]).write_text(rendered, encoding="utf-8")
            self.stderr.write(f"SLA report {report.week} written to {opts['output']}")
        else:
            self.stdout.write(rendered, ending="")
