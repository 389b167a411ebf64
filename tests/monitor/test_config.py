"""apply_config: idempotent, transactional, errors with file, line and field."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django_celery_beat.models import PeriodicTask

from monitor.models import AlertRule, Channel, Endpoint, Pair, Suite
from monitor.setup.config import ConfigError, apply_config_text
from tests.monitor.configs import GOOD


@pytest.mark.django_db
def test_it_applies_a_full_config_and_is_idempotent():
    first = apply_config_text(GOOD, source="team.yaml")
    second = apply_config_text(GOOD, source="team.yaml")
    assert (
        first
        == second
        == {"endpoints": 2, "suites": 1, "pairs": 1, "channels": 1, "alert_rules": 1}
    )
    assert Endpoint.objects.count() == 2
    assert Endpoint.objects.get(name="acme-base").protocol == "anthropic"
    pair = Pair.objects.get(name="acme")
    assert pair.suite == Suite.objects.get(name="team-cases", version=2)
    # the deprecated shorthand `claimed_speedup: 6` is an E2E factor
    assert (pair.claim_metric, pair.claim_form, pair.claim_value) == ("e2e", "factor", 6)
    assert pair.claim_percentile is None
    assert set(
        PeriodicTask.objects.filter(name__endswith=":acme").values_list("name", flat=True)
    ) == {"probe:acme", "audit:acme"}
    assert PeriodicTask.objects.get(name="probe:acme").interval.every == 900
    rule = AlertRule.objects.get(name="acme-ttft")
    assert list(rule.channels.all()) == [Channel.objects.get(name="ops")]


@pytest.mark.django_db
def test_it_reports_file_line_and_field_and_applies_nothing():
    bad = GOOD.replace("    protocol: anthropic\n", "    protocol: grpc\n")
    with pytest.raises(ConfigError) as err:
        apply_config_text(bad, source="team.yaml")
    assert "team.yaml:7: endpoints[1].protocol:" in str(err.value)
    assert Endpoint.objects.count() == 0 and Pair.objects.count() == 0


@pytest.mark.django_db
def test_it_refuses_a_literal_api_key():
    text = (
        "endpoints:\n  - name: x\n    base_url: https://a.example/v1\n    model: m\n"
        "    api_key: sk-secret123\n"
    )
    with pytest.raises(ConfigError) as err:
        apply_config_text(text, source="c.yaml")
    message = str(err.value)
    assert "c.yaml:5: endpoints[0].api_key" in message and "sk-secret123" not in message


@pytest.mark.django_db
def test_it_names_unknown_references_and_fields():
    text = GOOD.replace("    base: acme-base\n", "    base: acme-bsae\n").replace(
        "    repeat: 2\n", "    repeat: 2\n    colour: red\n"
    )
    with pytest.raises(ConfigError) as err:
        apply_config_text(text, source="t.yaml")
    assert "t.yaml:26: pairs[0].colour: unknown field" in str(err.value)
    assert Pair.objects.count() == 0


@pytest.mark.django_db
def test_it_reports_bad_yaml_and_bad_durations(tmp_path):
    with pytest.raises(ConfigError, match=r"t.yaml:2: not valid YAML"):
        apply_config_text("endpoints:\n\t- name: x\n", source="t.yaml")
    with pytest.raises(ConfigError, match=r"pairs\[0\].schedule.every: .*not a duration"):
        apply_config_text(GOOD.replace("every: 15m", "every: often"), source="t.yaml")
    assert Endpoint.objects.count() == 0


@pytest.mark.django_db
def test_the_command_applies_a_file_and_fails_with_the_message(tmp_path, capsys):
    path = tmp_path / "team.yaml"
    path.write_text(GOOD)
    call_command("apply_config", str(path))
    assert "2 endpoints" in capsys.readouterr().out
    path.write_text(GOOD.replace("model: acme-large-turbo", "model: ''"))
    with pytest.raises(CommandError, match=r"team.yaml:\d+: endpoints\[0\].model"):
        call_command("apply_config", str(path))


@pytest.mark.django_db
def test_it_rejects_an_alert_rule_with_an_unknown_metric():
    with pytest.raises(ConfigError, match=r"t.yaml:34: alert_rules\[0\].metric: unknown metric"):
        apply_config_text(GOOD.replace("metric: ttft_p95", "metric: ttft_p42"), source="t.yaml")
    assert AlertRule.objects.count() == 0


@pytest.mark.django_db
def test_it_rejects_a_case_with_an_invalid_constraint():
    text = GOOD.replace(
        "        max_tokens: 16\n",
        "        max_tokens: 16\n        constraints: [{kind: max_wrds, n: 5}]\n",
    )
    with pytest.raises(ConfigError, match=r"t.yaml:19: suites\[0\].cases\[0\]: constraints\[0\]"):
        apply_config_text(text, source="t.yaml")
    assert Suite.objects.count() == 0


@pytest.mark.django_db
def test_it_applies_served_tier_settings_and_a_signed_webhook_channel():
    text = GOOD.replace(
        "    api_key_env: ACME_API_KEY\n  - name: acme-base",
        "    api_key_env: ACME_API_KEY\n    expected_tier: priority\n"
        "    served_tier_fields: [x-served-tier, meta.tier]\n  - name: acme-base",
        1,
    ).replace(
        "alert_rules:\n",
        "  - name: hook\n    kind: webhook\n"
        "    target: https://hooks.acme.example/tierwatch\n"
        "    secret_env: ACME_WEBHOOK_SECRET\nalert_rules:\n",
    )
    apply_config_text(text, source="team.yaml")
    fast = Endpoint.objects.get(name="acme-fast")
    assert fast.expected_tier == "priority"
    assert fast.served_tier_fields == ["x-served-tier", "meta.tier"]
    assert Channel.objects.get(name="hook").secret_env == "ACME_WEBHOOK_SECRET"


@pytest.mark.django_db
def test_it_names_a_served_tier_fields_value_that_is_not_a_list():
    text = GOOD.replace(
        "    api_key_env: ACME_API_KEY\n  - name: acme-base",
        "    api_key_env: ACME_API_KEY\n    served_tier_fields: x-tier\n  - name: acme-base",
        1,
    )
    with pytest.raises(ConfigError) as err:
        apply_config_text(text, source="team.yaml")
    assert "team.yaml:6: endpoints[0].served_tier_fields: " in str(err.value)
    assert "list of header names" in str(err.value)


@pytest.mark.django_db
def test_a_claim_is_given_in_the_vendors_metric_and_form():
    floor = GOOD.replace(
        "    claimed_speedup: 6\n",
        "    claim: {metric: output_tps, form: floor, value: 80, percentile: 99}\n",
    )
    apply_config_text(floor, source="team.yaml")
    pair = Pair.objects.get(name="acme")
    assert (pair.claim_metric, pair.claim_form, pair.claim_value, pair.claim_percentile) == (
        "output_tps",
        "floor",
        80,
        99,
    )
    assert pair.claim.text() == "99 % of requests ≥ 80 tok/s"
    factor = GOOD.replace(
        "    claimed_speedup: 6\n", "    claim: {metric: output_tps, value: 2.5}\n"
    )
    apply_config_text(factor, source="team.yaml")
    pair.refresh_from_db()
    assert pair.claim.text() == "2.5× output tok/s" and pair.claim_percentile is None


FLOOR = "claim: {metric: ttft, form: floor, value: 300"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("claim", "where", "problem"),
    [
        (FLOOR + "}", "claim.percentile", "a floor needs"),
        (FLOOR + ", percentile: 100}", "claim.percentile", "between 0 and 100"),
        ("claim: {metric: tps, value: 2}", "claim.metric", "must be one of output_tps"),
        ("claim: {metric: e2e, value: -1}", "claim.value", "must be a number > 0"),
        ("claim: {metric: e2e, value: 2, unit: x}", "claim.unit", "unknown field"),
        ("claim: 6", "claim", "must be a mapping"),
        ("claimed_speedup: 0", "claimed_speedup", "must be a number > 0"),
    ],
)
def test_a_bad_claim_is_named_with_file_line_and_field_and_nothing_is_applied(
    claim, where, problem
):
    bad = GOOD.replace("    claimed_speedup: 6\n", f"    {claim}\n")
    line = bad.splitlines().index(f"    {claim}") + 1
    with pytest.raises(ConfigError) as err:
        apply_config_text(bad, source="team.yaml")
    assert f"team.yaml:{line}: pairs[0].{where}: " in str(err.value) and problem in str(err.value)
    assert not Pair.objects.exists()


@pytest.mark.django_db
def test_claim_and_the_older_shorthand_together_are_refused():
    both = GOOD.replace(
        "    claimed_speedup: 6\n", "    claimed_speedup: 6\n    claim: {metric: e2e, value: 6}\n"
    )
    with pytest.raises(ConfigError, match="give either claim or the older claimed_speedup"):
        apply_config_text(both, source="team.yaml")
