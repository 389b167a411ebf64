"""The ``long_tail`` suite: cases checked by verifiable constraints (``evals.constraints``)."""

from __future__ import annotations

from typing import Any

from evals.records import CaseSpec, SuiteSpec
from evals.suites.text import user_message


def _lt(key: str, prompt: str, constraints: list[dict[str, Any]], *, category: str = "long_tail",
        max_tokens: int = 300) -> CaseSpec:  # fmt: skip
    return CaseSpec(
        key=key,
        messages=user_message(prompt.strip()),
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


def build() -> SuiteSpec:
    return SuiteSpec(
        "long_tail",
        1,
        "Long-tail cases checked by verifiable constraints: multi-step reasoning, debugging, "
        "rare APIs and old versions, stacked constraints, cross-file consistency.",
        _LONG_TAIL,
    )
