"""The border tripwire on a real vendor's recorded swap: B3IT's daily samples of Together's
``mistralai/mistral-7b-instruct-v0.3``, which Together redirected to Ministral-3-14B on
2026-01-29 (its changelog; B3IT's note: caught at the next daily batch, 2026-01-30).

Data: the public repository ``timothee-chauvin/token-efficient-change-detection-llm-apis``
(Chauvin, Lalanne et al., "Token-efficient change detection in LLM APIs", arXiv 2602.11083),
``b3it_demo/data/mistralai2fmistral-7b-instruct-v0.323together/phase_2.json``: per border
input, per daily batch, the sampled one-token answers (100 in the first batch, 10 a day
after). The repository states no licence, so nothing of it is copied here: point
``TIERWATCH_B3IT_DATA`` at that folder of a checkout (or a copy of its ``phase_2.json``).

The replay goes through the product's own fold, one run per daily batch, at the daily
cadence a user saves for such an endpoint (``tripwire_every: 24h``): discovery keeps the
inputs ``evals.stats.border.select`` keeps from the first batch's first ``--reference``
answers (the product's discovery samples 30; B3IT's 100), the next
``run_conformal.reference_runs(86400)`` daily batches are the reference runs, and every later
batch is ``monitor.derived.border.tier_after`` at threshold ``monitor.derived.tripwire.threshold``
for daily runs. A batch with no answers brings no evidence.

Run: ``TIERWATCH_B3IT_DATA=… .venv/bin/python benchmarks/tripwire_b3it.py [--write]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "monitor.settings")

import django  # noqa: E402

django.setup()

from benchmarks.docs_section import write_section  # noqa: E402
from evals.stats import border  # noqa: E402
from monitor.derived import border as fold  # noqa: E402
from monitor.derived import tripwire  # noqa: E402

HEADER = "## Border tripwire on a real swap (B3IT's recording of Together)"
DAILY_S = 86400
SWAP = "2026-01-29"  # Together's changelog: requests redirected to Ministral-3-14B
B3IT_CAUGHT = "2026-01-30"  # the recording's own note


def load(folder: str | os.PathLike[str]) -> dict[str, dict[str, list[Any]]]:
    """``phase_2.json`` of the recording's folder: {input: {batch time: [[time, answer]]}}."""
    path = Path(folder)
    path = path / "phase_2.json" if path.is_dir() else path
    data: dict[str, dict[str, list[Any]]] = json.loads(path.read_text())
    return data


def batches(data: dict[str, dict[str, list[Any]]]) -> list[str]:
    return sorted({b for per_input in data.values() for b in per_input})


def replay(data: dict[str, dict[str, list[Any]]], reference: int = 30) -> list[dict[str, Any]]:
    """Each daily batch after the first through the product's fold: per batch its date and
    the tier's ``last`` (collecting, or statistic, rank, p, e, detector, threshold, alarm)."""
    days = batches(data)
    first = {i: Counter(a for _, a in per[days[0]][:reference]) for i, per in data.items()}
    kept = border.select(first)
    block: dict[str, Any] = fold.tier_after(
        {}, {"discovered": {"inputs": kept, "reference": {i: dict(first[i]) for i in kept}}},
        0, 0, DAILY_S,
    )  # fmt: skip
    out = []
    for run, day in enumerate(days[1:], start=1):
        current = {i: dict(Counter(a for _, a in data[i].get(day, []))) for i in kept}
        current = {i: c for i, c in current.items() if c}
        block = fold.tier_after(block, {"current": current}, run, run, DAILY_S)
        answers = sum(sum(c.values()) for c in current.values())
        out.append({"day": day[:10], "answers": answers, **block["last"]})
    return out


def first_alarm(rows: list[dict[str, Any]]) -> str | None:
    return next((r["day"] for r in rows if r.get("new_alarm")), None)


