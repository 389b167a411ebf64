"""``apply_config``: endpoints, suites, pairs, schedules, channels and alert rules from YAML.

Config-as-code for teams that keep it in git. All or nothing: the whole file is validated and
applied in one transaction, and any mistake is reported as ``file:line: path.field: problem``
with nothing written. Applying the same file twice changes nothing (rows are keyed by name).
Every row it adds or changes is written to the audit log (``monitor.setup.audit``) with the
source file and the fields that changed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from django.core.exceptions import ValidationError
from django.db import transaction
from django_celery_beat.models import PeriodicTask

from evals.benchmarks.importer import case_key_problem
from evals.claims import problems as claim_problems
from evals.constraints import validate_all
from evals.presets import PRESETS, unknown_preset
from evals.records import CaseSpec, SuiteSpec
from evals.suites import BUILTIN_SUITES
from monitor.models import AlertRule, Case, Channel, Endpoint, Pair, Suite, TripwireState
from monitor.setup import audit
from monitor.setup.schedules import ensure_probe_schedule
from monitor.setup.suite_import import BENCHMARK_SUITES, sync_named_suite
from monitor.setup.suites import save_suite

SECTIONS = ("endpoints", "suites", "pairs", "channels", "alert_rules")
FIELDS = {
    "endpoints": {
        "name",
        "protocol",
        "base_url",
        "model",
        "api_key_env",
        "max_concurrency",
        "timeout_s",
        "context_window",
        "extra_body",
        "extra_headers",
        "max_tokens_field",
        "send_temperature",
        "reasoning_effort",
        "thinking_budget",
        "local",
        "expected_tier",
        "served_tier_fields",
        "notes",
        "price_input_per_mtok",
        "price_output_per_mtok",
        "price_cached_input_per_mtok",
        "preset",
    },
    "suites": {"name", "builtin", "version", "description", "cases"},
    "pairs": {
        "name",
        "fast",
        "base",
        "suite",
        "claim",
        "claimed_speedup",
        "include_downgraded",
        "repeat",
        "cases_per_run",
        "slo_ttft_ms",
        "slo_e2e_ms",
        "active",
        "daily_budget_usd",
        "schedule",
    },
    "channels": {"name", "kind", "target", "secret_env"},
    "alert_rules": {
        "name",
        "pair",
        "metric",
        "tier",
        "op",
        "threshold",
        "last_k",
        "min_n",
        "channels",
        "enabled",
    },
}
CASE_FIELDS = {
    "key",
    "messages",
    "category",
    "scenario",
    "max_tokens",
    "difficulty",
    "unit_tests",
    "entry_point",
    "constraints",
}
DURATION = re.compile(r"^(\d+)\s*([smhd])$")
MIN_INTERVAL_S = 60  # a schedule more often than this measures the vendor's rate limit


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


RANGES: dict[str, dict[str, tuple[Any, str]]] = {
    "endpoints": {
        "timeout_s": (lambda v: _number(v) and 0 < v <= 3600, "must be > 0 and ≤ 3600 seconds"),
        "max_concurrency": (lambda v: _number(v) and 1 <= v <= 256, "must be 1 to 256"),
        "context_window": (lambda v: _number(v) and v >= 1, "must be ≥ 1"),
        **{
            f"price_{p}_per_mtok": (
                lambda v: _number(v) and v >= 0,
                "must be ≥ 0 (USD per million tokens)",
            )
            for p in ("input", "output", "cached_input")
        },
    },
    "pairs": {
        "repeat": (lambda v: _number(v) and 1 <= v <= 100, "must be 1 to 100"),
        "cases_per_run": (lambda v: _number(v) and v >= 1, "must be ≥ 1 (omit it for all)"),
        "daily_budget_usd": (lambda v: _number(v) and v >= 0, "must be ≥ 0 (USD per day)"),
    },
}
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class ConfigError(ValueError):
    """Every problem found, one per line, each with file, line and field."""


@dataclass
class Located:
    """A YAML value with the line it came from, so errors can point at it."""

    value: Any
    line: int


MAX_FILE_BYTES = 1 << 20  # a config file is a few KiB; more is a mistake or an attack
MAX_STRING_CHARS = 65_536  # per value (a case's unit tests are the longest, a few KiB)
MAX_DEPTH = 24  # the deepest real config (a case's constraints) is under 10 levels
MAX_INT = 2**53  # any count or id here is far smaller; past it a float loses integers and
# PostgreSQL's bigint overflows (a 5,000-digit integer is past Python's own str limit)
_CORE = "tag:yaml.org,2002:"
CORE_TAGS = frozenset(
    _CORE + t for t in ("str", "int", "float", "bool", "null", "seq", "map", "timestamp")
)


class _Refused(Exception):
    def __init__(self, line: int, path: str, problem: str) -> None:
        super().__init__(problem)
        self.line, self.path, self.problem = line, path, problem


class _StrictLoader(yaml.SafeLoader):
    """YAML without its dangerous corners: no anchors or aliases (a 363-byte "billion laughs"
    file expands to gigabytes once its aliases are followed), and no tag beyond YAML's core
    schema (``!!python/object/apply`` and friends were silently ignored before). Both are
    refused while composing, with line and path, before anything is built."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.path: list[str] = []  # of the node being composed: "pairs", "[0]", ".name"

    def compose_node(self, parent: Any, index: Any) -> Any:
        if isinstance(index, yaml.ScalarNode):  # a mapping's value (PyYAML passes its key)
            self.path.append(f".{index.value}")
        elif isinstance(index, int) and not isinstance(index, bool):  # a sequence's item
            self.path.append(f"[{index}]")
        else:
            self.path.append("")  # the root, or a mapping's key
        try:
            event = self.peek_event()
            if len(self.path) > MAX_DEPTH:  # PyYAML composes recursively: a RecursionError
                self.refuse(event, f"nested deeper than {MAX_DEPTH} levels")
            if isinstance(event, yaml.AliasEvent):
                self.refuse(event, f"aliases (*{event.anchor}) are not allowed")
            if getattr(event, "anchor", None):
                self.refuse(event, f"anchors (&{event.anchor}) are not allowed")
            tag = getattr(event, "tag", None)
            if tag and tag != "!" and tag not in CORE_TAGS:
                self.refuse(
                    event,
                    f"the tag {tag.replace(_CORE, '!!')!r} is not allowed (only "
                    "strings, numbers, booleans, null, lists and mappings)",
                )
            return super().compose_node(parent, index)
        finally:
            self.path.pop()

    def refuse(self, event: Any, problem: str) -> None:
        where = "".join(self.path).lstrip(".") or "(top)"
        raise _Refused(event.start_mark.line + 1, where, problem)


