"""TopK and Window evaluated in-process: the rows of one group or partition
ordered, then cut (TopK) or numbered and aggregated (Window). local_backend.py
runs them under the touched-keys rule (delta_rules.py); render_ordered.py
is the Spark evaluation, and both order ties the same way: by the whole row.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from functools import cmp_to_key
from typing import TYPE_CHECKING, Any

from coordinator_lib.compute.local_scalar import aggregate_values
from coordinator_lib.expr.relation import (
    AggregateExpr,
    OrderKey,
    TopK,
    Window,
    WindowExpr,
    WindowFunc,
)
from coordinator_lib.expr.scalar import Column
from coordinator_lib.repr.relation import ColumnType
from coordinator_lib.repr.update import Row

if TYPE_CHECKING:
    pass

Rows = list[tuple[Row, int]]


def _less(a: Any, b: Any) -> bool:
    """a < b as Spark orders values: NaN above every other number."""
    if isinstance(a, float) and math.isnan(a):
        return False
    if isinstance(b, float) and math.isnan(b):
        return not (isinstance(a, float) and math.isnan(a))
    if isinstance(a, tuple) and isinstance(b, tuple):
        # arrays as Spark orders them: element by element, a NULL element
        # below every value, a prefix below the longer array
        for x, y in zip(a, b, strict=False):
            if x is None or y is None:
                if x is None and y is None:
                    continue
                return x is None
            if _less(x, y):
                return True
            if _less(y, x):
                return False
        return len(a) < len(b)
    try:
        return bool(a < b)
    except TypeError:
        return str(a) < str(b)


def compare_values(a: Any, b: Any, desc: bool, nulls_last: bool) -> int:
    if a is None or b is None:
        if a is None and b is None:
            return 0
        return (1 if a is None else -1) * (1 if nulls_last else -1)
    if _less(a, b):
        result = -1
    elif _less(b, a):
        result = 1
    else:
        return 0
    return -result if desc else result


def row_order(order_key: tuple[OrderKey, ...]) -> Callable[[Row], Any]:
    """Sort key: `order_key`, then every column ascending with NULLs last."""

    def compare(a: Row, b: Row) -> int:
        for key in order_key:
            result = compare_values(a[key.column], b[key.column], key.desc, key.nulls_last)
            if result:
                return result
        for x, y in zip(a, b, strict=True):
            result = compare_values(x, y, False, True)
            if result:
                return result
        return 0

    return cmp_to_key(compare)


def topk_rows(expr: TopK, rows: Rows) -> Rows:
    """One group's rows (multiplicities > 0) cut to positions [offset, offset + limit)."""
    out: Rows = []
    end = None if expr.limit is None else expr.offset + expr.limit
    position = 0
    order = row_order(expr.order_key)
    for row, count in sorted(rows, key=lambda rc: order(rc[0])):
        start, stop = position, position + count
        position = stop
        keep = min(stop, end if end is not None else stop) - max(start, expr.offset)
        if keep > 0:
            out.append((row, keep))
        if end is not None and position >= end:
            break
    return out


def window_rows(expr: Window, rows: Rows, types: tuple[ColumnType, ...]) -> Rows:
    """One partition's rows (multiplicities > 0), each copy with its values."""
    flat: list[Row] = []
    order = row_order(expr.order_key)
    for row, count in sorted(rows, key=lambda rc: order(rc[0])):
        flat += [row] * count
    n = len(flat)
    order_cols = [k.column for k in expr.order_key]
    # Peer groups: runs of equal ORDER BY values (all rows without ORDER BY).
    group_start = [0] * n
    group_end = [0] * n
    dense = [0] * n
    i = 0
    groups = 0
    while i < n:
        j = i
        values = [flat[i][c] for c in order_cols]
        while j + 1 < n and [flat[j + 1][c] for c in order_cols] == values:
            j += 1
        groups += 1
        for p in range(i, j + 1):
            group_start[p], group_end[p], dense[p] = i, j, groups
        i = j + 1
    columns = [
        _window_column(f, flat, group_start, group_end, dense, types) for f in expr.functions
    ]
    out: Counter[Row] = Counter()
    for p, row in enumerate(flat):
        out[row + tuple(c[p] for c in columns)] += 1
    return list(out.items())


def _window_column(
    func: WindowExpr,
    flat: list[Row],
    group_start: list[int],
    group_end: list[int],
    dense: list[int],
    types: tuple[ColumnType, ...],
) -> list[Any]:
    n = len(flat)
    kind = func.func
    if kind is WindowFunc.ROW_NUMBER:
        return [p + 1 for p in range(n)]
    if kind is WindowFunc.RANK:
        return [group_start[p] + 1 for p in range(n)]
    if kind is WindowFunc.DENSE_RANK:
        return list(dense)
    if kind in (WindowFunc.LAG, WindowFunc.LEAD):
        step = -func.offset if kind is WindowFunc.LAG else func.offset
        value, default = func.args[0], func.args[1] if len(func.args) > 1 else None
        out = []
        for p in range(n):
            q = p + step
            if 0 <= q < n:
                out.append(flat[q][value])
            else:
                out.append(None if default is None else flat[p][default])
        return out
    if kind is WindowFunc.FIRST_VALUE:
        return [flat[0][func.args[0]] for _ in range(n)]
    if kind is WindowFunc.LAST_VALUE:
        return [flat[group_end[p]][func.args[0]] for p in range(n)]
    aggregate = func.aggregate()
    assert aggregate is not None, kind
    agg = AggregateExpr(aggregate, Column(func.args[0]))
    by_end: dict[int, Any] = {}
    out = []
    for p in range(n):
        end = group_end[p]
        if end not in by_end:
            by_end[end] = aggregate_values(agg, [(r, 1) for r in flat[: end + 1]], types)
        out.append(by_end[end])
    return out


def evaluate(expr: TopK | Window, rows: Rows) -> Rows:
    if isinstance(expr, TopK):
        return topk_rows(expr, rows)
    return window_rows(expr, rows, expr.input.desc.types)
