"""Every hostile config and suite file in ``tests/data/hostile/`` is refused as
``file:line: field: problem`` (the file's first line says which), never a traceback, and nothing
is written. Config files go through ``apply_config``; suite files through ``import_suite``
(``monitor.setup.suite_import.import_file``) with apply_config's caps."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from evals.benchmarks import importer
from monitor.models import Case, Channel, ConfigChange, Endpoint, Pair, Suite
from monitor.setup.config import ConfigError, apply_config_file
from monitor.setup.suite_import import SuiteImportError, import_file

HOSTILE = Path(__file__).resolve().parents[1] / "data" / "hostile"
CONFIGS = sorted((HOSTILE / "config").glob("*.yaml"))
SUITES = sorted(p for p in (HOSTILE / "suite").iterdir() if not p.name.endswith(".expect"))


def expected(path: Path) -> str:
    """``# expect: LINE: field: problem`` on the file's first line (or in ``NAME.expect``)."""
    sidecar = path.with_name(path.name + ".expect")
    if sidecar.exists():
        return sidecar.read_text().strip()
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), path
    return first.removeprefix("# expect: ")


def nothing_written() -> bool:
    return not any(m.objects.exists() for m in (Endpoint, Pair, Suite, Case, Channel, ConfigChange))


@pytest.mark.django_db
@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_a_hostile_config_file_is_refused_at_its_line(path):
    with pytest.raises(ConfigError) as caught:
        apply_config_file(path)
    assert f"{path}:{expected(path)}" in str(caught.value).splitlines()[0]
    assert nothing_written()


@pytest.mark.django_db
@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", SUITES, ids=lambda p: p.name)
def test_a_hostile_suite_file_is_refused_at_its_line(path):
    with pytest.raises(SuiteImportError) as caught:
        import_file(path)
    assert f"{path}:{expected(path)}" in str(caught.value).splitlines()[0]
    assert nothing_written()


@pytest.mark.django_db
@pytest.mark.timeout(60)
def test_a_gzip_bomb_stops_at_the_decompressed_cap(tmp_path):
    """200 MiB of spaces in 200 KB: refused once the cap is read, never decompressed whole."""
    path = tmp_path / "bomb.jsonl.gz"
    path.write_bytes(gzip.compress(b" " * (200 << 20), 9))
    with pytest.raises(SuiteImportError) as caught:
        import_file(path)
    said = f"{path}:1: file: larger than {importer.MAX_TEXT_BYTES} bytes once decompressed"
    assert str(caught.value) == said
    assert nothing_written()


@pytest.mark.django_db
def test_a_suite_file_past_the_size_cap_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(importer, "MAX_FILE_BYTES", 1000)
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps({"key": "a", "prompt": "x" * 2000}) + "\n")
    with pytest.raises(SuiteImportError, match=r"big.jsonl:1: file: larger than 1000 bytes"):
        import_file(path)
    assert nothing_written()


@pytest.mark.django_db
def test_deeply_nested_json_is_a_line_problem(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text(
        json.dumps({"key": "a", "prompt": "hi"}) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n"
    )
    with pytest.raises(SuiteImportError, match=r"deep.jsonl:2: line: nested too deeply"):
        import_file(path)
    assert nothing_written()
