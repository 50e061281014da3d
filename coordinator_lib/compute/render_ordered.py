"""TopK and Window evaluated on Spark: each group's (TopK) or partition's
(Window) output rows at each point, from its rows there (spark_backend.py
runs them under the touched-keys rule, delta_rules.py).

Both operators order ties by the whole row (ascending, NULLs last), as
local_ordered.py does, so the backends agree row for row: a step on one
retracts exactly what a step on the other inserted.
"""

from __future__ import annotations

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import Window as SparkWindow
from pyspark.sql import functions as F

from coordinator_lib.compute.scalar import column_name
from coordinator_lib.compute.spark_frames import POINT, data_columns
from coordinator_lib.expr.relation import OrderKey, RelationExpr, TopK, Window, WindowFunc
from coordinator_lib.persist.spark_batches import spark_type

COUNT = "__m"  # a row's multiplicity at a point
OUT = "__c"  # an output row's multiplicity at a point


def _sort_column(key: OrderKey) -> SparkColumn:
    column = F.col(column_name(key.column))
    if key.desc:
        return column.desc_nulls_last() if key.nulls_last else column.desc_nulls_first()
    return column.asc_nulls_last() if key.nulls_last else column.asc_nulls_first()


def _row_order(order_key: tuple[OrderKey, ...], arity: int) -> list[SparkColumn]:
    """`order_key`, then every column ascending with NULLs last (local_ordered.row_order)."""
    return [_sort_column(k) for k in order_key] + [
        F.col(c).asc_nulls_last() for c in data_columns(arity)
    ]


def _topk(expr: TopK, state: DataFrame, key_cols: list[str]) -> DataFrame:
    arity = expr.input.desc.arity
    before = (
        SparkWindow.partitionBy(*key_cols, POINT)
        .orderBy(*_row_order(expr.order_key, arity))
        .rowsBetween(SparkWindow.unboundedPreceding, -1)
    )
    start = F.coalesce(F.sum(COUNT).over(before), F.lit(0))
    stop = start + F.col(COUNT)
    low = F.greatest(start, F.lit(expr.offset))
    high = stop if expr.limit is None else F.least(stop, F.lit(expr.offset + expr.limit))
    kept = state.select(*data_columns(arity), POINT, (high - low).cast("long").alias(OUT))
    return kept.filter(F.col(OUT) > 0)


def _window(expr: Window, state: DataFrame, key_cols: list[str]) -> DataFrame:
    arity = expr.input.desc.arity
    data = data_columns(arity)
    # One row per copy: row_number, lag and lead count copies.
    rows = state.withColumn("__copy", F.explode(F.array_repeat(F.lit(0), F.col(COUNT).cast("int"))))
    partition = [*key_cols, POINT]
    in_order = SparkWindow.partitionBy(*partition).orderBy(*_row_order(expr.order_key, arity))
    order_cols = [column_name(k.column) for k in expr.order_key]
    peers = (
        SparkWindow.partitionBy(*partition).orderBy(*[_sort_column(k) for k in expr.order_key])
        if expr.order_key
        else SparkWindow.partitionBy(*partition)
    )
    whole_peer_group = (
        SparkWindow.partitionBy(*partition, *order_cols)
        .orderBy(*[F.col(c).asc_nulls_last() for c in data])
        .rowsBetween(SparkWindow.unboundedPreceding, SparkWindow.unboundedFollowing)
    )
    number = F.row_number().over(in_order)
    size = F.count(F.lit(1)).over(SparkWindow.partitionBy(*partition))
    out_types = expr.desc.types[arity:]
    values: list[SparkColumn] = []
    for j, (func, out_type) in enumerate(zip(expr.functions, out_types, strict=True)):
        kind = func.func
        arg = F.col(column_name(func.args[0])) if func.args else None
        value: SparkColumn
        if kind is WindowFunc.ROW_NUMBER:
            value = number
        elif kind is WindowFunc.RANK:
            value = F.rank().over(peers) if expr.order_key else F.lit(1)
        elif kind is WindowFunc.DENSE_RANK:
            value = F.dense_rank().over(peers) if expr.order_key else F.lit(1)
        elif kind in (WindowFunc.LAG, WindowFunc.LEAD):
            assert arg is not None
            default = F.col(column_name(func.args[1])) if len(func.args) > 1 else F.lit(None)
            if kind is WindowFunc.LAG:
                inside = number > func.offset
                moved = F.lag(arg, func.offset).over(in_order)
            else:
                inside = number + func.offset <= size
                moved = F.lead(arg, func.offset).over(in_order)
            value = F.when(inside, moved).otherwise(default) if func.offset else arg
        elif kind is WindowFunc.FIRST_VALUE:
            assert arg is not None
            first_rows = in_order.rowsBetween(SparkWindow.unboundedPreceding, 0)
            value = F.first(arg, ignorenulls=False).over(first_rows)
        elif kind is WindowFunc.LAST_VALUE:
            assert arg is not None
            value = F.last(arg, ignorenulls=False).over(whole_peer_group)
        elif kind is WindowFunc.COUNT:
            assert arg is not None
            value = F.count(arg).over(peers)
        elif kind is WindowFunc.SUM:
            assert arg is not None
            value = F.sum(arg.cast(spark_type(out_type.scalar_type))).over(peers)
        elif kind is WindowFunc.MIN:
            assert arg is not None
            value = F.min(arg).over(peers)
        elif kind is WindowFunc.MAX:
            assert arg is not None
            value = F.max(arg).over(peers)
        else:  # pragma: no cover - every WindowFunc is handled above
            raise TypeError(f"no rendering for window function {kind}")
        values.append(value.cast(spark_type(out_type.scalar_type)).alias(column_name(arity + j)))
    numbered = rows.select(*data, POINT, *values)
    out = data_columns(expr.desc.arity)
    return numbered.groupBy(*out, POINT).agg(F.count(F.lit(1)).cast("long").alias(OUT))


def ordered_values(expr: TopK | Window, state: DataFrame, key_cols: list[str]) -> DataFrame:
    """Per (key, point): the operator's output rows with their multiplicity
    (`OUT`), from the rows present there with theirs (`COUNT`)."""
    if isinstance(expr, TopK):
        return _topk(expr, state, key_cols)
    return _window(expr, state, key_cols)


def stacked(expr: RelationExpr) -> bool:
    """Whether a TopK or Window is among `expr`'s inputs, at any depth."""
    return any(isinstance(c, TopK | Window) or stacked(c) for c in expr.inputs())