def _compose(text: str, source: str) -> yaml.Node | None:
    loader = _StrictLoader(text)
    try:
        return loader.get_single_node()
    except _Refused as exc:
        raise ConfigError(f"{source}:{exc.line}: {exc.path}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 0
        raise ConfigError(
            f"{source}:{line}: not valid YAML: {getattr(exc, 'problem', exc)}"
        ) from None
    finally:
        loader.dispose()


def _locate(node: yaml.Node, source: str, path: str, errors: list[str]) -> Any:
    """The node as plain values, each wrapped with its line; duplicate keys, non-scalar keys
    and over-long strings are added to ``errors`` as ``file:line: path: problem``."""
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Located] = {}
        for k, v in node.value:
            kline = k.start_mark.line + 1
            if not isinstance(k, yaml.ScalarNode):
                errors.append(f"{source}:{kline}: {path or '(top)'}: a key must be a plain string")
                continue
            key = str(k.value)
            kpath = f"{path}.{key}" if path else key
            if key in out:
                errors.append(
                    f"{source}:{kline}: {kpath}: duplicate key (first on line {out[key].line})"
                )
                continue
            out[key] = _locate(v, source, kpath, errors)
        return Located(out, line)
    if isinstance(node, yaml.SequenceNode):
        return Located(
            [_locate(v, source, f"{path}[{i}]", errors) for i, v in enumerate(node.value)], line
        )
    if len(node.value) > MAX_STRING_CHARS:
        errors.append(f"{source}:{line}: {path}: longer than {MAX_STRING_CHARS} characters")
        return Located("", line)
    try:
        value = yaml.constructor.SafeConstructor().construct_object(node)
    except (ValueError, yaml.YAMLError) as exc:  # a 5,000-digit integer, a bad timestamp
        errors.append(f"{source}:{line}: {path}: not a value: {str(exc)[:120]}")
        return Located(None, line)
    if problem := _scalar_problem(value):
        errors.append(f"{source}:{line}: {path}: {problem}")
        return Located(None, line)
    return Located(value, line)


