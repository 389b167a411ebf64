"""The product's one parser: every ``ast.parse`` in the product goes through it, and it parses
from many threads at once without CPython 3.11.7's "AST constructor recursion depth mismatch"."""

from __future__ import annotations

import ast
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evals import pysource
from evals.pysource import parse_module
from tests.support import ROOT

SOURCE = (Path(ROOT) / "evals" / "sandbox_judge.py").read_text()


def test_a_parse_waits_while_another_thread_is_parsing() -> None:
    """The race needs two AST constructors at once; holding the parser's lock (as a parse in
    another thread does) keeps a second parse from starting until it is released."""
    done = threading.Event()
    worker = threading.Thread(target=lambda: (parse_module(SOURCE), done.set()))
    with pysource._LOCK:
        worker.start()
        assert not done.wait(0.3), "a parse ran while another held the parser"
    assert done.wait(10)
    worker.join()


def test_it_parses_the_same_tree_from_sixteen_threads_at_once() -> None:
    expected = ast.dump(parse_module(SOURCE))
    with ThreadPoolExecutor(16) as pool:
        dumps = list(pool.map(lambda _: ast.dump(parse_module(SOURCE)), range(200)))
    assert dumps == [expected] * 200


# The judge is the one exception: it runs as ``python -I -S sandbox_judge.py``, a process of its
# own with one thread that can import nothing from the product, so no other thread can race it.
OWN_PROCESS = {"pysource.py", "sandbox_judge.py"}


def test_no_product_module_calls_ast_parse_itself() -> None:
    callers = [
        str(path.relative_to(ROOT))
        for folder in ("evals", "monitor")
        for path in (Path(ROOT) / folder).rglob("*.py")
        if path.name not in OWN_PROCESS and re.search(r"\bast\.parse\(", path.read_text())
    ]
    assert callers == []
