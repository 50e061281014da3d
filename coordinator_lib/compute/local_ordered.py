"""TopK and Window evaluated in-process: the rows of one group or partition
ordered, then cut (TopK) or numbered and aggregated (Window). local_backend.py
runs them under the touched-keys rule (delta_rules.py); render_ordered.py
is the Spark evaluation, and both order ties the same way: by the whole row.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Callable
from decimal import Decimal
from functools import cmp_to_key
from typing import TYPE_CHECKING, Any

from coordinator_lib.compute.local_scalar import aggregate_values
from coordinator_lib.expr.relation import (
    Frame,
    FrameMode,
    OrderKey,
    TopK,
    Window,
    WindowExpr,
    WindowFunc,
)
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
        # arrays and lists as PostgreSQL orders them: element by element, a
        # NULL element above every value, a prefix below the longer array
        # (render_ordered orders them so on Spark: expr/functions/arrays.py)
        for x, y in zip(a, b, strict=False):
            if x is None or y is None:
                if x is None and y is None:
                    continue
                return y is None
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
        while j + 1 < n and _peers(flat[j + 1], order_cols, values):
            j += 1
        groups += 1
        for p in range(i, j + 1):
            group_start[p], group_end[p], dense[p] = i, j, groups
        i = j + 1
    peers = _Peers(flat, expr.order_key, group_start, group_end)
    columns = [_window_column(f, flat, peers, dense, types) for f in expr.functions]
    out: Counter[Row] = Counter()
    for p, row in enumerate(flat):
        out[row + tuple(c[p] for c in columns)] += 1
    return list(out.items())


def _peers(row: Row, order_cols: list[int], values: list[Any]) -> bool:
    """`row`'s ORDER BY values are `values` as the sort compares them: NaN
    equals NaN (two NaN objects are unequal to Python; rows read back from
    an arrangement or a constant carry NaN objects of their own)."""
    return [row[c] for c in order_cols] == values or all(
        compare_values(row[c], v, False, True) == 0 for c, v in zip(order_cols, values, strict=True)
    )


class _Peers:
    """One partition's rows in order with their peer groups: where each
    function's frame starts and ends for each row."""

    def __init__(
        self,
        flat: list[Row],
        order_key: tuple[OrderKey, ...],
        group_start: list[int],
        group_end: list[int],
    ) -> None:
        self.flat = flat
        self.order_key = order_key
        self.group_start = group_start
        self.group_end = group_end
        # RANGE offsets: the one ORDER BY value of each row, negated when
        # descending so the non-NULL ones [a, b) ascend (NULLs sort together
        # before or after them).
        self.keys: list[Any] = []
        self.a = self.b = 0
        if len(order_key) == 1:
            key = order_key[0]
            self.keys = [
                None if row[key.column] is None else (-1 if key.desc else 1) * row[key.column]
                for row in flat
            ]
            present = [q for q, k in enumerate(self.keys) if k is not None]
            self.a, self.b = (present[0], present[-1] + 1) if present else (0, 0)

    def frame(self, frame: Frame, p: int) -> range:
        """The positions in row `p`'s frame (empty when it ends before it starts)."""
        last = len(self.flat) - 1
        if frame.mode is FrameMode.ROWS:
            lo = 0 if frame.start is None else max(p + int(frame.start), 0)
            hi = last if frame.end is None else min(p + int(frame.end), last)
            return range(lo, hi + 1)
        lo = 0 if frame.start is None else self._range_bound(frame.start, p, True)
        hi = last if frame.end is None else self._range_bound(frame.end, p, False)
        return range(lo, hi + 1)

    def _range_bound(self, offset: int | Decimal, p: int, start: bool) -> int:
        """RANGE `offset` (signed, in the ORDER BY direction) from row p: its
        peers' edge for 0 or a NULL value; else the first (start) or last
        (end) row at or past / at or before p's value plus the offset in sort
        order, where NULLs sort as the ORDER BY puts them (so NULLS FIRST rows
        are before every bound, NULLS LAST rows after), as PostgreSQL does."""
        value = self.keys[p] if self.keys else None
        if offset == 0 or value is None:
            return self.group_start[p] if start else self.group_end[p]
        bound = value + (float(offset) if isinstance(value, float) else offset)
        if start:
            return bisect.bisect_left(self.keys, bound, self.a, self.b)
        return bisect.bisect_right(self.keys, bound, self.a, self.b) - 1


def _window_column(
    func: WindowExpr,
    flat: list[Row],
    peers: _Peers,
    dense: list[int],
    types: tuple[ColumnType, ...],
) -> list[Any]:
    n = len(flat)
    kind = func.func
    if kind is WindowFunc.ROW_NUMBER:
        return [p + 1 for p in range(n)]
    if kind is WindowFunc.RANK:
        return [peers.group_start[p] + 1 for p in range(n)]
    if kind is WindowFunc.DENSE_RANK:
        return list(dense)
    if kind in (WindowFunc.LAG, WindowFunc.LEAD):
        value, default = func.args[0], func.default_column()
        by = func.offset_column()
        out: list[Any] = []
        for p in range(n):
            offset = func.offset if by is None else flat[p][by]
            if offset is None:  # a NULL offset: NULL, as in PostgreSQL
                out.append(None)
                continue
            q = p - offset if kind is WindowFunc.LAG else p + offset
            if 0 <= q < n:
                out.append(flat[q][value])
            else:
                out.append(None if default is None else flat[p][default])
        return out
    frames = [peers.frame(func.frame, p) for p in range(n)]
    if kind in (WindowFunc.FIRST_VALUE, WindowFunc.LAST_VALUE, WindowFunc.NTH_VALUE):
        at = {WindowFunc.FIRST_VALUE: 0, WindowFunc.LAST_VALUE: -1}.get(kind)
        if at is None:
            at = (func.offset or 1) - 1
        value = func.args[0]
        return [
            flat[frame[at]][value] if -len(frame) <= at < len(frame) else None for frame in frames
        ]
    aggregate = func.aggregate()
    assert aggregate is not None, kind
    by_frame: dict[range, Any] = {}
    for frame in frames:
        if frame not in by_frame:
            by_frame[frame] = aggregate_values(aggregate, [(flat[q], 1) for q in frame], types)
    return [by_frame[frame] for frame in frames]


def evaluate(expr: TopK | Window, rows: Rows) -> Rows:
    if isinstance(expr, TopK):
        return topk_rows(expr, rows)
    return window_rows(expr, rows, expr.input.desc.types)
