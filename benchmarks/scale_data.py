"""Write N pairs × D days of hourly probes plus 6-hourly audits into the configured database,
through the product's models and its own summary function, for the scale benchmarks.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scale_03m \\
        python -m benchmarks.scale_data --pairs 50 --days 10

What one pair-day holds (576 samples, the mix of a team's default schedule):
- 24 probe runs (temperature 0): 3 cases of the ``scenarios`` suite × repeat 2 × 2 tiers;
- 4 audit runs (temperature 1): 8 prompts of the ``audit`` suite × 3 repetitions × 3 batches.
So 50 pairs × 365 days ≈ 10.5 M samples. Payload sizes follow what the simulated vendor returns:
text ~300 B, ~60 chunk gaps and tokens per chunk, ~330 B of response headers.

Each run is summarised with ``monitor.derived.summary.summarise_samples`` and finished with
``monitor.derived.rollups.record_run`` (rollups, provenance events), so
the data has the shape a worker would have written. The newest audit of each pair gets a real
verdict (``compute_verdict``) so the verdict page has something to show.

``--copy`` (PostgreSQL): the same pair-days bulk-loaded with COPY from template runs, ~10,000
samples/s here instead of ~700, with payloads emptied beyond the retention window as
``monitor.derived.retention`` leaves them (``benchmarks/scale_copy.py`` says what it shortcuts).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")
django.setup()

from django.db import transaction  # noqa: E402

from monitor.derived.rollups import record_run  # noqa: E402
from monitor.derived.summary import summarise_samples  # noqa: E402
from monitor.judging.verdict import compute_verdict  # noqa: E402
from monitor.models import Case, Endpoint, Pair, Run, Sample  # noqa: E402
from monitor.setup.suites import sync_builtin_suite  # noqa: E402

WORDS = (
    "the model returns a streamed answer with tokens and chunks that arrive over time "
    "while the client measures each gap between reads and counts the tokens "
).split()
PROBE_CASES, PROBE_REPEAT = 3, 2
AUDIT_PROMPTS, AUDIT_REPEAT, AUDIT_EVERY_H = 8, 3, 6
POOL: Payloads


def text(rng: random.Random, size: int = 300) -> str:
    out, length = [], 0
    while length < size:
        out.append(rng.choice(WORDS))
        length += len(out[-1]) + 1
    return " ".join(out)


class Payloads:
    """A pool of pre-drawn payloads (texts, gaps, tokens per chunk) picked at random: drawing
    ~60 log-normal floats per sample was most of the generator's time; sizes are unchanged."""

    def __init__(self, rng: random.Random, size: int = 512) -> None:
        self.texts = [text(rng) for _ in range(size)]
        self.gaps = {
            tier: [
                [round(rng.lognormvariate(mu, 0.4), 3) for _ in range(rng.randrange(40, 80))]
                for _ in range(size)
            ]
            for tier, mu in (("fast", 1.5), ("base", 3.0))
        }
        self.tokens = [[rng.choice((1, 1, 1, 2)) for _ in range(80)] for _ in range(size)]


def headers(rng: random.Random) -> dict[str, str]:
    return {
        "content-type": "text/event-stream; charset=utf-8",
        "date": "Mon, 30 Nov 2026 12:00:00 GMT",
        "x-request-id": f"req_{rng.getrandbits(96):024x}",
        "x-ratelimit-limit-requests": "10000",
        "x-ratelimit-remaining-requests": str(rng.randrange(10000)),
        "x-ratelimit-reset-requests": "6ms",
        "openai-processing-ms": str(rng.randrange(100, 3000)),
        "server": "uvicorn",
        "cache-control": "no-cache",
    }


