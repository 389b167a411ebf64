import pytest

from monitor.env import (
    EnvError,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_secret,
    env_str,
    secret_key,
)


def test_it_reads_typed_values(monkeypatch):
    monkeypatch.setenv("TW_B", "yes")
    monkeypatch.setenv("TW_I", "42")
    monkeypatch.setenv("TW_F", "2.5")
    monkeypatch.setenv("TW_L", "a, b,,c")
    assert env_bool("TW_B") is True
    assert env_int("TW_I", 0) == 42
    assert env_float("TW_F", 0.0) == 2.5
    assert env_list("TW_L") == ["a", "b", "c"]


def test_it_uses_defaults_for_unset_and_empty(monkeypatch):
    monkeypatch.setenv("TW_EMPTY", "")
    assert env_str("TW_EMPTY", "dflt") == "dflt"
    assert env_int("TW_UNSET_XYZ", 7) == 7
    assert env_bool("TW_EMPTY", True) is True


@pytest.mark.parametrize(
    "reader,value", [(env_bool, "maybe"), (env_int, "4x"), (env_float, "fast")]
)
def test_it_fails_loudly_naming_the_variable(monkeypatch, reader, value):
    monkeypatch.setenv("TW_BAD", value)
    with pytest.raises(EnvError, match="TW_BAD"):
        reader("TW_BAD", *(() if reader is env_bool else (0,)))


def test_a_key_is_stripped_and_blank_is_unset(monkeypatch):
    monkeypatch.setenv("TW_KEY", "  sk-abc123 \n")
    assert env_secret("TW_KEY") == "sk-abc123"
    monkeypatch.setenv("TW_KEY", " \n")
    assert env_secret("TW_KEY") is None


@pytest.mark.parametrize("bad", ["sk-a\rb", "sk-a\nb", "sk-a\x01b", "sk-a\x1bb", "sk-a\x7fb"])
# (NUL cannot be in an environment variable at all: the OS refuses it)
def test_a_key_with_a_control_character_is_refused_naming_the_variable_not_the_value(
    monkeypatch, bad
):
    monkeypatch.setenv("TW_KEY", bad)
    with pytest.raises(EnvError) as err:
        env_secret("TW_KEY")
    assert "TW_KEY" in str(err.value) and "sk-a" not in str(err.value)


def test_an_unset_secret_key_is_made_once_and_kept(monkeypatch, tmp_path):
    monkeypatch.delenv("TW_SECRET", raising=False)
    first = secret_key("TW_SECRET", tmp_path / "secret_key", debug=False)
    assert (
        len(first) >= 50 and secret_key("TW_SECRET", tmp_path / "secret_key", debug=False) == first
    )
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(
    "weak",
    [
        "change-me",
        "short-but-random-8f3a",
        "insecure-dev-key-set-TIERWATCH_SECRET_KEY-in-production",
    ],
)
def test_a_weak_secret_key_is_refused_without_debug_only(monkeypatch, tmp_path, weak):
    monkeypatch.setenv("TW_SECRET", weak)
    with pytest.raises(EnvError, match="TW_SECRET is too weak") as err:
        secret_key("TW_SECRET", tmp_path / "k", debug=False)
    assert weak not in str(err.value)
    assert secret_key("TW_SECRET", tmp_path / "k", debug=True) == weak
