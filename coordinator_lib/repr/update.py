"""Updates `(row, time, diff)` and consolidation.

Consolidation sorts by (row, time), adds up diffs and drops zeros; it is how
every layer turns a log of changes into the multiset it denotes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, NamedTuple

from coordinator_lib.repr.timestamp import Timestamp

Row = tuple[Any, ...]


class Update(NamedTuple):
    row: Row
    time: Timestamp
    diff: int


def _sort_key(value: Any) -> tuple[int, str, Any]:
    # NULLs first, then by type name so mixed types still sort deterministically.
    if value is None:
        return (0, "", 0)
    if isinstance(value, tuple):  # an array: element by element, NULLs first
        return (1, "tuple", tuple(_sort_key(v) for v in value))
    return (1, type(value).__name__, value)


def row_sort_key(row: Row) -> tuple[Any, ...]:
    return tuple(_sort_key(v) for v in row)


def consolidate(updates: Iterable[Update]) -> list[Update]:
    """Sum diffs per (row, time), drop zeros, sort by (row, time)."""
    sums: dict[tuple[Row, Timestamp], int] = defaultdict(int)
    for row, time, diff in updates:
        sums[(tuple(row), time)] += diff
    out = [Update(row, time, diff) for (row, time), diff in sums.items() if diff != 0]
    out.sort(key=lambda u: (row_sort_key(u.row), u.time))
    return out


def consolidate_rows(rows: Iterable[tuple[Row, int]]) -> list[tuple[Row, int]]:
    """Consolidate `(row, diff)` pairs (a snapshot): sum per row, drop zeros."""
    sums: dict[Row, int] = defaultdict(int)
    for row, diff in rows:
        sums[tuple(row)] += diff
    out = [(row, diff) for row, diff in sums.items() if diff != 0]
    out.sort(key=lambda rd: row_sort_key(rd[0]))
    return out