def sample_row(
    rng: random.Random,
    *,
    run: Run,
    case: Case,
    endpoint: Endpoint,
    tier: str,
    batch: int,
    repetition: int,
    seq: int,
    at: datetime,
) -> Sample:
    fast = tier == "fast"
    if rng.random() < 0.01:
        cls = rng.choice(["rate_limited", "timeout", "http_5xx"])
        return Sample(
            run=run,
            case=case,
            endpoint=endpoint,
            tier=tier,
            batch=batch,
            repetition=repetition,
            seq=seq,
            started_at=at,
            ok=False,
            error_class=cls,
            error_message=f"{cls} from vendor",
            http_status=429 if cls == "rate_limited" else 503,
            retry_after_s=1.0 if cls == "rate_limited" else None,
        )
    ttft = rng.lognormvariate(5.0 if fast else 5.8, 0.35)
    gaps = rng.choice(POOL.gaps[tier])
    tokens = rng.choice(POOL.tokens)[: len(gaps)]
    e2e = ttft + sum(gaps)
    body = rng.choice(POOL.texts)
    return Sample(
        run=run,
        case=case,
        endpoint=endpoint,
        tier=tier,
        batch=batch,
        repetition=repetition,
        seq=seq,
        started_at=at,
        ok=True,
        http_status=200,
        connect_ms=rng.uniform(0.2, 2),
        headers_ms=ttft * 0.6,
        ttfb_ms=ttft * 0.9,
        ttft_ms=ttft,
        e2e_ms=e2e,
        tpot_ms=sum(gaps) / max(1, sum(tokens) - 1),
        chunk_gaps_ms=gaps,
        chunk_tokens=tokens,
        text=body,
        finish_reason="stop",
        prompt_tokens=rng.randrange(20, 400),
        completion_tokens=sum(tokens),
        estimated_tokens=sum(tokens) + rng.randrange(-2, 3),
        model_id=endpoint.model + ("-2026-06" if at.month > 6 else ""),
        system_fingerprint=f"fp_{endpoint.pk:03d}{at.month:02d}",
        headers=headers(rng),
    )


def setup_pairs(n: int) -> tuple[list[Pair], list[Case], list[Case]]:
    scenarios = sync_builtin_suite(name="scenarios")
    audit = sync_builtin_suite(name="audit")
    pairs = []
    for i in range(n):
        fast, _ = Endpoint.objects.get_or_create(
            name=f"vendor{i:02d}-fast",
            defaults={"base_url": "http://127.0.0.1:9/v1", "model": f"model-{i:02d}-turbo"},
        )
        base, _ = Endpoint.objects.get_or_create(
            name=f"vendor{i:02d}-base",
            defaults={"base_url": "http://127.0.0.1:9/v1", "model": f"model-{i:02d}"},
        )
        pair, _ = Pair.objects.get_or_create(
            name=f"pair{i:02d}",
            defaults={
                "fast": fast,
                "base": base,
                "suite": scenarios,
                "repeat": PROBE_REPEAT,
                "slo_ttft_ms": 400,
                "slo_e2e_ms": 3000,
            },
        )
        pairs.append(pair)
    probe_cases = list(scenarios.cases.exclude(scenario="xl_context").order_by("key"))
    audit_cases = list(audit.cases.order_by("key"))[:AUDIT_PROMPTS]
    return pairs, probe_cases, audit_cases


def plan_day(
    rng: random.Random,
    pair: Pair,
    day0: datetime,
    probe_cases: list[Case],
    audit_cases: list[Case],
    audit_suite,
) -> list[tuple[Run, datetime, list]]:
    """One pair-day's runs (unsaved), their start times and plans of (case, tier, batch, rep)."""
    plans: list[tuple[Run, datetime, list[tuple[Case, str, int, int]]]] = []
    for hour in range(24):
        at = day0 + timedelta(hours=hour, seconds=rng.randrange(60))
        cases = [
            probe_cases[(hour * PROBE_CASES + k) % len(probe_cases)] for k in range(PROBE_CASES)
        ]
        items = [(c, t, 0, r) for c in cases for r in range(PROBE_REPEAT) for t in ("fast", "base")]
        plans.append(
            (
                Run(
                    pair=pair,
                    suite=pair.suite,
                    kind="probe",
                    trigger="scheduled",
                    repeat=PROBE_REPEAT,
                    status="done",
                ),
                at,
                items,
            )
        )
        if hour % AUDIT_EVERY_H == 0:
            items = [
                (c, t, b, r)
                for c in audit_cases
                for r in range(AUDIT_REPEAT)
                for t, b in (("fast", 0), ("base", 0), ("base", 1))
            ]
            plans.append(
                (
                    Run(
                        pair=pair,
                        suite=audit_suite,
                        kind="audit",
                        trigger="scheduled",
                        repeat=AUDIT_REPEAT,
                        temperature=1.0,
                        status="done",
                    ),
                    at + timedelta(minutes=30),
                    items,
                )
            )
    return plans