def _scalar_problem(value: Any) -> str | None:
    """Why a scalar cannot be stored as given: ``.inf``/``.nan`` pass every ``<``/``>`` range
    check and then fail in JSON; integers past 2**53; NUL, which PostgreSQL refuses in text."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number (got {value!r})"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        return f"an integer out of range (more than {len(str(MAX_INT))} digits)"
    if isinstance(value, str) and "\x00" in value:
        return "contains a NUL character"
    return None


def _plain(item: Any) -> Any:
    if isinstance(item, Located):
        item = item.value
    if isinstance(item, dict):
        return {k: _plain(v) for k, v in item.items()}
    if isinstance(item, list):
        return [_plain(v) for v in item]
    return item


def parse_duration(text: Any) -> int:
    match = DURATION.match(str(text).strip())
    if not match:
        raise ValueError(f"{text!r} is not a duration like 30s, 15m, 6h or 1d")
    return int(match.group(1)) * UNITS[match.group(2)]


class _Applier:
    def __init__(self, source: str) -> None:
        self.source = source
        self.errors: list[str] = []
        self.touched: list[tuple[Any, dict[str, Any]]] = []  # (row, snapshot before)

    def before(self, obj: Any) -> None:
        """Remember the stored row's snapshot, for the audit log once everything is applied."""
        stored = type(obj).objects.filter(pk=obj.pk).first() if obj.pk else None
        self.touched.append((obj, audit.snapshot(stored)))

    def audit(self) -> None:
        for obj, before in self.touched:
            audit.record(
                obj=obj,
                before=before,
                after=audit.snapshot(obj),
                source=f"apply_config {self.source}",
            )

    def planned(self) -> list[str]:
        """What applying changes, row by row, as the audit log would record it."""
        lines = []
        for obj, before in self.touched:
            after = audit.snapshot(obj)
            what = f"{obj._meta.verbose_name} {getattr(obj, 'name', obj)}"
            if not before:
                lines.append(f"add {what}")
                continue
            changes = audit.diff(before, after)
            if changes:
                said = ", ".join(f"{k} {old!r} → {new!r}" for k, (old, new) in changes.items())
                lines.append(f"change {what}: {said}")
        return lines

    def error(self, line: int, path: str, message: str) -> None:
        self.errors.append(f"{self.source}:{line}: {path}: {message}")

    def items(self, root: dict[str, Located], section: str) -> list[tuple[str, Located]]:
        if section not in root:
            return []
        seq = root[section]
        if not isinstance(seq.value, list):
            self.error(seq.line, section, "must be a list")
            return []
        out = []
        seen: dict[str, int] = {}  # name -> line: a second one is refused, never "last wins"
        for i, item in enumerate(seq.value):
            path = f"{section}[{i}]"
            if not isinstance(item.value, dict):
                self.error(item.line, path, "must be a mapping")
                continue
            if "api_key" in item.value:
                self.error(
                    item.value["api_key"].line,
                    f"{path}.api_key",
                    "keys are never stored: set api_key_env to the variable's NAME",
                )
                continue
            unknown = set(item.value) - FIELDS[section]
            for key in sorted(unknown):
                self.error(
                    item.value[key].line,
                    f"{path}.{key}",
                    f"unknown field (allowed: {', '.join(sorted(FIELDS[section]))})",
                )
            if "name" not in item.value:
                self.error(item.line, f"{path}.name", "required")
                continue
            name = item.value["name"]
            if not isinstance(name.value, str) or not name.value:
                self.error(name.line, f"{path}.name", "must be a non-empty string")
                continue
            if name.value in seen:
                self.error(
                    name.line,
                    f"{path}.name",
                    f"duplicate name {name.value!r} (first on line {seen[name.value]})",
                )
                continue
            seen[name.value] = name.line
            if not unknown and self.in_range(section, path, item):
                out.append((path, item))
        return out

    def in_range(self, section: str, path: str, item: Located) -> bool:
        """The checks a model field cannot make or makes too late (``RANGES``)."""
        ok = True
        for field, (check, problem) in RANGES.get(section, {}).items():
            node = item.value.get(field)
            if node is not None and node.value is not None and not check(node.value):
                self.error(node.line, f"{path}.{field}", f"{problem} (got {node.value!r})"[:300])
                ok = False
        return ok

    def save(self, obj: Any, item: Located, path: str, exclude: tuple[str, ...] = ()) -> bool:
        try:
            obj.full_clean(exclude=list(exclude), validate_unique=False)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                located = item.value.get(field, item)
                self.error(located.line, f"{path}.{field}", "; ".join(messages))
            return False
        self.before(obj)
        obj.save()
        return True

    def lookup(self, model: Any, name: Located, path: str, what: str) -> Any:
        obj = model.objects.filter(name=name.value).first()
        if obj is None:
            self.error(name.line, path, f"no {what} named {name.value!r}")
        return obj


