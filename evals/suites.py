"""The built-in suites: smoke, coding, long_tail, scenarios (the speed matrix) and audit.

Why these: the source article says half of a verification prompt set must be long-tail
(multi-step reasoning and debugging, rare APIs and old versions, many stacked constraints,
cross-file consistency), because that is where a distilled model loses to the model it imitates;
and that speed must be measured per scenario, because a vendor's "6x" comes from the favourable
one (long cached context, short output). ``audit`` feeds the two-sample test at temperature 1
(Gao, Liang & Guestrin, ICLR 2025: >= 25 prompts with short outputs).

Every text here is fixed: the long prompts are generated from a seeded RNG (a synthetic code
base and service log, not lorem ipsum), so a suite's version names its exact content. Edit a
case, bump its suite's version.

``{nonce}``: the ``long_cold`` cases begin with this placeholder. The runner replaces it per
request (:func:`fill_nonce`), so no two requests share even their first tokens and a prefix
cache cannot help; ``long_cached`` sends the same documents without it, so a prefix cache can.
The pair measures what prefix caching is worth on an endpoint.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any

from evals.records import CaseSpec, SuiteSpec
from evals.tokens import estimate_tokens

NONCE = "{nonce}"


@dataclass(frozen=True)
class Scenario:
    """One cell of the speed matrix: how long the prompt is, how long the output, and whether
    requests share a prefix. ``prompt_tokens`` is the intended range (our token estimate)."""

    name: str
    description: str
    prompt_tokens: tuple[int, int]
    max_tokens: int
    prefix: str = "none"  # shared | unique | none
    min_context_tokens: int = 0  # skip on endpoints whose context window is smaller
    in_matrix: bool = True


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            "long_cached",
            "~1k-token document shared by every case, short answer: the vendor-favoured case "
            "where a prefix cache skips most of the prefill",
            (800, 1300),
            16,
            prefix="shared",
        ),
        Scenario(
            "long_cold",
            "the same documents preceded by a per-request nonce: a unique prefix, so the whole "
            "prompt is prefilled (cold start)",
            (800, 1300),
            16,
            prefix="unique",
        ),
        Scenario(
            "short_long_out",
            "short prompt, ~400-token answer: decode-bound, where TPOT dominates",
            (10, 100),
            400,
        ),
        Scenario("mid", "~300 tokens in, ~100 out: a typical chat turn", (200, 450), 100),
        Scenario(
            "xl_context",
            "~10k-token document, short answer; skipped when an endpoint's context window is "
            "smaller than min_context_tokens (estimate + margin for other tokenizers)",
            (8000, 12500),
            16,
            prefix="shared",
            min_context_tokens=16384,
        ),
        Scenario(
            "task",
            "capability cases (coding, long-tail): lengths vary with the task, so they are kept "
            "out of the speed matrix",
            (20, 1200),
            700,
            in_matrix=False,
        ),
        Scenario(
            "short",
            "short prompt, short answer: smoke and audit cases, not part of the speed matrix",
            (5, 120),
            64,
            in_matrix=False,
        ),
    ]
}


def prompt_estimate(messages: list[dict[str, Any]]) -> int:
    """Our tokenizer estimate of a prompt (``evals.tokens``); other tokenizers differ."""
    return sum(estimate_tokens(m["content"]) for m in messages if isinstance(m.get("content"), str))


def context_needed(messages: list[dict[str, Any]], max_tokens: int, scenario: str) -> int:
    """Tokens an endpoint's context window must hold for a case: the prompt (our estimate) plus
    ``max_tokens`` (servers reject prompt + max_tokens above the window), and at least the
    scenario's ``min_context_tokens`` (a margin for tokenizers that count more than ours)."""
    floor = SCENARIOS[scenario].min_context_tokens if scenario in SCENARIOS else 0
    return max(prompt_estimate(messages) + max_tokens, floor)


def fits_context(case: CaseSpec, context_window: int | None) -> bool:
    """Whether ``case`` can run on an endpoint with this context window (None: unknown, run)."""
    need = context_needed(case.messages, case.max_tokens, case.scenario)
    return context_window is None or context_window >= need


def fill_nonce(messages: list[dict[str, str]], nonce: str) -> list[dict[str, str]]:
    """A copy of ``messages`` with every ``{nonce}`` replaced; other text is left as it is."""
    return [
        {**m, "content": m["content"].replace(NONCE, nonce)}
        if isinstance(m.get("content"), str)
        else dict(m)
        for m in messages
    ]


# --- deterministic synthetic text ------------------------------------------------------------

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


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


# --- smoke -------------------------------------------------------------------------------------


