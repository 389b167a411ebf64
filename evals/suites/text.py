"""Deterministic synthetic text for the long prompts: a code base and a service log from a seeded
RNG (not lorem ipsum), so a suite's version names its exact content."""

from __future__ import annotations

import random

_NOUNS = ["invoice", "ledger", "account", "session", "token", "cache", "order", "shipment",
          "tenant", "quota", "report", "batch", "queue", "worker", "policy", "audit", "metric",
          "window", "region", "bucket", "refund", "webhook", "schedule", "export"]  # fmt: skip
_VERBS = ["load", "save", "validate", "merge", "resolve", "compute", "render", "fetch",
          "refresh", "expire", "retry", "normalize", "reconcile", "archive"]  # fmt: skip
_ADJ = ["pending", "stale", "active", "failed", "cached", "partial", "expired", "primary"]
_SERVICES = ["api-gateway", "billing", "auth", "scheduler", "search", "notifier", "ingest"]


def _function(rng: random.Random) -> tuple[str, str, str]:
    """One plausible function of a service code base: (name, what it returns, source)."""
    verb, noun, owner, adj = (rng.choice(x) for x in (_VERBS, _NOUNS, _NOUNS, _ADJ))
    name, result = f"{verb}_{adj}_{noun}s", f"{adj}_{noun}s"
    limit, ttl = rng.choice([8, 16, 32, 50, 100, 250]), rng.choice([30, 60, 300, 900, 3600])
    head = [
        f"def {name}(store, {owner}_id: int, *, limit: int = {limit}) -> list[dict]:",
        f'    """{verb.capitalize()} the {adj} {noun}s of one {owner}, at most `limit`.',
        "",
        f"    Rows older than {ttl} s are skipped; the caller retries on TimeoutError.",
        '    """',
        f'    rows = store.query("{noun}s", {owner}_id={owner}_id, state="{adj}")',
    ]
    kind = rng.randrange(3)
    if kind == 0:
        body = [
            f"    {result} = []",
            "    for row in rows[:limit]:",
            f'        if row["age_s"] > {ttl}:',
            "            continue",
            f'        row["{owner}_id"] = {owner}_id',
            f"        {result}.append(row)",
        ]
    elif kind == 1:
        body = [
            f'    fresh = [r for r in rows if r["age_s"] <= {ttl}]',
            f'    fresh.sort(key=lambda r: r["{rng.choice(["created_at", "priority", "id"])}"])',
            f"    {result} = fresh[:limit]",
        ]
    else:
        body = [
            f"    {result} = []",
            "    for row in rows:",
            f'        if row["age_s"] <= {ttl} and len({result}) < limit:',
            f'            {result}.append(dict(row, state="{rng.choice(_ADJ)}"))',
        ]
    tail = [
        f'    log.debug("{name}: %d of %d rows", len({result}), len(rows))',
        f"    return {result}",
    ]
    return name, result, "\n".join(head + body + tail)


def codebase(seed: int, n_chars: int) -> tuple[str, list[tuple[str, str]]]:
    """A synthetic repository excerpt of about ``n_chars`` characters (~3.6 per token) and its
    (function name, returned variable) pairs, for questions that have an answer in the text."""
    rng = random.Random(seed)
    parts: list[str] = []
    functions: list[tuple[str, str]] = []
    size, module = 0, 0
    while size < n_chars:
        if not functions or rng.random() < 0.35:
            area, noun = rng.choice(["core", "jobs", "api", "storage"]), rng.choice(_NOUNS)
            header = (
                f"# file: {area}/{noun}_{module}.py\n"
                f'"""{rng.choice(_ADJ).capitalize()} {noun} handling for the {area} layer."""\n\n'
                "import logging\n\nlog = logging.getLogger(__name__)\n"
            )
            parts.append(header)
            size += len(header)
            module += 1
        name, result, text = _function(rng)
        functions.append((name, result))
        parts.append(text + "\n")
        size += len(text) + 1
    return "\n\n".join(parts), functions


def service_log(seed: int, n_lines: int) -> str:
    """A synthetic service log, ~29 tokens a line: timestamps, levels, services, ids."""
    rng = random.Random(seed)
    t = rng.randint(0, 3600)
    lines = []
    for _ in range(n_lines):
        t += rng.randint(1, 40)
        stamp = f"2024-03-14T{8 + t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}"
        level = rng.choices(["INFO", "WARN", "ERROR", "DEBUG"], [70, 15, 5, 10])[0]
        noun = rng.choice(_NOUNS)
        msg = rng.choice([
            f"{noun} {rng.randint(1000, 9999)} processed in {rng.randint(3, 900)} ms",
            f"retrying {noun} fetch (attempt {rng.randint(2, 5)}/5) after timeout",
            f"cache miss for {noun}:{rng.randint(1, 500)}, loading from primary",
            f"queue depth {rng.randint(0, 400)} for {noun} workers",
            f"{rng.choice(_ADJ)} {noun} count={rng.randint(0, 80)} region=eu-{rng.randint(1, 3)}",
        ])  # fmt: skip
        lines.append(f"{stamp}.{rng.randint(0, 999):03d}Z {level:<5} {rng.choice(_SERVICES)} {msg}")
    return "\n".join(lines)


def user_message(text: str) -> list[dict[str, str]]:
    """One user turn, the shape every built-in case sends."""
    return [{"role": "user", "content": text}]
