"""Production settings: the README's production block passes ``check --deploy`` with no
warning, a weak SECRET_KEY stops start-up, and logins are throttled (django-axes)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError

from monitor.setup import roles
from monitor.web.client_ip import client_ip
from tests import factories
from tests.support import ROOT as SUPPORT_ROOT

ROOT = Path(SUPPORT_ROOT)


def production_env() -> dict[str, str]:
    """The README's "Production" block, read from the README itself (so the two agree)."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("### Production", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    env = {}
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, value = line.partition("=")
            env[name] = value
    env["TIERWATCH_SECRET_KEY"] = "Vq3" + "x7-Lm_9pR2tK" * 5  # 63 characters, > 5 distinct
    return env


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TIERWATCH_") or k == "TIERWATCH_VAR_DIR"
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_in_the_documented_production_env():
    env = production_env()
    assert env["TIERWATCH_SECURE_HSTS_SECONDS"] == "31536000"
    result = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_without_the_production_block_check_deploy_names_the_https_settings():
    result = manage("check", "--deploy", env={})
    found = set(re.findall(r"security\.W0\d\d", result.stdout + result.stderr))
    assert {"security.W004", "security.W008", "security.W012", "security.W016"} <= found


@pytest.mark.parametrize("key", ["change-me", "a-short-key-0123456789"])
def test_it_refuses_to_start_with_a_weak_secret_key_when_debug_is_off(key):
    result = manage("check", env={**production_env(), "TIERWATCH_SECRET_KEY": key})
    assert result.returncode != 0
    assert "TIERWATCH_SECRET_KEY is too weak" in result.stderr and key not in result.stderr
    debug = manage("check", env={"TIERWATCH_SECRET_KEY": key, "TIERWATCH_DEBUG": "true"})
    assert debug.returncode == 0, debug.stderr


@pytest.mark.django_db
def test_thirty_wrong_passwords_lock_the_address_out_even_for_the_right_one(client):
    get_user_model().objects.create_user("alice", password="a-Good-passphrase-42")
    statuses = [
        client.post("/accounts/login/", {"username": "alice", "password": f"wrong{i}"}).status_code
        for i in range(30)
    ]
    assert statuses[0] == 200  # the form again, with its error
    assert statuses[-1] == 429 and statuses.count(429) >= 20
    right = client.post(
        "/accounts/login/", {"username": "alice", "password": "a-Good-passphrase-42"}
    )
    assert right.status_code == 429
    assert client.get("/").status_code == 302  # still not logged in


@pytest.mark.django_db
def test_a_right_password_before_the_limit_logs_in(client):
    factories.user("bob", roles.VIEWER, password="a-Good-passphrase-42")
    client.post("/accounts/login/", {"username": "bob", "password": "wrong"})
    ok = client.post("/accounts/login/", {"username": "bob", "password": "a-Good-passphrase-42"})
    assert ok.status_code == 302 and client.get("/").status_code == 200


@pytest.mark.parametrize("password", ["short1", "password123", "12345678901", "alice-smith"])
def test_weak_passwords_are_refused(password):
    user = get_user_model()(username="alice-smith", email="alice@example.com")
    with pytest.raises(ValidationError):
        validate_password(password, user)


BEHIND_PROXY = {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "203.0.113.7, 10.0.0.2"}


@pytest.mark.django_db
def test_behind_the_proxy_one_users_wrong_passwords_lock_out_only_that_user(client, settings):
    """Both users come through the same proxy (10.0.0.2) from the same client address: alice's
    ten wrong passwords lock alice out, bob still logs in."""
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    get_user_model().objects.create_user("alice", password="a-Good-passphrase-42")
    get_user_model().objects.create_user("bob", password="a-Good-passphrase-43")
    for i in range(12):
        client.post("/accounts/login/", {"username": "alice", "password": f"x{i}"}, **BEHIND_PROXY)
    alice = {"username": "alice", "password": "a-Good-passphrase-42"}
    assert client.post("/accounts/login/", alice, **BEHIND_PROXY).status_code == 429
    bob = {"username": "bob", "password": "a-Good-passphrase-43"}
    assert client.post("/accounts/login/", bob, **BEHIND_PROXY).status_code == 302
    assert set(AccessAttempt.objects.values_list("ip_address", "username")) == {
        ("203.0.113.7", "alice")
    }


def test_the_forwarded_address_counts_only_from_a_trusted_proxy(rf, settings):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    assert client_ip(rf.get("/", **BEHIND_PROXY)) == "203.0.113.7"
    spoofed = {"REMOTE_ADDR": "198.51.100.9", "HTTP_X_FORWARDED_FOR": "203.0.113.7"}
    assert client_ip(rf.get("/", **spoofed)) == "198.51.100.9"  # not a proxy: header ignored
    chained = {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "1.2.3.4, 203.0.113.7"}
    assert client_ip(rf.get("/", **chained)) == "203.0.113.7"  # the left one the client wrote
    settings.TRUSTED_PROXIES = []
    assert client_ip(rf.get("/", **BEHIND_PROXY)) == "10.0.0.2"
