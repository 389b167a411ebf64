"""The README's first command, as a user runs it: the embedded demo starts, prints a URL and a
login, and data flows (SQLite + filesystem broker + simulated vendor, nothing else); its console
ends with that banner, the children's access, axes and worker lines going to a log file."""

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import httpx
import pytest

from tests.factories import free_port
from tests.support import ROOT


def login(client: httpx.Client, base: str, user: str, password: str) -> None:
    page = client.get(f"{base}/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    answer = client.post(
        f"{base}/accounts/login/",
        data={"username": user, "password": password, "csrfmiddlewaretoken": token},
    )
    assert answer.status_code in (200, 302)


@pytest.mark.long
@pytest.mark.timeout(240)
def test_the_demo_starts_prints_a_url_and_data_flows(tmp_path):
    env = {**os.environ, "DATABASE_URL": "", "REDIS_URL": "", "TIERWATCH_VAR_DIR": str(tmp_path)}
    web_port, vendor_port = free_port(), free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "demo",
            "--port",
            str(web_port),
            "--vendor-port",
            str(vendor_port),
            "--every",
            "20",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        url = user = password = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (url and user):
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if m := re.search(r"open\s+(http://\S+)", line):
                url = m.group(1).rstrip("/")
            if m := re.search(r"login\s+(\S+) / (\S+)", line):
                user, password = m.groups()
        assert url and user, "".join(lines[-40:])
        db = sqlite3.connect(tmp_path / "tierwatch.sqlite3", timeout=30)
        done = 0
        while time.monotonic() < deadline + 60 and not done:
            done = db.execute("select count(*) from monitor_run where status='done'").fetchone()[0]
            time.sleep(0.2)
        assert done >= 1, "no run completed in the demo"
        samples = db.execute("select count(*) from monitor_sample").fetchone()[0]
        assert samples > 0
        with httpx.Client(follow_redirects=True, timeout=10) as client:
            login(client, url, user, password)
            overview = client.get(f"{url}/")
            assert overview.status_code == 200
            assert "demo-fast-vs-base" in overview.text and "simulated" in overview.text.lower()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    # The console: the banner last, then only "stopping…"; the children's lines in the log file.
    console = "".join(lines) + proc.stdout.read()
    after_banner = console.split("web, worker and vendor logs: ", 1)
    assert len(after_banner) == 2 and after_banner[1].startswith(str(tmp_path / "demo.log"))
    assert after_banner[1].splitlines()[1:] in ([], ["stopping…"]), console[-2000:]
    assert '"GET /' not in console and "AXES" not in console and "celery@" not in console
    log = (tmp_path / "demo.log").read_text()
    assert '"GET / HTTP/1.1" 200' in log and "AXES: Successful login" in log
    for port in (web_port, vendor_port):
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    workers = subprocess.run(
        ["pgrep", "-f", f"--schedule {tmp_path}"], capture_output=True, text=True
    )
    assert workers.stdout.strip() == "", "the demo left its Celery worker behind"
