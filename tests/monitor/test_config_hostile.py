"""Hostile and careless config files: each is refused as ``file:line: path: problem``, never a
traceback, never a hang, and nothing is applied."""

import pytest

from monitor.models import Endpoint, Pair
from monitor.setup.config import ConfigError, apply_config_file, apply_config_text
from tests.monitor.configs import GOOD

LOL = '"lol","lol","lol","lol","lol","lol","lol","lol","lol"'
BILLION_LAUGHS = f"a: &a [{LOL}]\n" + "".join(  # 9**9 "lol"s once the aliases are followed
    f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def refused(text: str, source: str = "t.yaml") -> str:
    with pytest.raises(ConfigError) as err:
        apply_config_text(text, source=source)
    assert Endpoint.objects.count() == 0 and Pair.objects.count() == 0
    return str(err.value)


@pytest.mark.django_db
@pytest.mark.timeout(20)  # a guard: before, this file ran for minutes until killed
def test_it_refuses_the_billion_laughs_at_its_first_anchor():
    assert "*h,*h" in BILLION_LAUGHS and len(BILLION_LAUGHS) < 400
    assert refused(BILLION_LAUGHS) == "t.yaml:1: a: anchors (&a) are not allowed"


@pytest.mark.django_db
def test_it_refuses_aliases_inside_the_config():
    text = GOOD.replace("    model: acme-large\n", "    model: &m acme-large\n")
    assert "t.yaml:9: endpoints[1].model: anchors (&m) are not allowed" in refused(text)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "tag",
    [
        "!!python/object/apply:os.system ['touch /tmp/pwned']",
        "!!python/name:os.system",
        "!!python/object:object {}",
        "!custom value",
    ],
)
def test_it_refuses_non_core_tags_with_file_line_and_field(tag):
    text = GOOD.replace("    model: acme-large-turbo\n", f"    model: {tag}\n")
    message = refused(text)
    assert message.startswith("t.yaml:4: endpoints[0].model: the tag ")
    assert "not allowed" in message


@pytest.mark.django_db
def test_it_refuses_a_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "latin.yaml"
    path.write_bytes(GOOD.replace("acme-large-turbo", "acme-très-rapide").encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin.yaml:4: \(file\): not UTF-8 \(byte 0xe8\)"):
        apply_config_file(path)
    assert Endpoint.objects.count() == 0


@pytest.mark.django_db
def test_it_refuses_a_file_over_the_size_cap_without_reading_it_all(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(GOOD + "# " + "x" * (20 << 20) + "\n")
    with pytest.raises(ConfigError, match=r"big.yaml:1: \(file\): larger than 1048576 bytes"):
        apply_config_file(path)


@pytest.mark.django_db
def test_it_refuses_an_over_long_value():
    text = GOOD.replace("    model: acme-large-turbo\n", f"    model: {'x' * 70_000}\n")
    assert "t.yaml:4: endpoints[0].model: longer than 65536 characters" in refused(text)


@pytest.mark.django_db
def test_it_refuses_duplicate_keys():
    text = GOOD.replace(
        "    model: acme-large-turbo\n", "    model: acme-large-turbo\n    model: acme-other\n"
    )
    assert "t.yaml:5: endpoints[0].model: duplicate key (first on line 4)" in refused(text)


@pytest.mark.django_db
def test_it_refuses_duplicate_endpoint_pair_and_channel_names():
    text = GOOD.replace("  - name: acme-base\n", "  - name: acme-fast\n")
    assert "t.yaml:6: endpoints[1].name: duplicate name 'acme-fast' (first on line 2)" in refused(
        text
    )
    text = GOOD.replace(
        "channels:\n",
        "  - {name: acme, fast: acme-fast, base: acme-base, suite: smoke}\nchannels:\n",
    )
    assert "t.yaml:27: pairs[1].name: duplicate name 'acme' (first on line 20)" in refused(text)
    text = GOOD.replace(
        "alert_rules:\n", "  - {name: ops, kind: email, target: a@b.c}\nalert_rules:\n"
    )
    assert "t.yaml:31: channels[1].name: duplicate name 'ops' (first on line 28)" in refused(text)


@pytest.mark.django_db
def test_it_refuses_duplicate_rule_names_and_case_keys():
    text = (
        GOOD + "  - {name: acme-ttft, pair: acme, metric: e2e_p95, tier: fast, op: gt, "
        "threshold: 1}\n"
    )
    assert "alert_rules[1].name: duplicate name 'acme-ttft'" in refused(text)
    text = GOOD.replace(
        "        max_tokens: 16\n",
        "        max_tokens: 16\n      - {key: hello, messages: [{role: user, content: again}]}\n",
    )
    assert "suites[0].cases[1].key: duplicate case key 'hello'" in refused(text)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "old,new,expected",
    [
        ("every: 15m", "every: 0s", "t.yaml:26: pairs[0].schedule.every: '0s' is shorter than 60s"),
        ("audit_every: 6h", "audit_every: 59s", "pairs[0].schedule.audit_every: '59s' is shorter"),
        (
            "    context_window: 200000\n",
            "    context_window: 200000\n    timeout_s: -5\n",
            "t.yaml:12: endpoints[1].timeout_s: must be > 0 and ≤ 3600 seconds (got -5)",
        ),
        (
            "https://api.acme.example/v1\n    model: acme-large-turbo",
            "ftp://api.acme.example/v1\n    model: acme-large-turbo",
            "t.yaml:3: endpoints[0].base_url: 'ftp://api.acme.example/v1': ftp:// is not allowed",
        ),
        ("repeat: 2", "repeat: 0", "t.yaml:25: pairs[0].repeat: must be 1 to 100 (got 0)"),
        ("repeat: 2", "repeat: two", "pairs[0].repeat: must be 1 to 100 (got 'two')"),
    ],
)
def test_it_refuses_values_out_of_range(old, new, expected):
    assert old in GOOD
    assert expected in refused(GOOD.replace(old, new))