def apply_config_text(text: str, *, source: str = "<config>") -> dict[str, int]:
    """Validate and apply; raises ConfigError listing every problem, with nothing applied."""
    return _apply_text(text, source=source, check=False)[0]


def check_config_text(text: str, *, source: str = "<config>") -> list[str]:
    """The dry run (``apply_config --check``): validate and apply inside a transaction that is
    rolled back, and say what would change, one line per row ("added pair demo", "changed
    endpoint x: base_url 'a' → 'b'"); nothing is stored. Raises ConfigError like applying."""
    return _apply_text(text, source=source, check=True)[1]


def _apply_text(text: str, *, source: str, check: bool) -> tuple[dict[str, int], list[str]]:
    if len(text) > MAX_FILE_BYTES or len(text.encode("utf-8", "replace")) > MAX_FILE_BYTES:
        raise ConfigError(f"{source}:1: (file): larger than {MAX_FILE_BYTES} bytes")
    node = _compose(text, source)
    if node is None:
        raise ConfigError(f"{source}:1: the file is empty")
    problems: list[str] = []
    root = _locate(node, source, "", problems)
    if problems:
        raise ConfigError("\n".join(problems))
    if not isinstance(root.value, dict):
        raise ConfigError(f"{source}:{root.line}: the top level must be a mapping of {SECTIONS}")
    applier = _Applier(source)
    for key in sorted(set(root.value) - set(SECTIONS)):
        applier.error(
            root.value[key].line, key, f"unknown section (allowed: {', '.join(SECTIONS)})"
        )
    counts = {s: 0 for s in SECTIONS}
    with transaction.atomic():  # raising inside rolls back everything already written
        _apply_all(applier, root.value, counts)
        if applier.errors:
            raise ConfigError("\n".join(applier.errors))
        if check:
            planned = applier.planned()
            transaction.set_rollback(True)  # a dry run: every write above is undone
            return counts, planned
        applier.audit()
    return counts, []


def _apply_named(a: _Applier, model: Any, path: str, item: Located) -> bool:
    """Create or update the row of ``model`` with this name from the item's plain fields."""
    data = _plain(item)
    obj = model.objects.filter(name=data["name"]).first() or model(name=data["name"])
    for field, value in data.items():
        setattr(obj, field, value)
    return a.save(obj, item, path)


def _apply_endpoint(a: _Applier, path: str, item: Located) -> bool:
    """An endpoint; with ``preset:`` the preset fills what the file leaves out, the file's
    fields winning and its ``extra_body``/``extra_headers`` merged over the preset's."""
    data = _plain(item)
    name = data.get("preset")
    if name is not None and (not isinstance(name, str) or name not in PRESETS):
        a.error(item.value["preset"].line, f"{path}.preset", unknown_preset(str(name)))
        return False
    obj = Endpoint.objects.filter(name=data["name"]).first() or Endpoint(name=data["name"])
    for field, value in data.items():
        setattr(obj, field, value)
    obj.apply_preset(data)
    return a.save(obj, item, path)


