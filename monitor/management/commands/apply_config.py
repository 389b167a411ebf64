from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.setup.config import ConfigError, apply_config_file, check_config_file


class Command(BaseCommand):
    help = "Apply endpoints, suites, pairs, schedules, channels and alert rules from a YAML file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        parser.add_argument(
            "--check",
            action="store_true",
            help="dry run: validate and print what would change; nothing is stored",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check"]:
            try:
                planned = check_config_file(options["file"])
            except ConfigError as exc:
                raise CommandError(f"would not apply:\n{exc}") from None
            for line in planned:
                self.stdout.write(f"would {line}")
            self.stdout.write(
                f"{len(planned)} change{'s' * (len(planned) != 1)}; nothing applied (--check)"
            )
            return
        try:
            counts = apply_config_file(options["file"])
        except ConfigError as exc:
            raise CommandError(f"nothing applied:\n{exc}") from None
        self.stdout.write(", ".join(f"{n} {section}" for section, n in counts.items()) + " applied")
