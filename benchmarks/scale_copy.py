"""``scale_data --copy``: the same pair-days as ``scale_data``, bulk-loaded with PostgreSQL COPY,
so 10 M samples (50 pairs × 365 days) load in minutes instead of the ~4 h the models take here.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/tw_scale10m \\
        python -m benchmarks.scale_data --copy --pairs 50 --days 365

The shortcut, stated plainly: ``--templates`` template days (16 by default) are drawn with
``scale_data``'s own plan and sample functions and finished with the product's functions
(``summarise_samples``, ``monitor.derived.rollups.tier_rollups``); every generated run then copies
one
template run of the same hour slot (its samples' values, summary and rollups, so the three agree),
with its own ids, times, pair, endpoints, model ids and fingerprints. Samples older than
``TIERWATCH_RETENTION_DAYS`` are written in the shape ``monitor.derived.retention`` leaves them
(payload columns emptied, ``pruned_at`` set); the newer ones have full payloads. Provenance
events are the sums ``record_run`` would have made (first/last seen to the run's first and last
sample). Secondary indexes are dropped during the load and rebuilt after it; foreign-key
triggers are off for the loading session (``session_replication_role = replica``).
"""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Model

from benchmarks import scale_data as gen
from monitor.derived.retention import EMPTY
from monitor.derived.rollups import slo_of, tier_rollups
from monitor.judging.verdict import compute_verdict
from monitor.models import Endpoint, Pair, ProvenanceEvent, Run, RunRollup, Sample

SAMPLE_VARS = (
    "id",
    "run_id",
    "endpoint_id",
    "started_at",
    "model_id",
    "system_fingerprint",
    "pruned_at",
)
RUN_VARS = ("id", "pair_id", "created_at", "started_at", "finished_at")
ROLLUP_VARS = ("id", "run_id", "pair_id", "endpoint_id", "at")
TABLES = (Run, Sample, RunRollup)


def cell(value) -> str:
    """One value in COPY's text format."""
    if value is None:
        return r"\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict | list):
        value = json.dumps(value)
    return (
        str(value)
        .replace("\\", "\\\\")
        .replace("\t", "\\t")
        .replace("\n", "\\n")
        .replace("\r", "\\r")
    )


def attnames(model: type[Model], skip: tuple[str, ...] = ()) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields if f.attname not in skip]


def cells(obj: Model, names: list[str]) -> str:
    return "\t".join(cell(getattr(obj, n)) for n in names)


def copy_sql(model: type[Model], names: list[str]) -> str:
    column = {f.attname: f.column for f in model._meta.concrete_fields}
    columns = [column[n] for n in names]
    return f"COPY {model._meta.db_table} ({', '.join(columns)}) FROM STDIN"


class Template:
    """One finished template run, pre-rendered as COPY text around the columns that vary."""

    PAYLOAD = list(EMPTY)
    SAMPLE_REST = attnames(Sample, SAMPLE_VARS + tuple(EMPTY))
    RUN_REST = attnames(Run, RUN_VARS)
    ROLLUP_REST = attnames(RunRollup, ROLLUP_VARS)

    def __init__(self, run: Run, at: datetime, rows: list[Sample], slo: dict) -> None:
        self.offset = at - at.replace(hour=0, minute=0, second=0, microsecond=0)
        self.duration = run.finished_at - at
        self.run_rest = cells(run, self.RUN_REST)
        self.samples = []  # (offset, tier, has model id, full payload + rest, emptied + rest)
        for s in rows:
            rest = cells(s, self.SAMPLE_REST)
            full = cells(s, self.PAYLOAD)
            for name, value in EMPTY.items():
                setattr(s, name, value)
            self.samples.append(
                (
                    s.started_at - at,
                    s.tier,
                    bool(s.model_id),
                    f"{full}\t{rest}",
                    f"{cells(s, self.PAYLOAD)}\t{rest}",
                )
            )
        self.rollups = []
        for tier, values in sorted(tier_rollups(rows, slo).items()):
            values.pop("endpoint_id")
            rollup = RunRollup(tier=tier, kind=run.kind, trigger=run.trigger, **values)
            self.rollups.append((tier, cells(rollup, self.ROLLUP_REST)))
        self.model_counts = {
            t: sum(1 for s in self.samples if s[1] == t and s[2]) for t in ("fast", "base")
        }