def _apply_all(a: _Applier, root: dict[str, Located], counts: dict[str, int]) -> None:
    for path, item in a.items(root, "endpoints"):
        counts["endpoints"] += _apply_endpoint(a, path, item)
    for path, item in a.items(root, "suites"):
        counts["suites"] += _apply_suite(a, path, item)
    for path, item in a.items(root, "pairs"):
        counts["pairs"] += _apply_pair(a, path, item)
    for path, item in a.items(root, "channels"):
        counts["channels"] += _apply_named(a, Channel, path, item)
    for path, item in a.items(root, "alert_rules"):
        counts["alert_rules"] += _apply_rule(a, path, item)


def _apply_suite(a: _Applier, path: str, item: Located) -> bool:
    data = item.value
    if "builtin" in data:
        name = data["builtin"].value
        if name not in BUILTIN_SUITES and name not in BENCHMARK_SUITES:
            known = sorted({*BUILTIN_SUITES, *BENCHMARK_SUITES})
            a.error(
                data["builtin"].line,
                f"{path}.builtin",
                f"no built-in suite {name!r} (have: {', '.join(known)})",
            )
            return False
        sync_named_suite(name=name)
        return True

    cases_node = data.get("cases")
    if cases_node is None or not isinstance(cases_node.value, list) or not cases_node.value:
        a.error(
            item.line, f"{path}.cases", "a suite needs `builtin: NAME` or a non-empty list of cases"
        )
        return False
    specs = []
    keys: dict[str, int] = {}
    for j, case in enumerate(cases_node.value):
        cpath = f"{path}.cases[{j}]"
        if not isinstance(case.value, dict):
            a.error(case.line, cpath, "must be a mapping")
            continue
        key = case.value.get("key")
        if key is not None and str(key.value) in keys:
            a.error(
                key.line,
                f"{cpath}.key",
                f"duplicate case key {key.value!r} (first on line {keys[str(key.value)]})",
            )
            continue
        if key is not None:
            keys[str(key.value)] = key.line
            if problem := case_key_problem(key.value):
                a.error(key.line, f"{cpath}.key", problem)
                continue
        too_long = _too_long_case_fields(case.value)
        for field, limit in too_long:
            a.error(case.value[field].line, f"{cpath}.{field}", f"longer than {limit} characters")
        if too_long:
            continue
        bad = set(case.value) - CASE_FIELDS
        for key in sorted(bad):
            a.error(
                case.value[key].line,
                f"{cpath}.{key}",
                f"unknown field (allowed: {', '.join(sorted(CASE_FIELDS))})",
            )
        for required in ("key", "messages"):
            if required not in case.value:
                a.error(case.line, f"{cpath}.{required}", "required")
                bad.add(required)
        messages = _plain(case.value.get("messages"))
        if messages is not None and not (
            isinstance(messages, list)
            and messages
            and all(isinstance(m, dict) and {"role", "content"} <= set(m) for m in messages)
        ):
            a.error(
                case.value["messages"].line,
                f"{cpath}.messages",
                "must be a list of {role, content} mappings",
            )
            bad.add("messages")
        if "constraints" in case.value:
            constraints = _plain(case.value["constraints"])
            try:
                if not isinstance(constraints, list):
                    raise ValueError("constraints: must be a list of {kind, …} mappings")
                validate_all(constraints)  # a typo must fail here, not in the middle of a run
            except ValueError as exc:
                a.error(case.value["constraints"].line, cpath, str(exc))
                bad.add("constraints")
        if not bad:
            specs.append(CaseSpec(**_plain(case)))
    version = _plain(data.get("version", Located(1, 0)))
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= 2**31 - 1:
        a.error(
            data["version"].line, f"{path}.version", f"must be an integer ≥ 1 (got {version!r})"
        )
        return False
    if len(specs) != len(cases_node.value):
        return False
    save_suite(
        spec=SuiteSpec(
            name=data["name"].value,
            version=version,
            description=_plain(data.get("description", Located("", 0))),
            cases=specs,
        )
    )
    return True


