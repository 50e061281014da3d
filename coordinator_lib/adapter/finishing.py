"""A peek's finishing: ORDER BY, OFFSET, LIMIT and the final projection,
applied to the consolidated result (not maintained, as in Materialize)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from functools import cmp_to_key
from typing import Any

from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.compute.budget import held
from coordinator_lib.repr.interval import Interval
from coordinator_lib.repr.nan import is_nan, nan_ordered
from coordinator_lib.sql.plans import RowSetFinishing

Row = tuple[Any, ...]


def compare_values(a: Any, b: Any, desc: bool, nulls_last: bool) -> int:
    """PostgreSQL order: NULLs last ascending / first descending by default."""
    if a is None or b is None:
        if a is None and b is None:
            return 0
        return (1 if a is None else -1) * (1 if nulls_last else -1)
    if isinstance(a, Interval):  # '1 mon' and '30 days' are equal (interval_cmp)
        a, b = a.cmp_key(), b.cmp_key()
    elif is_nan(a) or is_nan(b):  # NaN equals NaN, above every number
        a, b = nan_ordered(a), nan_ordered(b)
    if a == b:
        return 0
    if isinstance(a, tuple) and isinstance(b, tuple):
        result = _compare_arrays(a, b)
    else:
        result = -1 if a < b else 1
    return -result if desc else result


def _compare_arrays(a: tuple, b: tuple) -> int:
    """PostgreSQL's array order: element by element, a NULL element above
    every value, a prefix below the longer array."""
    for x, y in zip(a, b, strict=False):
        result = compare_values(x, y, False, True)
        if result:
            return result
    return (len(a) > len(b)) - (len(a) < len(b))


def _expanded(rows: Iterable[tuple[Row, int]]) -> Iterator[Row]:
    """Each row as many times as its multiplicity."""
    for row, count in rows:
        if count < 0:
            raise AdapterError(
                f"Invalid data in source, saw retractions ({-count}) for row that does not "
                f"exist: {row}",
                code="XX000",
            )
        for _ in range(count):
            yield row


def finish_rows(rows: Iterable[tuple[Row, int]], finishing: RowSetFinishing) -> list[Row]:
    """Expand multiplicities, then sort, offset, limit and project."""
    return list(iter_finished(rows, finishing))


def iter_finished(rows: Iterable[tuple[Row, int]], finishing: RowSetFinishing) -> Iterator[Row]:
    """finish_rows as rows are consumed: without ORDER BY nothing is built
    first, so a large result is sent as it is expanded (a row with a
    multiplicity of millions is one row until then)."""
    if finishing.order_by:

        def compare(a: Row, b: Row) -> int:
            for order in finishing.order_by:
                result = compare_values(
                    a[order.column], b[order.column], order.desc, order.nulls_last
                )
                if result:
                    return result
            return 0

        whole = held(_expanded(rows))  # a sort holds every row: charged (53200)
        whole.sort(key=cmp_to_key(compare))
        ordered: Iterable[Row] = whole
    else:
        ordered = _expanded(rows)
    stop = None if finishing.limit is None else finishing.offset + finishing.limit
    finished = itertools.islice(ordered, finishing.offset, stop)
    project = finishing.project
    if project:
        return (tuple(row[i] for i in project) for row in finished)
    return finished