def templates(rng: random.Random, n: int, pair: Pair, cases: tuple) -> list[list[Template]]:
    """``n`` template days for the template pair: [day][slot] (24 probes + 4 audits a day)."""
    fake = {
        "fast": Endpoint(pk=998, model="TEMPLATE-F"),
        "base": Endpoint(pk=999, model="TEMPLATE-B"),
    }
    slo = slo_of(pair.slo_ttft_ms, pair.slo_e2e_ms)
    day0 = datetime(2026, 11, 1, tzinfo=gen.UTC)
    out = []
    for _ in range(n):
        day = []
        for run, at, items in gen.plan_day(rng, pair, day0, *cases):
            rows = gen.draw_samples(rng, run, at, items, fake)
            gen.finish_run(run, at, items, rows)
            day.append(Template(run, at, rows, slo))
        out.append(day)
    return out


def provenance_names(endpoint: Endpoint, at: datetime) -> tuple[str, str]:
    """The model id and fingerprint ``scale_data.sample_row`` gives this endpoint that month."""
    return (
        endpoint.model + ("-2026-06" if at.month > 6 else ""),
        f"fp_{endpoint.pk:03d}{at.month:02d}",
    )


class Loader:
    def __init__(self, cursor, ids: dict[str, int], cutoff: datetime) -> None:
        self.cur, self.ids, self.cutoff = cursor, ids, cutoff
        self.seen: dict[tuple[int, str, str], list] = {}  # provenance: first, last, count, run

    def next_id(self, table: str) -> int:
        self.ids[table] += 1
        return self.ids[table]

    def day(
        self, rng: random.Random, pairs: list[Pair], day0: datetime, tmpl: list[list[Template]]
    ) -> int:
        runs, samples, rollups = [], [], []
        for pair in pairs:
            endpoints = {"fast": pair.fast, "base": pair.base}
            names = {t: provenance_names(e, day0) for t, e in endpoints.items()}
            fixes = [(f"TEMPLATE-{t[0].upper()}-2026-06", names[t][0]) for t in names] + [
                (f"fp_{998 + (t == 'base')}11", names[t][1]) for t in names
            ]
            for slot in range(len(tmpl[0])):
                t = tmpl[rng.randrange(len(tmpl))][slot]
                run_id, at = self.next_id("run"), day0 + t.offset
                rest = t.run_rest
                for old, new in fixes:
                    rest = rest.replace(old, new)
                runs.append(
                    f"{run_id}\t{pair.id}\t{at.isoformat()}\t{at.isoformat()}\t"
                    f"{(at + t.duration).isoformat()}\t{rest}\n"
                )
                pruned = (
                    (at + timedelta(days=30, hours=1)).isoformat() if at < self.cutoff else None
                )
                for offset, tier, has_model, full, emptied in t.samples:
                    ep = endpoints[tier]
                    model, fp = names[tier] if has_model else ("", "")
                    samples.append(
                        f"{self.next_id('sample')}\t{run_id}\t{ep.id}\t"
                        f"{(at + offset).isoformat()}\t{model}\t{fp}\t"
                        f"{pruned or chr(92) + 'N'}\t{emptied if pruned else full}\n"
                    )
                for tier, rest in t.rollups:
                    rollups.append(
                        f"{self.next_id('rollup')}\t{run_id}\t{pair.id}\t"
                        f"{endpoints[tier].id}\t{at.isoformat()}\t{rest}\n"
                    )
                last = at + t.samples[-1][0]
                for tier, n in t.model_counts.items():
                    for kind, value in zip(("model_id", "fingerprint"), names[tier], strict=True):
                        seen = self.seen.setdefault(
                            (endpoints[tier].id, kind, value), [at, last, 0, run_id]
                        )
                        seen[1], seen[2] = last, seen[2] + n
        self.write(Run, RUN_VARS, Template.RUN_REST, runs)
        self.write(Sample, SAMPLE_VARS, Template.PAYLOAD + Template.SAMPLE_REST, samples)
        self.write(RunRollup, ROLLUP_VARS, Template.ROLLUP_REST, rollups)
        return len(samples)

    def write(self, model: type[Model], first: tuple, rest: list[str], lines: list[str]) -> None:
        with self.cur.copy(copy_sql(model, [*first, *rest])) as copy:
            copy.write("".join(lines))

    def provenance(self) -> None:
        ProvenanceEvent.objects.bulk_create(
            [
                ProvenanceEvent(
                    endpoint_id=ep,
                    kind=kind,
                    value=value,
                    first_seen=first,
                    last_seen=last,
                    count=n,
                    run_id=run,
                )
                for (ep, kind, value), (first, last, n, run) in self.seen.items()
            ]
        )