def _too_long_case_fields(case: dict[str, Located]) -> list[tuple[str, int]]:
    """Text fields past their column's length: SQLite stores them, PostgreSQL refuses."""
    out = []
    for field in ("category", "scenario", "difficulty", "entry_point"):
        node = case.get(field)
        limit = Case._meta.get_field(field).max_length
        if node is not None and isinstance(node.value, str) and len(node.value) > limit:
            out.append((field, limit))
    return out


def _suite_named(a: _Applier, node: Located, path: str) -> Suite | None:
    name, _, version = str(node.value).partition("@")
    qs = Suite.objects.filter(name=name)
    if version:
        qs = qs.filter(version=int(version))
    suite = qs.order_by("-version").first()
    if suite is None and (name in BUILTIN_SUITES or name in BENCHMARK_SUITES) and not version:
        suite = sync_named_suite(name=name)
    if suite is None:
        a.error(
            node.line,
            path,
            f"no suite named {node.value!r} (define it under suites: or use a built-in)",
        )
    return suite


def _apply_pair(a: _Applier, path: str, item: Located) -> bool:
    data = item.value
    refs = {}
    for field, model in (("fast", Endpoint), ("base", Endpoint)):
        if field not in data:
            a.error(item.line, f"{path}.{field}", "required (an endpoint name)")
            return False
        refs[field] = a.lookup(model, data[field], f"{path}.{field}", "endpoint")
    if "suite" not in data:
        a.error(item.line, f"{path}.suite", "required (a suite name)")
        return False
    refs["suite"] = _suite_named(a, data["suite"], f"{path}.suite")
    if None in refs.values():
        return False
    plain = _plain(item)
    schedule = plain.pop("schedule", None)
    claim = _claim_fields(a, data, path)
    if claim is None:
        return False
    plain.pop("claim", None)
    plain.pop("claimed_speedup", None)
    plain.update(claim)
    obj = Pair.objects.filter(name=plain["name"]).first() or Pair(name=plain["name"])
    for field, value in {**plain, **refs}.items():
        setattr(obj, field, value)
    if not a.save(obj, item, path):
        return False
    if schedule is not None:
        spath = f"{path}.schedule"
        sline = data["schedule"].line
        if not isinstance(schedule, dict) or not set(schedule) <= {
            "every",
            "audit_every",
            "tripwire_every",
            "border_discovery",
        }:
            a.error(
                sline,
                spath,
                "must be a mapping with `every` and optionally `audit_every`, `tripwire_every`, "
                "`border_discovery`",
            )
            return False
        for key, kind in (
            ("every", "probe"),
            ("audit_every", "audit"),
            ("tripwire_every", "tripwire"),
        ):
            if key in schedule:
                try:
                    seconds = parse_duration(schedule[key])
                    if seconds < MIN_INTERVAL_S:
                        raise ValueError(f"{schedule[key]!r} is shorter than {MIN_INTERVAL_S}s")
                except ValueError as exc:
                    a.error(data["schedule"].value[key].line, f"{spath}.{key}", str(exc))
                    return False
                before = PeriodicTask.objects.filter(name=f"{kind}:{obj.name}").first()
                row = ensure_probe_schedule(pair_name=obj.name, every_s=seconds, kind=kind)
                a.touched.append((row, audit.snapshot(before)))
        if "border_discovery" in schedule and not _border_discovery(a, obj, data, spath):
            return False
    return True


def _border_discovery(a: _Applier, pair: Pair, data: Any, spath: str) -> bool:
    """``border_discovery: true`` accepts the stated cost of the pair's border-input discovery
    (``monitor.runs.border``) for its tiers without logprobs, as the pair page's button does."""
    value = data["schedule"].value["border_discovery"]
    if not isinstance(value.value, bool):
        a.error(
            value.line, f"{spath}.border_discovery", f"must be true or false, got {value.value!r}"
        )
        return False
    TripwireState.objects.update_or_create(pair=pair, defaults={"border_allowed": value.value})
    return True


