"""The plumbing a first hour trips over: the demo's links point at its own port, URLs are
links, a refused alert action says why (with htmx and without), the maintenance form keeps
what was typed and says what is wrong in words."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from monitor.management.commands.demo import demo_env
from monitor.models import Alert, AlertRule, MaintenanceWindow
from tests import factories

pytestmark = pytest.mark.django_db


def test_the_demo_sets_the_site_url_from_its_port():
    env = demo_env({"PATH": "/bin"}, 8100)
    assert env["TIERWATCH_SITE_URL"] == "http://127.0.0.1:8100"
    assert (
        demo_env({"TIERWATCH_SITE_URL": "https://mon.example.org"}, 8100)["TIERWATCH_SITE_URL"]
        == "https://mon.example.org"
    )  # set by the user: kept
    assert "TIERWATCH_SITE_URL" not in demo_env({}, None)  # --no-web


@pytest.fixture
def operator(client):
    user = User.objects.create_user("op", password="pw-op-12345")
    for codename in ("change_alert", "view_alert", "add_maintenancewindow", "view_pair"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(user)
    return client


@pytest.fixture
def alert():
    pair = factories.pair()
    rule = AlertRule.objects.create(name="r", pair=pair, metric="ttft_p95", threshold=1.0)
    return Alert.objects.create(
        rule=rule, pair=pair, message="TTFT is high. http://127.0.0.1:8100/pairs/demo/"
    )


def test_urls_on_the_timeline_are_links(operator, alert):
    html = operator.get("/pairs/demo/timeline/").content.decode()
    assert '<a href="http://127.0.0.1:8100/pairs/demo/"' in html


def test_every_page_lets_htmx_swap_error_fragments(operator, alert):
    html = operator.get("/pairs/demo/timeline/").content.decode()
    assert '<meta name="htmx-config"' in html
    assert '{"code": "[45]..", "swap": true, "error": true}' in html


def test_a_refused_action_without_htmx_keeps_its_message(operator, alert):
    operator.post(f"/alerts/{alert.pk}/acknowledge/")
    response = operator.post(f"/alerts/{alert.pk}/acknowledge/", follow=True)
    assert f"Alert {alert.pk} not changed: alert {alert.pk} is acknowledged, not firing" in (
        response.content.decode()
    )


def test_silence_with_a_bad_number_says_what_it_needs(operator, alert):
    response = operator.post(
        f"/alerts/{alert.pk}/silence/", {"hours": "soon"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 400
    text = response.content.decode()
    assert "invalid literal" not in text
    assert "silence for one of (1, 4, 24, 72) hours (got &#x27;soon&#x27;)" in text


def test_the_maintenance_form_keeps_the_values_and_says_what_is_wrong(operator, alert):
    response = operator.post(
        "/pairs/demo/maintenance/",
        {"starts_at": "2026-12-01T04:00", "ends_at": "2026-12-01T02:00", "reason": "vendor move"},
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert 'value="vendor move"' in html and 'value="2026-12-01T04:00"' in html
    assert "the end must be after the start" in html
    assert "* __all__" not in html and "* ends_at" not in html  # not errors.as_text()
    assert '<details class="maintenance-form" open>' in html
    assert not MaintenanceWindow.objects.exists()