def _smoke() -> SuiteSpec:
    short = [
        ("smoke-capital", "What is the capital of Australia? Answer in one word."),
        ("smoke-arith", "What is 17 * 23? Reply with the number only."),
        ("smoke-translate", "Translate into French: 'The meeting has moved to Thursday.'"),
        ("smoke-haiku", "Write a haiku about network latency."),
        ("smoke-hash-table", "In two sentences, what is a hash table?"),
        ("smoke-primes", "List three prime numbers greater than 50, separated by commas."),
    ]
    cases = [CaseSpec(k, _user(p), scenario="short", max_tokens=64) for k, p in short]
    log = service_log(11, 9)
    cases.append(
        CaseSpec(
            "smoke-log-first-error",
            _user(
                f"Service log:\n{log}\n\nWhich service logged the first WARN or ERROR line, "
                "and at what time? Answer in one sentence."
            ),  # fmt: skip
            scenario="mid",
            max_tokens=100,
        )
    )
    code, functions = codebase(12, 900)
    cases.append(
        CaseSpec(
            "smoke-code-summary",
            _user(f"{code}\nSummarise in three sentences what this code does."),
            scenario="mid",
            max_tokens=100,
        )
    )
    return SuiteSpec("smoke", 1, "Eight short general cases to check a pair end to end.", cases)


# --- coding ------------------------------------------------------------------------------------

_REPLY = "\n\nReply with a single ```python code block and nothing else."


def _coding_case(key: str, prompt: str, entry: str, tests: str, ref: str, weak: str = "",
                 hard: bool = False) -> CaseSpec:  # fmt: skip
    return CaseSpec(
        key=key,
        messages=_user(prompt.strip() + _REPLY),
        category="coding",
        scenario="task",
        max_tokens=700 if hard else 400,
        difficulty="hard" if hard else "easy",
        unit_tests=tests.strip() + "\n",
        entry_point=entry,
        reference_solution=ref.strip() + "\n",
        weak_solution=weak.strip() + "\n" if weak else "",
    )


_EASY = [
    _coding_case(
        "coding-fizzbuzz",
        """
Write a Python function `fizzbuzz(n: int) -> list[str]` returning the strings for the numbers 1
to n: "Fizz" for multiples of 3, "Buzz" for multiples of 5, "FizzBuzz" for multiples of both,
and the number itself as a string otherwise. For n <= 0 return an empty list.
""",
        "fizzbuzz",
        """
assert fizzbuzz(0) == []
assert fizzbuzz(-3) == []
assert fizzbuzz(5) == ["1", "2", "Fizz", "4", "Buzz"]
assert fizzbuzz(15)[-1] == "FizzBuzz"
assert len(fizzbuzz(100)) == 100
assert fizzbuzz(30).count("FizzBuzz") == 2
""",
        """
def fizzbuzz(n):
    out = []
    for i in range(1, n + 1):
        word = ("Fizz" if i % 3 == 0 else "") + ("Buzz" if i % 5 == 0 else "")
        out.append(word or str(i))
    return out
""",
    ),
    _coding_case(
        "coding-palindrome",
        """
Write a Python function `is_palindrome(s: str) -> bool` that ignores letter case and every
character that is not a letter or a digit. The empty string is a palindrome.
""",
        "is_palindrome",
        """
assert is_palindrome("A man, a plan, a canal: Panama")
assert not is_palindrome("race a car")
assert is_palindrome("")
assert is_palindrome("No 'x' in Nixon")
assert is_palindrome("12321")
assert not is_palindrome("ab")
""",
        """
def is_palindrome(s):
    kept = [c.lower() for c in s if c.isalnum()]
    return kept == kept[::-1]
""",
    ),
    _coding_case(
        "coding-top-words",
        """
Write a Python function `top_words(text: str, k: int) -> list[tuple[str, int]]` returning the k
most frequent words with their counts. Words are maximal runs of ASCII letters, compared
case-insensitively and returned in lowercase. Order by count descending, then alphabetically.
With fewer than k distinct words, return them all.
""",
        "top_words",
        """
assert top_words("b a B c a b", 2) == [("b", 3), ("a", 2)]
assert top_words("x y z", 5) == [("x", 1), ("y", 1), ("z", 1)]
assert top_words("", 3) == []
assert top_words("It's it, IT!", 1) == [("it", 3)]
assert top_words("don't stop", 3) == [("don", 1), ("stop", 1), ("t", 1)]
""",
        """
import re
from collections import Counter

def top_words(text, k):
    counts = Counter(w.lower() for w in re.findall(r"[A-Za-z]+", text))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:k]
""",
    ),
    _coding_case(
        "coding-flatten",
        """
Write a Python function `flatten(items: list) -> list` that flattens arbitrarily nested lists
and tuples into one flat list, keeping the order. Strings are kept whole, not split.
""",
        "flatten",
        """
assert flatten([1, [2, [3, [4]]], 5]) == [1, 2, 3, 4, 5]
assert flatten([]) == []
assert flatten([(1, 2), [["a"], "bc"]]) == [1, 2, "a", "bc"]
assert flatten([[[]]]) == []
""",
        """
def flatten(items):
    out = []
    for item in items:
        if isinstance(item, (list, tuple)):
            out.extend(flatten(item))
        else:
            out.append(item)
    return out
""",
    ),
    _coding_case(
        "coding-rle",
        """
Write two Python functions: `rle_encode(s: str) -> str`, which replaces each run of a repeated
character by the character followed by the run length ("aaabcc" -> "a3b1c2"), and
`rle_decode(s: str) -> str`, which reverses it. Inputs to rle_encode contain no digits; a run
length may have several digits.
""",
        "rle_encode",
        """
assert rle_encode("aaabcc") == "a3b1c2"
assert rle_encode("") == ""
assert rle_decode("a3b1c2") == "aaabcc"
assert rle_encode("x" * 12) == "x12"
assert rle_decode(rle_encode("hello  world")) == "hello  world"
""",
        """
import re
from itertools import groupby

def rle_encode(s):
    return "".join(f"{ch}{len(list(run))}" for ch, run in groupby(s))

def rle_decode(s):
    return "".join(ch * int(n) for ch, n in re.findall(r"(\\D)(\\d+)", s))
""",
    ),
]