def render(results: dict[int, list[dict[str, Any]]], kept: dict[int, int]) -> str:
    lines = [
        HEADER,
        "",
        "Command: `TIERWATCH_B3IT_DATA=<checkout>/b3it_demo/data/"
        "mistralai2fmistral-7b-instruct-v0.323together .venv/bin/python "
        "benchmarks/tripwire_b3it.py --write`; machine: "
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}. "
        "Data: B3IT's public recording (timothee-chauvin/token-efficient-change-detection-"
        "llm-apis, arXiv 2602.11083; no licence stated, read at run time, not copied). "
        f"Swap: {SWAP} (Together's changelog); B3IT's note: caught {B3IT_CAUGHT}. Daily runs, "
        f"threshold {tripwire.threshold(DAILY_S):.0f} (runs per quarter / the tier's 0.1).",
        "",
        "| discovery answers | inputs kept | first alarm | alarms before the swap | "
        "detector on the day before the swap | batches without answers |",
        "|---|---|---|---|---|---|",
    ]
    for ref, rows in results.items():
        before = [r for r in rows if r["day"] < SWAP and r.get("new_alarm")]
        eve = [r for r in rows if r["day"] < SWAP and "detector" in r]
        empty = sum(1 for r in rows if r.get("no_evidence"))
        lines.append(
            f"| {ref} | {kept[ref]} | {first_alarm(rows) or 'none'} | {len(before)} | "
            f"{eve[-1]['detector']:.3g} | {empty} (no evidence, nothing changed) |"
        )
    lines += ["", "Per batch (discovery of 30 answers, as the product samples):", "",
              "| batch | answers | rank among reference runs | mean TV | tolerance | p | e | "
              "detector |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in results[30]:
        if r.get("collecting"):
            lines.append(f"| {r['day']} | {r['answers']} | reference run | | | | | |")
        elif r.get("no_evidence"):
            lines.append(f"| {r['day']} | 0 | no evidence | | | | | {r['detector']:.3g} |")
        else:
            lines.append(
                f"| {r['day']} | {r['answers']} | {r['rank']} of {r['of']} | "
                f"{r['statistic']:.3f} | {r['tolerance']:.3f} | {r['p']:.3g} | {r['e']:.3g} | "
                f"{r['detector']:.3g}{' **fires**' if r.get('new_alarm') else ''} |"
            )
    lines += ["", READING, ""]
    return "\n".join(lines)


READING = (
    "Reading it: the exchangeable unit is the day. The reference runs are the first week of "
    "daily batches; each later batch ranks among them (a rank bet) and, when its mean TV "
    "passes 1.5 × the farthest reference run, the request-level permutation p bets on how far "
    "(`evals/stats/run_conformal.py`). Real day-to-day movement of border answers stays "
    "inside the reference's own spread, so no alarm comes before the swap; the swapped model "
    "answers other tokens (TV near 1), ranks first and passes the tolerance from the first "
    "batch after it. One run's evidence is at most ½ (5.6 + 66.9) ≈ 36 (the rank bet at rank "
    "1 of 8, the tolerance bet at p 1/10,000) while the "
    "daily threshold is 900, so the product fires on the *second* batch after the swap: the "
    "measured limit of a budget of 0.1 false alarms per tier per quarter at one run a day "
    "(B3IT's own rule, which keeps no such budget, flagged the first)."
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write docs/benchmarks.md")
    args = parser.parse_args()
    folder = os.environ.get("TIERWATCH_B3IT_DATA")
    if not folder:
        sys.exit("set TIERWATCH_B3IT_DATA to the recording's folder (module docstring)")
    data = load(folder)
    results, kept = {}, {}
    for ref in (30, 100):
        results[ref] = replay(data, ref)
        first = {i: Counter(a for _, a in per[batches(data)[0]][:ref]) for i, per in data.items()}
        kept[ref] = len(border.select(first))
    text = render(results, kept)
    print(text)
    if args.write:
        write_section(HEADER, text)


if __name__ == "__main__":
    main()