CLAIM_KEYS = ("metric", "form", "value", "percentile")


def _claim_fields(a: _Applier, data: dict[str, Located], path: str) -> dict[str, Any] | None:
    """The pair's claim columns from ``claim: {metric, form, value, percentile}`` (the
    vendor's own metric and form, ``evals.claims``), or from the deprecated shorthand
    ``claimed_speedup: N`` (an E2E factor); {} when neither is given (the claim is kept as
    it was). None after an error, each at its own line."""
    if "claim" in data and "claimed_speedup" in data:
        a.error(
            data["claimed_speedup"].line,
            f"{path}.claimed_speedup",
            "give either claim or the older claimed_speedup, not both",
        )
        return None
    if "claimed_speedup" in data:
        value = data["claimed_speedup"].value
        fields = {"metric": "e2e", "form": "factor", "value": value, "percentile": None}
        if value is None:  # `claimed_speedup:` with no value: no claim
            return {"claim_value": None, "claim_percentile": None}
    elif "claim" in data:
        node = data["claim"]
        if node.value is None:  # `claim:` with no value: no claim
            return {"claim_value": None, "claim_percentile": None}
        if not isinstance(node.value, dict):
            a.error(
                node.line, f"{path}.claim", "must be a mapping {metric, form, value, percentile}"
            )
            return None
        unknown = sorted(set(node.value) - set(CLAIM_KEYS))
        for key in unknown:
            a.error(
                node.value[key].line,
                f"{path}.claim.{key}",
                f"unknown field (allowed: {', '.join(CLAIM_KEYS)})",
            )
        if unknown:
            return None
        fields = {
            "metric": "e2e",
            "form": "factor",
            **_plain(node),
        }
        fields.setdefault("value", None)
        fields.setdefault("percentile", None)
    else:
        return {}
    found = claim_problems(*(fields[k] for k in CLAIM_KEYS), where="claim")
    for line in found:
        where, _, problem = line.partition(": ")
        key = where.split(".")[-1]
        given = data.get("claim", data.get("claimed_speedup"))
        assert given is not None  # a problem is found only in a claim the file gave
        at = given.value.get(key, given) if isinstance(given.value, dict) else given
        shown = "claimed_speedup" if "claimed_speedup" in data else where
        a.error(at.line, f"{path}.{shown}", problem)
    if found:
        return None
    return {f"claim_{k}": fields[k] for k in CLAIM_KEYS}


def _apply_rule(a: _Applier, path: str, item: Located) -> bool:
    data = item.value
    plain = _plain(item)
    channel_names = plain.pop("channels", []) or []
    pair = None
    if plain.get("pair"):
        pair = a.lookup(Pair, data["pair"], f"{path}.pair", "pair")
        if pair is None:
            return False
    plain["pair"] = pair
    channels = []
    for k, cname in enumerate(channel_names):
        channel = Channel.objects.filter(name=cname).first()
        if channel is None:
            a.error(
                data["channels"].value[k].line,
                f"{path}.channels[{k}]",
                f"no channel named {cname!r}",
            )
            return False
        channels.append(channel)
    obj = AlertRule.objects.filter(name=plain["name"]).first() or AlertRule(name=plain["name"])
    for field, value in plain.items():
        setattr(obj, field, value)
    if not a.save(obj, item, path):  # AlertRule.clean checks the metric and its tier
        return False
    obj.channels.set(channels)
    return True


def apply_config_file(path: str | Path) -> dict[str, int]:
    return apply_config_text(_read_config(path), source=str(path))


def _read_config(path: str | Path) -> str:
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)  # never more than the cap into memory
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"{path}:1: (file): larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}:{line}: (file): not UTF-8 (byte 0x{data[exc.start]:02x}); save the file "
            "as UTF-8"
        ) from None
    return text


def check_config_file(path: str | Path) -> list[str]:
    """``check_config_text`` of a file: what applying it would change, nothing stored."""
    return check_config_text(_read_config(path), source=str(path))
