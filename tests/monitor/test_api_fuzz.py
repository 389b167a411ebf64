"""schemathesis, bounded, against ``/api/openapi.json`` with an operator's token: every
operation fuzzed from its schema (examples, coverage, fuzzing and the stateful phase that
follows the schema's links) and no answer may be a 5xx or stray from the schema (status
codes, content types, bodies, headers). Skips, saying why, only when schemathesis is absent
(it is in the dev extra)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from monitor.models import Alert, AlertRule, RunKind
from monitor.setup import roles
from monitor.setup.api_tokens import create_token
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

BUDGET_S = 60  # schemathesis' own time budget for the whole run
ST = shutil.which("st", path=str(Path(sys.executable).parent))


@pytest.mark.long
@pytest.mark.timeout(BUDGET_S + 120)
@pytest.mark.skipif(ST is None, reason="schemathesis not installed (pip install -e '.[dev]')")
def test_schemathesis_finds_no_server_error_and_no_schema_violation(live_server, tmp_path):
    pair = factories.pair(claim_value=4)
    run = factories.run(pair, minutes_ago=5, summary=factories.summary())
    factories.run(pair, kind=RunKind.AUDIT, minutes_ago=4, summary=factories.summary())
    rule = AlertRule.objects.create(name="ttft", metric="ttft_p95", threshold=1)
    Alert.objects.create(rule=rule, pair=pair, message="TTFT high", value=2.0, run=run)
    _, token = create_token(user=factories.user("fuzzer", roles.OPERATOR))
    # the first request imports the API (seconds on a shared machine); schemathesis waits 10 s
    assert httpx.get(f"{live_server.url}/api/openapi.json", timeout=120).status_code == 200
    done = subprocess.run(
        [
            ST,
            "run",
            f"{live_server.url}/api/openapi.json",
            "--header",
            f"Authorization: Bearer {token}",
            "--checks",
            "all",
            "--max-time",
            str(BUDGET_S),
            "--max-examples",
            "25",
            "--seed",
            "22",
            "--workers",
            "1",
            "--request-timeout",
            "20",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=BUDGET_S + 90,
        cwd=tmp_path,  # its .schemathesis/ cache stays out of the checkout
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:].replace(token, "TOKEN")