_HARD = [
    _coding_case(
        "coding-debug-merge-intervals",
        """
This function is meant to merge overlapping closed intervals:

```python
def merge_intervals(intervals):
    result = []
    for start, end in intervals:
        if result and start < result[-1][1]:
            result[-1][1] = end
        else:
            result.append([start, end])
    return result
```

Users report that `merge_intervals([[1, 3], [2, 6], [8, 10]])` works, but the results are wrong
for unsorted input, for touching intervals such as [1, 2] and [2, 3] (they must merge), and
when one interval lies inside another. Find every bug and fix them. Return a new list of
[start, end] lists sorted by start, and do not modify the input list or its items.
""",
        "merge_intervals",
        """
assert merge_intervals([[1, 3], [2, 6], [8, 10]]) == [[1, 6], [8, 10]]
assert merge_intervals([[8, 10], [1, 3], [2, 6]]) == [[1, 6], [8, 10]]
assert merge_intervals([[1, 2], [2, 3]]) == [[1, 3]]
assert merge_intervals([[1, 10], [2, 3], [4, 5]]) == [[1, 10]]
assert merge_intervals([]) == []

def test_input_is_not_modified():
    data = [[5, 7], [1, 6]]
    merge_intervals(data)
    assert data == [[5, 7], [1, 6]]
""",
        """
def merge_intervals(intervals):
    result = []
    for start, end in sorted(intervals):
        if result and start <= result[-1][1]:
            result[-1][1] = max(result[-1][1], end)
        else:
            result.append([start, end])
    return result
""",
        """
def merge_intervals(intervals):
    intervals.sort(key=lambda interval: interval[0])
    result = []
    for start, end in intervals:
        if result and start <= result[-1][1]:
            result[-1][1] = end
        else:
            result.append([start, end])
    return result
""",
        hard=True,
    ),
    _coding_case(
        "coding-iso-week",
        """
Using the standard library only, write two Python functions:
- `iso_week_label(d: datetime.date) -> str` returning the ISO 8601 week label such as
  "2024-W05": the ISO week-numbering year (which can differ from the calendar year around New
  Year), a dash, "W" and the two-digit ISO week number.
- `week_start(label: str) -> datetime.date` returning the Monday of the ISO week named by such
  a label.
""",
        "iso_week_label",
        """
import datetime
D = datetime.date
assert iso_week_label(D(2024, 1, 31)) == "2024-W05"
assert iso_week_label(D(2021, 1, 1)) == "2020-W53"
assert iso_week_label(D(2024, 12, 30)) == "2025-W01"
assert week_start("2024-W05") == D(2024, 1, 29)
assert week_start("2020-W53") == D(2020, 12, 28)
assert week_start("2026-W01") == D(2025, 12, 29)

def test_every_day_of_a_year_falls_in_its_week():
    day = D(2022, 12, 20)
    for _ in range(400):
        monday = week_start(iso_week_label(day))
        assert monday.weekday() == 0 and monday <= day < monday + datetime.timedelta(days=7)
        day += datetime.timedelta(days=1)
""",
        """
import datetime

def iso_week_label(d):
    year, week, _ = d.isocalendar()
    return f"{year}-W{week:02d}"

def week_start(label):
    year, week = label.split("-W")
    return datetime.date.fromisocalendar(int(year), int(week), 1)
""",
        """
import datetime

def iso_week_label(d):
    return d.strftime("%Y-W%V")

def week_start(label):
    return datetime.datetime.strptime(label + "-1", "%Y-W%W-%w").date()
""",
        hard=True,
    ),
    _coding_case(
        "coding-slugify-constraints",
        """
Write a Python function `slugify(title: str, max_len: int = 40) -> str` that meets ALL of
these rules:
1. Accented Latin letters become their base letter ("é" -> "e"); other non-ASCII characters
   are dropped.
2. The result is lowercase.
3. Every run of characters other than a-z and 0-9 becomes a single hyphen.
4. No leading or trailing hyphen.
5. At most `max_len` characters, cut at a hyphen so that no word is cut in half; only when the
   first word alone is longer than `max_len` is that word cut at `max_len` characters.
6. If nothing is left, return "untitled".
Use the standard library only.
""",
        "slugify",
        """
assert slugify("Hello, World!") == "hello-world"
assert slugify("  Crème brûlée à la carte ") == "creme-brulee-a-la-carte"
assert slugify("C'est déjà l'été") == "c-est-deja-l-ete"
assert slugify("!!!") == "untitled"
assert slugify("日本語") == "untitled"
assert slugify("The quick brown fox jumps over the lazy dog", max_len=17) == "the-quick-brown"
assert slugify("Supercalifragilistic", max_len=5) == "super"
assert slugify("a-b", max_len=2) == "a"

def test_length_and_edges_for_every_limit():
    for n in range(1, 40):
        slug = slugify("ab cd ef gh word " * 3, max_len=n)
        assert slug and len(slug) <= n
        assert not slug.startswith("-") and not slug.endswith("-")
""",
        """
import re
import unicodedata

def slugify(title, max_len=40):
    ascii_text = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    if len(slug) > max_len:
        head = slug[:max_len]
        if slug[max_len] != "-" and "-" in head:
            head = head[: head.rindex("-")]
        slug = head.strip("-")
    return slug or "untitled"
""",
        """
import re

def slugify(title, max_len=40):
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return slug[:max_len].rstrip("-") or "untitled"
""",
        hard=True,
    ),
    _coding_case(
        "coding-cross-file-invoice",
        """
Two files of one project:

```python
# models.py
from dataclasses import dataclass
from datetime import datetime

@dataclass
class Invoice:
    number: str
    customer_email: str
    amount_cents: int      # negative for credit notes
    issued_at: datetime    # timezone-aware
    paid: bool = False
```

```sql
-- schema.sql
CREATE TABLE invoices (
  invoice_no TEXT PRIMARY KEY,
  email      TEXT NOT NULL,
  amount     TEXT NOT NULL,  -- currency units, exactly two decimals: '12.50', '-0.05'
  issued_at  TEXT NOT NULL,  -- ISO 8601 with offset: '2024-01-31T09:30:00+00:00'
  status     TEXT NOT NULL   -- 'paid' or 'open'
);
```

Write `to_row(inv: Invoice) -> dict` (keys exactly the table's columns) and
`from_row(row: dict) -> Invoice`, consistent with both files, such that
`from_row(to_row(inv)) == inv` for every invoice. Your code block must contain models.py
unchanged, followed by the two functions.
""",
        "to_row",
        """
from datetime import datetime, timedelta, timezone
WHEN = datetime(2024, 1, 31, 9, 30, tzinfo=timezone.utc)
INV = Invoice("INV-7", "a@example.com", 1250, WHEN)
assert set(to_row(INV)) == {"invoice_no", "email", "amount", "issued_at", "status"}
assert to_row(INV)["amount"] == "12.50"
assert to_row(INV)["status"] == "open"
assert to_row(INV)["issued_at"] == "2024-01-31T09:30:00+00:00"
assert to_row(Invoice("C-1", "b@example.com", -1250, WHEN, paid=True))["amount"] == "-12.50"
assert to_row(Invoice("C-2", "b@example.com", -5, WHEN))["amount"] == "-0.05"
ROW = {"invoice_no": "X", "email": "c@example.com", "amount": "0.29",
       "issued_at": "2024-02-01T00:00:00+01:00", "status": "paid"}
assert from_row(ROW).amount_cents == 29 and from_row(ROW).paid

def test_round_trip():
    tz = timezone(timedelta(hours=2))
    for cents in (0, 1, 29, 57, 99, 100, 1005, 123456, -1, -1250):
        inv = Invoice("N", "d@example.com", cents, datetime(2024, 5, 1, 12, tzinfo=tz),
                      paid=cents % 2 == 0)
        assert from_row(to_row(inv)) == inv
""",
        """
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

@dataclass
class Invoice:
    number: str
    customer_email: str
    amount_cents: int      # negative for credit notes
    issued_at: datetime    # timezone-aware
    paid: bool = False

def to_row(inv):
    units, cents = divmod(abs(inv.amount_cents), 100)
    sign = "-" if inv.amount_cents < 0 else ""
    return {
        "invoice_no": inv.number,
        "email": inv.customer_email,
        "amount": f"{sign}{units}.{cents:02d}",
        "issued_at": inv.issued_at.isoformat(),
        "status": "paid" if inv.paid else "open",
    }

def from_row(row):
    return Invoice(
        number=row["invoice_no"],
        customer_email=row["email"],
        amount_cents=int(Decimal(row["amount"]).scaleb(2)),
        issued_at=datetime.fromisoformat(row["issued_at"]),
        paid=row["status"] == "paid",
    )
""",
        """
from dataclasses import dataclass
from datetime import datetime

@dataclass
class Invoice:
    number: str
    customer_email: str
    amount_cents: int      # negative for credit notes
    issued_at: datetime    # timezone-aware
    paid: bool = False

def to_row(inv):
    return {
        "invoice_no": inv.number,
        "email": inv.customer_email,
        "amount": f"{inv.amount_cents / 100:.2f}",
        "issued_at": inv.issued_at.isoformat(),
        "status": "paid" if inv.paid else "open",
    }

def from_row(row):
    return Invoice(row["invoice_no"], row["email"], int(float(row["amount"]) * 100),
                   datetime.fromisoformat(row["issued_at"]), row["status"] == "paid")
""",
        hard=True,
    ),
    _coding_case(
        "coding-build-order",
        """
Write a Python function `build_order(deps: dict[str, list[str]]) -> list[str]`. `deps` maps
each package to the packages it needs installed first. Return an install order that contains
every package named anywhere (as a key or in a list) exactly once, with each package after
everything it needs. Whenever several packages could go next, take the alphabetically smallest
of them. If the dependencies contain a cycle, raise ValueError with a message containing the
word "cycle".
""",
        "build_order",
        """
assert build_order({"app": ["lib", "utils"], "lib": ["utils"]}) == ["utils", "lib", "app"]
assert build_order({}) == []
assert build_order({"b": [], "a": [], "c": []}) == ["a", "b", "c"]
assert build_order({"z": ["m"], "b": ["m"], "m": []}) == ["m", "b", "z"]
assert build_order({"web": ["db", "cache"], "db": ["os"], "cache": ["os"], "a": []}) == [
    "a", "os", "cache", "db", "web"]
assert build_order({"a": ["b", "b"]}) == ["b", "a"]

def _raises_cycle(deps):
    try:
        build_order(deps)
    except ValueError as exc:
        return "cycle" in str(exc).lower()
    return False

def test_cycle():
    assert _raises_cycle({"a": ["b"], "b": ["c"], "c": ["a"], "d": []})

def test_self_cycle():
    assert _raises_cycle({"a": ["a"]})
""",
        """
import heapq

def build_order(deps):
    nodes = set(deps)
    for needs in deps.values():
        nodes.update(needs)
    waiting = {node: set() for node in nodes}
    users = {node: [] for node in nodes}
    for pkg, needs in deps.items():
        for need in set(needs):
            waiting[pkg].add(need)
            users[need].append(pkg)
    ready = [node for node in nodes if not waiting[node]]
    heapq.heapify(ready)
    order = []
    while ready:
        node = heapq.heappop(ready)
        order.append(node)
        for user in users[node]:
            waiting[user].discard(node)
            if not waiting[user]:
                heapq.heappush(ready, user)
    if len(order) != len(nodes):
        stuck = ", ".join(sorted(nodes - set(order)))
        raise ValueError(f"dependency cycle among: {stuck}")
    return order
""",
        """
def build_order(deps):
    nodes = set(deps)
    for needs in deps.values():
        nodes.update(needs)
    indegree = {node: 0 for node in nodes}
    users = {node: [] for node in nodes}
    for pkg, needs in deps.items():
        for need in needs:
            indegree[pkg] += 1
            users[need].append(pkg)
    queue = sorted(node for node in nodes if indegree[node] == 0)
    order = []
    while queue:
        node = queue.pop(0)
        order.append(node)
        for user in users[node]:
            indegree[user] -= 1
            if indegree[user] == 0:
                queue.append(user)
    return order
""",
        hard=True,
    ),
]


