"""A statement's budget for in-process evaluation: cancellation and memory.

Why: the local engine runs Python loops over rows; a cross join produces
millions of rows a second, and nothing else looks at it while it runs.
Those loops settle with the running statement's budget every `CHECK_EVERY`
rows of work (`Tally`): that is where a cancel request or
`statement_timeout` stops it (the adapter's `check` raises), and where the
memory held so far is weighed against `max_query_memory`.

The adapter installs the budget around a statement (`active`), and around
each pull of the rows it streams to the client afterwards, so rows computed
as the client reads them (a one-off query's streamed rows) settle with the
statement that reads them; code that runs outside a statement sees
`UNLIMITED`, and so does view maintenance whoever runs it (a read that
steps the views it waits for: `Coordinator.step_once`).

Memory is an estimate of what is held, not of what flows through: a list
built (`held`), a join's index, a group's rows are charged; rows streamed
on to the client are not. Each charge weighs one row (its containers and
values, `sys.getsizeof`) times the rows added since the last settle, and
the total only grows (intermediate lists are counted even after they are
freed), so it bounds the peak from above.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar, cast

T = TypeVar("T")

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


def pulled(rows: Iterable[T], budget: QueryBudget) -> Iterator[T]:
    """`rows`, each computed with `budget` active: a statement's result
    streamed to the client after the statement returned."""
    iterator = iter(rows)
    try:
        while True:
            token = _current.set(budget)
            try:
                row = next(iterator, _END)
            finally:
                _current.reset(token)
            if row is _END:
                return
            yield cast(T, row)
    finally:  # a reader that stops early stops the producer (a SUBSCRIBE's) now
        close = getattr(iterator, "close", None)
        if close is not None:
            close()


_END = object()


class Tally:
    """Work done (`add`, per input row: how many rows it looked at) and
    rows held (`hold`) since the last settle; settles with the running
    statement's budget (`current()`, looked up each time: a streamed
    query's rows may be pulled by a later statement, a cursor's FETCH)."""

    __slots__ = ("held", "sample", "work")

    def __init__(self) -> None:
        self.work = 0
        self.held = 0
        self.sample: Any = None

    def add(self, work: int = 1) -> None:
        self.work += work
        if self.work >= CHECK_EVERY:
            self.settle()

    def hold(self, item: Any) -> None:
        """One more row like `item` is kept until the statement ends."""
        self.held += 1
        self.sample = item
        self.add()

    def settle(self) -> None:
        self.work = 0
        if self.held:
            current().charge(self.held, self.sample)
            self.held = 0
        else:
            current().check()


def held(items: Iterable[T]) -> list[T]:
    """`items` as a list, charged as it grows."""
    out: list[T] = []
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, CHECK_EVERY)):
        out += chunk
        current().charge(len(chunk), chunk[-1])
    return out


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
