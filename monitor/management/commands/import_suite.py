from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from monitor.setup.suite_import import SuiteImportError, import_file


class Command(BaseCommand):
    help = (
        "Import a suite from a file (HumanEval JSONL, BFCL JSON, tierwatch JSONL/YAML): all "
        "cases or none; a changed file becomes a new version of the suite."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")
        parser.add_argument("--name", help="suite name (default: from the file name)")
        parser.add_argument("--answers", help="BFCL: the matching possible_answer file")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            suite, created = import_file(
                options["file"], name=options["name"], answers=options["answers"]
            )
        except SuiteImportError as exc:
            raise CommandError(f"nothing imported:\n{exc}") from None
        n = suite.cases.count()
        self.stdout.write(
            f"{suite} ({n} cases): " + ("new version" if created else "unchanged, same content")
        )
