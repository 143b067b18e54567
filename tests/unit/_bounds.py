"""Shared by the tests of lab's input limits: a time bound, and what a one-line message is.

The bounds are generous (the host runs guests under TCG beside the tests): they tell a
linear parser (milliseconds) from a quadratic one (tens of seconds on 400 KB), nothing finer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

# Words that mean Python's own message leaked out instead of lab saying what is wrong.
PYTHON_WORDING = (
    "Traceback",
    "invalid literal",
    "int()",
    "base 10",
    "NoneType",
    "has no attribute",
    "KeyError",
    "IndexError",
    "not subscriptable",
    "unhashable",
    "range() arg",
    "Exceeds the limit",
)


def one_line(msg: str) -> str:
    """*msg* is one line of lab's words, not Python's."""
    assert msg and "\n" not in msg and "\r" not in msg, msg
    for w in PYTHON_WORDING:
        assert w not in msg, msg
    return msg


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """The block finishes (returning or raising) in less than *seconds*."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        took = time.perf_counter() - t0
        assert took < seconds, f"took {took:.2f}s, bound {seconds}s"