def _coding() -> SuiteSpec:
    return SuiteSpec(
        "coding",
        1,
        "Ten coding cases run against unit tests in the sandbox; half are long-tail (multi-step "
        "debugging, a rare API, stacked constraints, cross-file consistency, ordering logic).",
        _EASY + _HARD,
    )


# --- long tail ---------------------------------------------------------------------------------


def _lt(key: str, prompt: str, constraints: list[dict[str, Any]], *, category: str = "long_tail",
        max_tokens: int = 300) -> CaseSpec:  # fmt: skip
    return CaseSpec(
        key=key,
        messages=_user(prompt.strip()),
        category=category,
        scenario="task",
        max_tokens=max_tokens,
        difficulty="hard",
        constraints=constraints,
    )


def _answer(value: str) -> dict[str, Any]:
    return {"kind": "matches_regex", "pattern": rf"^\W*ANSWER: {value}\W*$"}


_FINAL = "\n\nWork it out step by step, then end with a final line exactly `ANSWER: {}`."

_LONG_TAIL = [
    _lt(
        "lt-multistep-warehouse",
        "A warehouse starts the day with 240 boxes. In the morning it ships 35% of them. At noon "
        "a truck delivers 3 pallets of 18 boxes each. In the afternoon it ships one third of "
        "what it then holds, rounded down to whole boxes. How many boxes are left at the end "
        "of the day?" + _FINAL.format("<number>"),
        [_answer("140")],
    ),
    _lt(
        "lt-multistep-schedule",
        "Three jobs run on one machine, one at a time and without idle time, from 09:00. Job A "
        "takes 50 minutes, job B 1 hour 25 minutes and job C 40 minutes. They run in the order "
        "that minimises the sum of their finishing times. At what clock time does the last job "
        "finish, and which job is it?" + _FINAL.format("<HH:MM> <job letter>"),
        [_answer("11:55 B")],
    ),
    _lt(
        "lt-debug-keyerror",
        """
This code fails with `KeyError: 'Host'` inside `connect`, although config.json contains
`{"Host": "db.internal", "Port": 5432}`:

```python
def load_config(path):
    with open(path) as f:
        raw = json.load(f)
    return {k.lower(): v for k, v in raw.items()}

def connect(cfg):
    return Client(host=cfg["Host"], port=int(cfg.get("Port", 5432)))
```

Explain the root cause, give the corrected `connect` line, and note any second bug you see.
The whole reply must be at most 90 words.
""",
        [
            {"kind": "max_words", "n": 90},
            {"kind": "must_include", "terms": ["lower"]},
            {"kind": "matches_regex", "pattern": r"cfg\[\s*['\"]host['\"]\s*\]"},
            {"kind": "matches_regex", "pattern": r"get\(\s*['\"]port['\"]"},
        ],
    ),
    _lt(
        "lt-rare-struct-alignment",
        "In Python's struct module on x86-64 Linux, what do struct.calcsize('<hI') and "
        "struct.calcsize('hI') return, and why do they differ? At most 80 words.",
        [
            {"kind": "matches_regex", "pattern": r"\b6\b"},
            {"kind": "matches_regex", "pattern": r"\b8\b"},
            {"kind": "must_include", "terms": ["align"]},
            {"kind": "max_words", "n": 80},
        ],
    ),
    _lt(
        "lt-old-python2-division",
        "In Python 2.7, with no __future__ imports, what do `7 / 2`, `7 // 2` and `-7 / 2` "
        "evaluate to? Give the three values and one sentence of explanation, at most 80 words.",
        [{"kind": "must_include", "terms": ["-4"]}, {"kind": "max_words", "n": 80}],
    ),
    _lt(
        "lt-rare-sqlite-rowid",
        "In SQLite, table t is created with `CREATE TABLE t(x INTEGER PRIMARY KEY, y TEXT)` "
        "(no AUTOINCREMENT). You run `INSERT INTO t(y) VALUES ('a')` three times, then "
        "`DELETE FROM t`, then `INSERT INTO t(y) VALUES ('b')`. What is x of the row 'b'?"
        + _FINAL.format("<number>"),
        [_answer("1")],
    ),
    _lt(
        "lt-stacked-prefix-cache",
        "Explain how prefix caching speeds up LLM serving, following every rule: write exactly "
        "4 bullet points, each starting with '- '; all lowercase; no commas; at most 80 words "
        "in total; mention 'prefill'; do not use the word 'gpu'.",
        [
            {"kind": "bullet_count", "n": 4},
            {"kind": "all_lowercase"},
            {"kind": "no_commas"},
            {"kind": "max_words", "n": 80},
            {"kind": "must_include", "terms": ["prefill"]},
            {"kind": "must_not_include", "terms": ["gpu"]},
        ],
        category="constraints",
    ),
    _lt(
        "lt-stacked-json-plan",
        "Return only a JSON object, with no code fence and no other text, describing a plan to "
        'roll out a database migration. Keys: "name" (a string), "steps" (an array of exactly 3 '
        'strings) and "risk" (one of "low", "medium", "high"). At most 400 characters. Do not '
        "mention downtime.",
        [
            {"kind": "json_valid", "required_keys": ["name", "steps", "risk"]},
            {"kind": "starts_with", "prefix": "{"},
            {"kind": "code_block_count", "n": 0},
            {"kind": "max_chars", "n": 400},
            {"kind": "must_not_include", "terms": ["downtime"]},
        ],
        category="constraints",
    ),
    _lt(
        "lt-stacked-release-note",
        "Write a release note for version 2.4.0 of a command-line tool. Rules: the first line "
        "is exactly 'Release 2.4.0'; then exactly 3 bullet points starting with '- '; one "
        "bullet mentions a breaking change using the word 'breaking'; the last line is exactly "
        "'Upgrade: pip install -U tool'; no commas anywhere; between 40 and 90 words.",
        [
            {"kind": "starts_with", "prefix": "Release 2.4.0"},
            {"kind": "bullet_count", "n": 3},
            {"kind": "must_include", "terms": ["breaking"]},
            {"kind": "ends_with", "suffix": "Upgrade: pip install -U tool"},
            {"kind": "no_commas"},
            {"kind": "min_words", "n": 40},
            {"kind": "max_words", "n": 90},
        ],
        category="constraints",
    ),
    _lt(
        "lt-cross-file-client",
        """
client.py:
```python
class UserClient:
    def get_user(self, uid: int, *, include_deleted: bool = False) -> dict:
        ...
    def list_users(self, page: int = 1) -> list[dict]:
        \"\"\"Pages start at 1.\"\"\"
        ...
```

service.py:
```python
def profile(client, user_id):
    user = client.fetch_user(user_id=user_id)
    others = client.list_users(page=0)
    return {"user": user, "others": others}
```

List every place where service.py does not match client.py, one bullet point per mismatch,
each with its fix.
""",
        [
            {"kind": "must_include", "terms": ["fetch_user", "get_user", "uid", "page"]},
            {"kind": "bullet_count", "min": 3},
        ],
    ),
    _lt(
        "lt-cross-file-config-keys",
        """
settings.yaml:
```yaml
database:
  url: postgres://app@db/app
  pool_size: 5
retry:
  limit: 3
  backoff_s: 0.5
```

app.py:
```python
pool = create_pool(cfg["database"]["url"], size=cfg["database"]["pool"])
retrier = Retrier(attempts=cfg["retry"]["max_retries"], backoff=cfg["retry"]["backoff_s"])
```

Which keys read by app.py are missing from settings.yaml? Reply with only a JSON array of their
dotted paths (like "a.b"), no code fence.
""",
        [
            {"kind": "json_valid"},
            {"kind": "must_include", "terms": ['"database.pool"', '"retry.max_retries"']},
            {"kind": "must_not_include", "terms": ["backoff_s", "database.url"]},
        ],
    ),
]


