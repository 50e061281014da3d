"""TopK and Window evaluated on Spark: each group's (TopK) or partition's
(Window) output rows at each point, from its rows there (spark_backend.py
runs them under the touched-keys rule, delta_rules.py).

Both operators order ties by the whole row (ascending, NULLs last), as
local_ordered.py does, so the backends agree row for row: a step on one
retracts exactly what a step on the other inserted.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, WindowSpec
from pyspark.sql import Window as SparkWindow
from pyspark.sql import functions as F

from coordinator_lib.compute.scalar import column_name
from coordinator_lib.compute.spark_aggregates import (
    aggregate_column,
    array_agg_column,
    sum_overflow,
)
from coordinator_lib.compute.spark_errors import ERROR, first_error
from coordinator_lib.compute.spark_frames import POINT, data_columns
from coordinator_lib.expr.functions.arrays import spark_order_key
from coordinator_lib.expr.relation import (
    AggregateFunc,
    Frame,
    FrameMode,
    OrderKey,
    RelationExpr,
    TopK,
    Window,
    WindowExpr,
    WindowFunc,
)
from coordinator_lib.persist.spark_batches import spark_type
from coordinator_lib.repr.relation import ColumnType

COUNT = "__m"  # a row's multiplicity at a point
OUT = "__c"  # an output row's multiplicity at a point


def _ordered(column: int, types: tuple[ColumnType, ...]) -> SparkColumn:
    """A column as it orders: an array or list by PostgreSQL's rule (NULL
    elements last, local_ordered._less), where Spark puts them first."""
    value = F.col(column_name(column))
    return spark_order_key(value) if types[column].scalar_type.element is not None else value


def _sort_column(key: OrderKey, types: tuple[ColumnType, ...]) -> SparkColumn:
    column = _ordered(key.column, types)
    if key.desc:
        return column.desc_nulls_last() if key.nulls_last else column.desc_nulls_first()
    return column.asc_nulls_last() if key.nulls_last else column.asc_nulls_first()


def _row_order(order_key: tuple[OrderKey, ...], types: tuple[ColumnType, ...]) -> list[SparkColumn]:
    """`order_key`, then every column ascending with NULLs last (local_ordered.row_order)."""
    return [_sort_column(k, types) for k in order_key] + [
        _ordered(i, types).asc_nulls_last() for i in range(len(types))
    ]


def _topk(expr: TopK, state: DataFrame, key_cols: list[str]) -> DataFrame:
    arity = expr.input.desc.arity
    before = (
        SparkWindow.partitionBy(*key_cols, POINT)
        .orderBy(*_row_order(expr.order_key, expr.input.desc.types))
        .rowsBetween(SparkWindow.unboundedPreceding, -1)
    )
    start = F.coalesce(F.sum(COUNT).over(before), F.lit(0))
    stop = start + F.col(COUNT)
    low = F.greatest(start, F.lit(expr.offset))
    high = stop if expr.limit is None else F.least(stop, F.lit(expr.offset + expr.limit))
    kept = state.select(*data_columns(arity), POINT, (high - low).cast("long").alias(OUT))
    return kept.filter(F.col(OUT) > 0)


NUMBER = "__n"  # a row copy's position in its partition (1-based)


def _frame_spec(
    expr: Window, frame: Frame, in_order: WindowSpec, partition: list[str]
) -> WindowSpec:
    """A function's frame over its partition, as local_ordered._Peers.frame
    bounds it: ROWS over the row order (ties by the whole row), RANGE over
    the ORDER BY values (peers), the whole partition without ORDER BY."""
    lo = SparkWindow.unboundedPreceding if frame.start is None else int(frame.start)
    hi = SparkWindow.unboundedFollowing if frame.end is None else int(frame.end)
    if frame.mode is FrameMode.ROWS:
        return in_order.rowsBetween(lo, hi)
    if not expr.order_key:  # every row a peer: the whole partition
        return SparkWindow.partitionBy(*partition)
    by_value = SparkWindow.partitionBy(*partition).orderBy(
        *[_sort_column(k, expr.input.desc.types) for k in expr.order_key]
    )
    return by_value.rangeBetween(lo, hi)


def _window(expr: Window, state: DataFrame, key_cols: list[str]) -> DataFrame:
    arity = expr.input.desc.arity
    data = data_columns(arity)
    # One row per copy: row_number, lag, lead and ROWS frames count copies.
    rows = state.withColumn(
        "__copy", F.explode(F.array_repeat(F.lit(0), F.col(COUNT).cast("int")))
    ).withColumn(COUNT, F.lit(1).cast("long"))
    partition = [*key_cols, POINT]
    in_order = SparkWindow.partitionBy(*partition).orderBy(
        *_row_order(expr.order_key, expr.input.desc.types)
    )
    rows = rows.withColumn(NUMBER, F.row_number().over(in_order))
    number = F.col(NUMBER)
    whole = in_order.rowsBetween(SparkWindow.unboundedPreceding, SparkWindow.unboundedFollowing)
    peers = (
        SparkWindow.partitionBy(*partition).orderBy(
            *[_sort_column(k, expr.input.desc.types) for k in expr.order_key]
        )
        if expr.order_key
        else SparkWindow.partitionBy(*partition)
    )
    size = F.count(F.lit(1)).over(SparkWindow.partitionBy(*partition))

    def at(position: SparkColumn, column: int, valid: SparkColumn) -> SparkColumn:
        """`column`'s value in the partition's row at 1-based `position`."""
        values = F.collect_list(F.struct(F.col(column_name(column)).alias("v"))).over(whole)
        return F.when(valid, F.element_at(values, position.cast("int"))["v"])

    out_types = expr.desc.types[arity:]
    values: list[SparkColumn] = []
    errors: list[SparkColumn] = []  # per aggregate that can fail, its frame's error
    for j, (func, out_type) in enumerate(zip(expr.functions, out_types, strict=True)):
        kind = func.func
        value: SparkColumn
        if kind is WindowFunc.ROW_NUMBER:
            value = number
        elif kind is WindowFunc.RANK:
            value = F.rank().over(peers) if expr.order_key else F.lit(1)
        elif kind is WindowFunc.DENSE_RANK:
            value = F.dense_rank().over(peers) if expr.order_key else F.lit(1)
        elif kind in (WindowFunc.LAG, WindowFunc.LEAD):
            value = _lag_lead(func, number, size, in_order, at)
        elif func.frame.empty:  # Spark refuses such frames: what an empty frame gives
            value = F.lit(0) if kind is WindowFunc.COUNT else F.lit(None)
        elif kind in (WindowFunc.FIRST_VALUE, WindowFunc.LAST_VALUE, WindowFunc.NTH_VALUE):
            frame = _frame_spec(expr, func.frame, in_order, partition)
            lo, hi = F.min(number).over(frame), F.max(number).over(frame)
            if kind is WindowFunc.FIRST_VALUE:
                position = lo
            elif kind is WindowFunc.LAST_VALUE:
                position = hi
            else:
                position = lo + F.lit((func.offset or 1) - 1)
            value = at(position, func.args[0], position.isNotNull() & (position <= hi))
        else:
            frame = _frame_spec(expr, func.frame, in_order, partition)
            value, error = _aggregate(func, out_type, frame)
            if error is not None:
                errors.append(error.alias(f"__e{len(errors)}"))
        values.append(value.cast(spark_type(out_type.scalar_type)).alias(column_name(arity + j)))
    numbered = rows.select(*data, POINT, *values, *errors)
    out = data_columns(expr.desc.arity)
    count = F.count(F.lit(1)).cast("long").alias(OUT)
    if not errors:
        return numbered.groupBy(*out, POINT).agg(count)
    # A frame's error is its partition's (at that point), as the in-process
    # engine fails the partition's evaluation on it: the first function's.
    whole_partition = SparkWindow.partitionBy(*partition)
    error = first_error([F.max(f"__e{i}").over(whole_partition) for i in range(len(errors))])
    assert error is not None
    failed = numbered.select(*out, POINT, error.alias(ERROR))
    return failed.groupBy(*out, POINT, ERROR).agg(count)


def _lag_lead(
    func: WindowExpr,
    number: SparkColumn,
    size: SparkColumn,
    in_order: WindowSpec,
    at: Callable[[SparkColumn, int, SparkColumn], SparkColumn],
) -> SparkColumn:
    """lag/lead: the value `offset` rows before/after, else the default (a
    NULL offset column gives NULL, as local_ordered does)."""
    arg = F.col(column_name(func.args[0]))
    default_column = func.default_column()
    default = F.col(column_name(default_column)) if default_column is not None else F.lit(None)
    by = func.offset_column()
    if by is not None:
        offset = F.col(column_name(by))
        target = number - offset if func.func is WindowFunc.LAG else number + offset
        inside = (target >= 1) & (target <= size)
        return (
            F.when(offset.isNull(), F.lit(None))
            .when(inside, at(target, func.args[0], F.lit(True)))
            .otherwise(default)
        )
    n = func.offset or 0
    if not n:
        return arg
    if func.func is WindowFunc.LAG:
        return F.when(number > n, F.lag(arg, n).over(in_order)).otherwise(default)
    return F.when(number + n <= size, F.lead(arg, n).over(in_order)).otherwise(default)


def _aggregate(
    func: WindowExpr, out_type: ColumnType, frame: WindowSpec
) -> tuple[SparkColumn, SparkColumn | None]:
    """An aggregate over its frame, computed as Reduce computes it
    (spark_aggregates.py), and its own error there (a sum's overflow), or
    None if it cannot fail."""
    aggregate = func.aggregate()
    assert aggregate is not None, func.func
    value = F.col(column_name(func.args[0]))

    def over(column: SparkColumn) -> SparkColumn:
        return column.over(frame)

    if aggregate.func is AggregateFunc.ARRAY_AGG:  # a struct (f0 the value, f1... the keys)
        fields = [F.col(column_name(a)).alias(f"f{i}") for i, a in enumerate(func.args)]
        return array_agg_column(aggregate, F.struct(*fields), F.lit(True), over), None
    out = out_type.scalar_type
    if aggregate.func is not AggregateFunc.COUNT:
        value = value.cast(spark_type(out))
    column = aggregate_column(aggregate, value, F.lit(True), out, over)
    if aggregate.func is AggregateFunc.SUM:  # past its type: NULL here, and the error
        column = column.try_cast(spark_type(out))
    return column, sum_overflow(aggregate, value, out, over)


def ordered_values(expr: TopK | Window, state: DataFrame, key_cols: list[str]) -> DataFrame:
    """Per (key, point): the operator's output rows with their multiplicity
    (`OUT`), from the rows present there with theirs (`COUNT`). A Window
    whose aggregates can fail (a SUM) has a column `ERROR` too: non-NULL on
    every row of a partition whose evaluation fails at that point, which
    is then its partition's error in place of its rows."""
    if isinstance(expr, TopK):
        return _topk(expr, state, key_cols)
    return _window(expr, state, key_cols)


def stacked(expr: RelationExpr) -> bool:
    """Whether a TopK or Window is among `expr`'s inputs, at any depth."""
    return any(isinstance(c, TopK | Window) or stacked(c) for c in expr.inputs())