def draw_samples(
    rng: random.Random, run: Run, at: datetime, items: list, endpoints: dict[str, Endpoint]
) -> list[Sample]:
    """The samples of one planned run, 400 ms apart in plan order."""
    return [
        sample_row(
            rng,
            run=run,
            case=case,
            endpoint=endpoints[tier],
            tier=tier,
            batch=batch,
            repetition=rep,
            seq=seq,
            at=at + timedelta(milliseconds=400 * seq),
        )
        for seq, (case, tier, batch, rep) in enumerate(items)
    ]


def finish_run(run: Run, at: datetime, items: list, rows: list[Sample]) -> None:
    """Times, counts and the product's own summary, as the worker leaves a finished run."""
    run.created_at, run.started_at = at, at
    run.finished_at = at + timedelta(milliseconds=400 * len(items) + 3000)
    run.planned = run.completed = len(items)
    run.summary = summarise_samples(rows)


def one_day(
    rng: random.Random,
    pair: Pair,
    day0: datetime,
    probe_cases: list[Case],
    audit_cases: list[Case],
    audit_suite,
) -> int:
    """Write one pair-day: runs, samples, summaries. Returns samples written."""
    endpoints = {"fast": pair.fast, "base": pair.base}
    plans = plan_day(rng, pair, day0, probe_cases, audit_cases, audit_suite)
    run_rows = Run.objects.bulk_create([p[0] for p in plans])
    samples_by_run = [draw_samples(rng, run, at, items, endpoints) for run, at, items in plans]
    Sample.objects.bulk_create([s for rows in samples_by_run for s in rows], batch_size=2000)
    for (run, at, items), rows in zip(plans, samples_by_run, strict=True):
        finish_run(run, at, items, rows)
    Run.objects.bulk_update(
        run_rows,
        ["created_at", "started_at", "finished_at", "planned", "completed", "summary"],
        batch_size=200,
    )
    for run, rows in zip(run_rows, samples_by_run, strict=True):
        record_run(run=run, samples=rows)
    return sum(len(r) for r in samples_by_run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=50)
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--end", default=None, help="last day (UTC, YYYY-MM-DD), default today")
    parser.add_argument(
        "--copy",
        action="store_true",
        help="bulk-load with COPY from template runs (benchmarks/scale_copy.py)",
    )
    parser.add_argument("--templates", type=int, default=16, help="--copy: template days")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    global POOL
    POOL = Payloads(rng)
    end = (
        datetime.fromisoformat(args.end).replace(tzinfo=UTC)
        if args.end
        else datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    )
    if args.copy:
        from benchmarks import scale_copy

        return scale_copy.main(args, rng, end)
    pairs, probe_cases, audit_cases = setup_pairs(args.pairs)
    audit_suite = audit_cases[0].suite
    t0, total = time.monotonic(), 0
    for d in range(args.days, 0, -1):
        day0 = end - timedelta(days=d)
        for pair in pairs:
            with transaction.atomic():
                total += one_day(rng, pair, day0, probe_cases, audit_cases, audit_suite)
        rate = total / (time.monotonic() - t0)
        print(f"{day0.date()}: {total:,} samples, {rate:,.0f}/s", file=sys.stderr, flush=True)
    for pair in pairs:  # a real verdict on the newest audit, as the worker would have stored
        latest = Run.objects.filter(pair=pair, kind="audit").order_by("-created_at").first()
        if latest is not None:
            compute_verdict(run_id=latest.id)
    print(f"wrote {total:,} samples in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
