"""A pair added in the admin runs: schedules on its form, an "outputs differ" rule, the
built-in suites to pick, repeat 2 by default; its page says when it will never run; and
``apply_config --check`` says what a file would change without changing it."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django_celery_beat.models import PeriodicTask

from monitor.models import AlertRule, Channel, ConfigChange, Endpoint, Pair, Suite
from monitor.setup.config import apply_config_text
from tests import factories
from tests.monitor.configs import GOOD

pytestmark = pytest.mark.django_db


def add_form(**fields) -> dict:
    fast = factories.endpoint("acme-fast", url="https://api.acme.test/v1")
    base = factories.endpoint("acme-base", url="https://api.acme.test/v1")
    suite = Suite.objects.get(name="smoke")
    return {
        "name": "acme",
        "fast": fast.pk,
        "base": base.pk,
        "suite": suite.pk,
        "repeat": 2,
        "active": "on",
        "probe_every_minutes": 15,
        "audit_every_hours": 6,
        **fields,
    }


def test_the_add_form_offers_the_built_in_suites_and_repeat_2(admin_client):
    page = admin_client.get("/admin/monitor/pair/add/").content.decode()
    for name in ("smoke", "coding", "scenarios", "audit"):
        assert f">{name} v" in page, name
    assert 'name="repeat" value="2"' in page
    assert 'name="probe_every_minutes" value="15"' in page
    assert 'name="audit_every_hours" value="24"' in page  # daily: tripwires cover between
    assert Pair._meta.get_field("repeat").default == 2


def test_a_pair_added_in_the_admin_gets_its_schedules_and_an_outputs_differ_rule(
    admin_client,
):
    ops = Channel.objects.create(name="ops", kind="email", target="ops@example.org")
    admin_client.get("/admin/monitor/pair/add/")  # syncs the built-in suites
    response = admin_client.post("/admin/monitor/pair/add/", add_form())
    assert response.status_code == 302, response.content.decode()[:2000]
    probe = PeriodicTask.objects.get(name="probe:acme")
    audit = PeriodicTask.objects.get(name="audit:acme")
    assert (probe.interval.every, audit.interval.every) == (900, 21600)
    assert probe.enabled and audit.enabled and probe.task == "monitor.tasks.probe_pair_task"
    rule = AlertRule.objects.get(pair__name="acme", metric="verdict_different")
    assert list(rule.channels.all()) == [ops]
    assert ConfigChange.objects.filter(model="periodictask", source="admin").count() == 2


def test_emptying_a_cadence_disables_that_schedule(admin_client):
    admin_client.get("/admin/monitor/pair/add/")
    form = add_form()
    admin_client.post("/admin/monitor/pair/add/", form)
    pair = Pair.objects.get(name="acme")
    response = admin_client.post(
        f"/admin/monitor/pair/{pair.pk}/change/", {**form, "audit_every_hours": ""}
    )
    assert response.status_code == 302
    assert not PeriodicTask.objects.get(name="audit:acme").enabled
    assert PeriodicTask.objects.get(name="probe:acme").enabled
    page = admin_client.get(f"/admin/monitor/pair/{pair.pk}/change/").content.decode()
    assert 'name="probe_every_minutes" value="15"' in page


def test_the_pair_page_says_when_a_pair_will_never_run(admin_client):
    pair = factories.pair()
    page = admin_client.get(f"/pairs/{pair.name}/").content.decode()
    assert "no probe schedule and will never run on its own" in page
    PeriodicTask.objects.all().delete()
    from monitor.setup.schedules import ensure_probe_schedule

    ensure_probe_schedule(pair_name=pair.name, every_s=900)
    page = admin_client.get(f"/pairs/{pair.name}/").content.decode()
    assert "will never run" not in page and "probe every 15 minutes" in page


def test_apply_config_check_prints_what_would_change_and_changes_nothing():
    out = io.StringIO()
    call_command("apply_config", "--check", _file(GOOD), stdout=out)
    said = out.getvalue()
    assert "would add endpoint acme-fast" in said and "would add pair acme" in said
    assert "nothing applied (--check)" in said
    assert not Endpoint.objects.exists() and not Pair.objects.exists()
    assert not PeriodicTask.objects.filter(name="probe:acme").exists()
    assert not ConfigChange.objects.exists()

    apply_config_text(GOOD, source="team.yaml")
    changed = GOOD.replace("claimed_speedup: 6", "claimed_speedup: 4")
    assert changed != GOOD
    out = io.StringIO()
    call_command("apply_config", "--check", _file(changed), stdout=out)
    assert "would change pair acme: claim_value 6.0 → 4.0" in out.getvalue()
    assert "1 change;" in out.getvalue()
    assert Pair.objects.get(name="acme").claim_value == 6


def _file(text: str) -> str:
    import tempfile

    f = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    f.write(text)
    f.close()
    return f.name