def _long_tail() -> SuiteSpec:
    return SuiteSpec(
        "long_tail",
        1,
        "Long-tail cases checked by verifiable constraints: multi-step reasoning, debugging, "
        "rare APIs and old versions, stacked constraints, cross-file consistency.",
        _LONG_TAIL,
    )


# --- scenarios (the speed matrix) ----------------------------------------------------------


_LONG_CHARS = 3500  # ~1k tokens of code at ~3.6 characters per token
_XL_CHARS = 36_000  # ~10k tokens


def _scenarios() -> SuiteSpec:
    doc, functions = codebase(101, _LONG_CHARS)
    picks = [functions[0], functions[len(functions) // 2], functions[-1]]
    cases: list[CaseSpec] = []
    for i, (name, _result) in enumerate(picks):
        question = (
            f"\n\nIn the code above, what does `{name}` return, and how many rows at most? "
            "Answer in at most ten words."
        )
        text = f"Repository excerpt:\n\n{doc}{question}"
        cases.append(CaseSpec(f"scn-long-cached-{i}", _user(text), scenario="long_cached",
                              max_tokens=16))  # fmt: skip
        cases.append(CaseSpec(f"scn-long-cold-{i}", _user(f"Request {NONCE}.\n{text}"),
                              scenario="long_cold", max_tokens=16))  # fmt: skip
    for i, topic in enumerate(
        ["how a hash map grows when it fills up", "how TCP recovers from a lost packet"]
    ):
        prompt = f"Explain {topic}, in about 300 words of plain prose."
        cases.append(CaseSpec(f"scn-long-out-{i}", _user(prompt), scenario="short_long_out",
                              max_tokens=400))  # fmt: skip
    for i, seed in enumerate([201, 202]):
        log = service_log(seed, 9)
        prompt = (
            f"Service log:\n{log}\n\nWhat happened in this window? Name the busiest service and "
            "any warnings, in at most three sentences."
        )
        cases.append(CaseSpec(f"scn-mid-{i}", _user(prompt), scenario="mid", max_tokens=100))
    xl_doc, xl_functions = codebase(301, _XL_CHARS)
    name = xl_functions[len(xl_functions) // 3][0]
    xl = (
        f"Repository excerpt:\n\n{xl_doc}\n\nRecent log:\n{service_log(302, 20)}\n\n"
        f"In the code above, what does `{name}` return? Answer in at most ten words."
    )
    cases.append(CaseSpec("scn-xl-context-0", _user(xl), scenario="xl_context", max_tokens=16))
    return SuiteSpec(
        "scenarios",
        1,
        "The speed matrix: long cached prefix vs the same prompt with a unique prefix, short "
        "prompt with long output, mid, and an optional ~10k-token context.",
        cases,
    )


# --- audit -------------------------------------------------------------------------------------

_AUDIT_PROMPTS = [
    "Name an animal and one surprising fact about it, in one sentence.",
    "Invent a name for a new coffee shop and give its slogan.",
    "Describe the colour blue to someone in one sentence.",
    "Suggest a weekend hobby and say why in one sentence.",
    "Write the first line of a mystery novel.",
    "Give a one-sentence tip for writing clearer emails.",
    "Name a city you would like to visit and one thing to do there.",
    "Make up a short riddle.",
    "Describe a rainy morning in one sentence.",
    "Suggest a name for a pet robot and explain it briefly.",
    "Give one reason people enjoy gardening.",
    "Write a one-sentence bedtime story.",
    "Invent a new holiday and say how it is celebrated, in one sentence.",
    "Recommend a board game for four people and say why, briefly.",
    "Describe the taste of a lemon without using the word 'sour'.",
    "Write a motto for a software team.",
    "Give a short piece of advice to a new programmer.",
    "Name a fruit and a dish you could make with it.",
    "Describe a mountain in exactly one sentence.",
    "Invent a word and define it.",
    "Write a two-line poem about the sea.",
    "Suggest a title for a documentary about bees.",
    "What is a good question to ask at the start of a meeting?",
    "Describe your ideal workspace in one sentence.",
    "Give a one-sentence summary of why sleep matters.",
    "Suggest a creative use for an empty glass jar.",
    "Write a fortune-cookie message.",
    "Name a musical instrument and describe its sound in one sentence.",
    "Invent a superhero whose power is mildly useful, in one sentence.",
    "Describe autumn to someone who has never seen it, in one sentence.",
]


def _audit() -> SuiteSpec:
    cases = [
        CaseSpec(f"audit-{i:02d}", _user(p), scenario="short", max_tokens=50)
        for i, p in enumerate(_AUDIT_PROMPTS)
    ]
    return SuiteSpec(
        "audit",
        1,
        "Thirty short open-ended prompts for the two-sample test at temperature 1.",
        cases,
    )


BUILTIN_SUITES: dict[str, SuiteSpec] = {
    s.name: s for s in (_smoke(), _coding(), _long_tail(), _scenarios(), _audit())
}


def get_suite(name: str) -> SuiteSpec:
    """A built-in suite by name; KeyError lists the names there are."""
    try:
        return BUILTIN_SUITES[name]
    except KeyError:
        raise KeyError(f"no built-in suite {name!r}; have: {', '.join(BUILTIN_SUITES)}") from None


def _last_user_text(messages: list[dict[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # OpenAI content parts
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content if isinstance(content, str) else None
    return None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_BY_TEXT: dict[str, CaseSpec] = {}
for _suite in BUILTIN_SUITES.values():
    for _case in _suite.cases:
        _text = _last_user_text(_case.messages)
        if _text is not None:
            _BY_TEXT.setdefault(_digest(_text), _case)


def find_case(messages: list[dict[str, Any]]) -> CaseSpec | None:
    """The built-in case whose last user message equals this request's, else None.

    Used by the simulated demo vendor to answer coding cases with their reference or weak
    solution. O(1): a dict keyed on the SHA-256 of the text. ``long_cold`` requests carry a
    filled nonce and so are not found (the demo vendor has no need to).
    """
    text = _last_user_text(messages)
    return None if text is None else _BY_TEXT.get(_digest(text))
