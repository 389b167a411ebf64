"""The ``coding`` suite: ten cases run against unit tests in the sandbox; half long-tail.

Each case carries its unit tests, a reference solution (must pass) and, for the hard ones, a
weak solution (must fail): the simulated vendor's distilled tier answers with the weak one."""

from __future__ import annotations

from evals.records import CaseSpec, SuiteSpec
from evals.suites.text import user_message

_REPLY = "\n\nReply with a single ```python code block and nothing else."


def _coding_case(key: str, prompt: str, entry: str, tests: str, ref: str, weak: str = "",
                 hard: bool = False) -> CaseSpec:  # fmt: skip
    return CaseSpec(
        key=key,
        messages=user_message(prompt.strip() + _REPLY),
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


def build() -> SuiteSpec:
    return SuiteSpec(
        "coding",
        1,
        "Ten coding cases run against unit tests in the sandbox; half are long-tail (multi-step "
        "debugging, a rare API, stacked constraints, cross-file consistency, ordering logic).",
        _EASY + _HARD,
    )
