import pytest

from monitor.env import EnvError, env_bool, env_float, env_int, env_list, env_str


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
