from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.setup.config import ConfigError, apply_config_file


class Command(BaseCommand):
    help = "Apply endpoints, suites, pairs, schedules, channels and alert rules from a YAML file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            counts = apply_config_file(options["file"])
        except ConfigError as exc:
            raise CommandError(f"nothing applied:\n{exc}") from None
        self.stdout.write(", ".join(f"{n} {section}" for section, n in counts.items()) + " applied")