def secondary_indexes(cur) -> list[tuple[str, str]]:
    """Indexes of the loaded tables that back no constraint: (name, CREATE statement)."""
    cur.execute(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) "
        "FROM pg_index i "
        "WHERE i.indrelid = ANY(%s::regclass[]) AND NOT EXISTS "
        "(SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)",
        [[m._meta.db_table for m in TABLES]],
    )
    return cur.fetchall()


def main(args, rng: random.Random, end: datetime) -> int:
    if connection.vendor != "postgresql":
        sys.exit("--copy needs PostgreSQL (DATABASE_URL=postgres://…)")
    gen.POOL = gen.Payloads(rng)  # run as __main__, scale_data's own POOL is another module's
    pairs, probe_cases, audit_cases = gen.setup_pairs(args.pairs)
    pairs = list(Pair.objects.filter(id__in=[p.id for p in pairs]).select_related("fast", "base"))
    t0 = time.monotonic()
    tmpl = templates(
        rng, args.templates, pairs[0], (probe_cases, audit_cases, audit_cases[0].suite)
    )
    print(f"{args.templates} template days in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    connection.ensure_connection()
    raw = connection.connection
    with raw.cursor() as cur:
        cur.execute("SELECT coalesce(max(id), 0) FROM monitor_run")
        ids = {"run": cur.fetchone()[0]}
        cur.execute("SELECT coalesce(max(id), 0) FROM monitor_sample")
        ids["sample"] = cur.fetchone()[0]
        cur.execute("SELECT coalesce(max(id), 0) FROM monitor_runrollup")
        ids["rollup"] = cur.fetchone()[0]
        indexes = secondary_indexes(cur)
        for name, _ in indexes:
            cur.execute(f"DROP INDEX {name}")
        cur.execute("SET session_replication_role = replica")
        cur.execute("SET maintenance_work_mem = '512MB'")
        cur.execute("SET synchronous_commit = off")
        cutoff = datetime.now(gen.UTC) - timedelta(days=settings.TIERWATCH_RETENTION_DAYS)
        loader, total = Loader(cur, ids, cutoff), 0
        for d in range(args.days, 0, -1):
            day0 = end - timedelta(days=d)
            total += loader.day(rng, pairs, day0, tmpl)
            if d % 10 == 0 or d == 1:
                print(
                    f"{day0.date()}: {total:,} samples, {total / (time.monotonic() - t0):,.0f}/s",
                    file=sys.stderr,
                    flush=True,
                )
        cur.execute("RESET session_replication_role")
        cur.execute("RESET synchronous_commit")
        t1 = time.monotonic()
        for _, create in indexes:
            cur.execute(create)
        print(f"{len(indexes)} indexes rebuilt in {time.monotonic() - t1:.0f} s", file=sys.stderr)
        for table, key in (
            ("monitor_run", "run"),
            ("monitor_sample", "sample"),
            ("monitor_runrollup", "rollup"),
        ):
            cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), {ids[key]})")
        cur.execute("RESET maintenance_work_mem")
    loader.provenance()
    for pair in pairs:  # a real verdict on the newest audit, as the worker would have stored
        latest = Run.objects.filter(pair=pair, kind="audit").order_by("-created_at").first()
        compute_verdict(run_id=latest.id)
    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE")
    print(f"wrote {total:,} samples in {time.monotonic() - t0:.0f} s")
    return 0
