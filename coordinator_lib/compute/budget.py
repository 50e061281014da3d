"""A statement's budget for in-process evaluation: cancellation and memory.

Why: the local engine builds Python lists row by row; a cross join can grow
one by millions of rows a second, and nothing else looks at it while it
runs. The loops that materialize rows settle with the statement's budget
every `CHECK_EVERY` rows of work: that is where a cancel request or
`statement_timeout` stops it (the adapter's `check` raises), and where the
memory it has materialized so far is weighed against `max_query_memory`.

The adapter installs the budget around a statement (`active`); code that
runs outside a statement (view maintenance) sees `UNLIMITED`.

Memory is an estimate: each settle weighs the newest row (its containers
and values, `sys.getsizeof`) times the rows added since the last settle,
and the total only grows (intermediate lists are counted even after they
are freed), so it bounds the peak from above.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

CHECK_EVERY = 4096
"""Rows of work between two settles: a few milliseconds of Python."""


def _no_check() -> None:
    return None


class QueryOutOfMemory(Exception):
    """A statement materialized more than its `max_query_memory` (53200)."""

    code = "53200"

    def __init__(self, limit: int) -> None:
        self.message = (
            f"query needs more than max_query_memory ({format_bytes(limit)}) to evaluate in-process"
        )
        self.hint = (
            "Add a filter, an aggregate or a LIMIT, or raise the limit with "
            "SET max_query_memory = '...'."
        )
        super().__init__(self.message)


class QueryBudget:
    """What one statement may still do: `check()` raises when it was canceled
    or ran out of time; `charge` raises QueryOutOfMemory past `max_bytes`."""

    def __init__(self, check: Callable[[], None] = _no_check, max_bytes: int | None = None):
        self.check = check
        self.max_bytes = max_bytes
        self.used = 0

    def charge(self, rows: int, sample: Any) -> None:
        """`rows` more rows like `sample` are held; then check."""
        if rows > 0 and self.max_bytes is not None:
            self.used += rows * (estimate_size(sample) + 8)  # + the list's slot
            if self.used > self.max_bytes:
                raise QueryOutOfMemory(self.max_bytes)
        self.check()


UNLIMITED = QueryBudget()
_current: contextvars.ContextVar[QueryBudget] = contextvars.ContextVar(
    "query_budget", default=UNLIMITED
)


def current() -> QueryBudget:
    """The running statement's budget (UNLIMITED outside a statement)."""
    return _current.get()


@contextlib.contextmanager
def active(budget: QueryBudget) -> Iterator[QueryBudget]:
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


class Tally:
    """A growing output list and the work done on it since the last settle:
    `add(work)` per input row (work: how many rows it looked at)."""

    __slots__ = ("budget", "charged", "out", "work")

    def __init__(self, out: list[Any], budget: QueryBudget | None = None) -> None:
        self.budget = budget if budget is not None else current()
        self.out = out
        self.charged = len(out)
        self.work = 0

    def add(self, work: int = 1) -> None:
        self.work += work
        if self.work >= CHECK_EVERY:
            self.settle()

    def settle(self) -> None:
        self.work = 0
        size = len(self.out)
        if size > self.charged:
            self.budget.charge(size - self.charged, self.out[-1])
            self.charged = size
        else:
            self.budget.check()


def charge_list(rows: list[Any]) -> list[Any]:
    """Charge a list built in one go (a comprehension); returns it."""
    if rows:
        current().charge(len(rows), rows[-1])
    return rows


def estimate_size(value: Any, depth: int = 0) -> int:
    """Bytes of `value` with the tuples and lists in it (three levels)."""
    size = sys.getsizeof(value)
    if depth < 3 and isinstance(value, tuple | list):
        size += sum(estimate_size(v, depth + 1) for v in value)
    return size


def physical_memory() -> int:
    """The machine's RAM in bytes (8 GiB if the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def format_bytes(n: int) -> str:
    for unit, shift in (("GB", 30), ("MB", 20), ("kB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return f"{n}B"
