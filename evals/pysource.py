"""The one Python-source parser of the product: every ``ast.parse`` goes through ``parse``.

CPython 3.11.7 raises ``SystemError: AST constructor recursion depth mismatch`` at random when
two threads build AST objects at once (python/cpython gh-106905: the constructor kept its
recursion depth in interpreter-wide state). The sandbox checks answers from several threads
(``run_unit_tests``; the sandbox worker runs ``--pool=threads``), so an evaluation could fail for
no fault of the answer. ``parse`` serialises the calls with one lock on every version: a parse of
a case's tests takes well under a millisecond, and one rule needs no claim about which patch
release carries the fix. The sandbox's judge (``sandbox_judge.py``) parses with ``ast`` itself: it
runs as ``python -I -S``, a one-thread process that may import nothing from the product."""

from __future__ import annotations

import ast
import threading
from typing import Literal

_LOCK = threading.Lock()


def parse(source: str, mode: Literal["exec", "eval"] = "exec") -> ast.AST:
    """``ast.parse(source, mode=mode)``, one thread at a time (see the module docstring)."""
    with _LOCK:
        return ast.parse(source, mode=mode)


def parse_module(source: str) -> ast.Module:
    """``parse`` of a whole file or code block, typed as the module it is."""
    tree = parse(source)
    assert isinstance(tree, ast.Module)
    return tree


def parse_expression(source: str) -> ast.Expression:
    """``parse`` of one expression (``mode="eval"``)."""
    tree = parse(source, mode="eval")
    assert isinstance(tree, ast.Expression)
    return tree
