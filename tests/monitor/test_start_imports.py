"""What a Django start imports: the processes the product starts (``manage.py`` commands,
Celery workers) load the URLs and the tasks, and must not pay for scipy there
(``evals.stats`` imports it where a statistic is computed)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import ROOT

START = """
import sys, django
django.setup()
import monitor.tasks, monitor.urls
print(sorted({m.split(".")[0] for m in sys.modules} & {"scipy", "matplotlib", "weasyprint"}))
"""


def test_a_django_start_with_the_urls_and_tasks_imports_no_scipy_matplotlib_or_weasyprint():
    out = subprocess.run(
        [sys.executable, "-c", START],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "monitor.settings"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
