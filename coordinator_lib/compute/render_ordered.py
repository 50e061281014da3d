"""TopK and Window on Spark (render.py's engine), with the touched-keys rule
of Reduce: the groups (TopK) or partitions (Window) a step's delta touches
are recomputed at the step's start (u0 - 1) and at every time the delta has
for them, and each time's contents are diffed against the previous time's.

Both operators order ties by the whole row (ascending, NULLs last), as
local_ordered.py does, so the engines agree row for row: a step on one
retracts exactly what a step on the other inserted.
"""

from __future__ import annotations

from functools import reduce as fold

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import Window as SparkWindow
from pyspark.sql import functions as F

from coordinator_lib.compute.render import (
    DIFF,
    POINT,
    TIME,
    Rendered,
    StepContext,
    data_columns,
)
from coordinator_lib.compute.scalar import column_name
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
            value = F.count(arg).over(peers)
        elif kind is WindowFunc.SUM:
            assert arg is not None
            value = F.sum(arg.cast(spark_type(out_type.scalar_type))).over(peers)
        elif kind is WindowFunc.MIN:
            value = F.min(arg).over(peers)
        elif kind is WindowFunc.MAX:
            value = F.max(arg).over(peers)
        else:  # pragma: no cover - every WindowFunc is handled above
            raise TypeError(f"no rendering for window function {kind}")
        values.append(value.cast(spark_type(out_type.scalar_type)).alias(column_name(arity + j)))
    numbered = rows.select(*data, POINT, *values)
    out = data_columns(expr.desc.arity)
    return numbered.groupBy(*out, POINT).agg(F.count(F.lit(1)).cast("long").alias(OUT))


def _compute(expr: TopK | Window, state: DataFrame, key_cols: list[str]) -> DataFrame:
    """Per (key, point): the operator's output rows with their multiplicity."""
    if isinstance(expr, TopK):
        return _topk(expr, state, key_cols)
    return _window(expr, state, key_cols)


def _null_safe(pairs: list[tuple[str, str]]) -> SparkColumn:
    """Columns equal pairwise, NULL equal to NULL (the names are distinct)."""
    return fold(lambda a, b: a & b, [F.col(a).eqNullSafe(F.col(b)) for a, b in pairs], F.lit(True))


def _below(expr: RelationExpr) -> bool:
    """Whether a TopK or Window is among `expr`'s inputs, at any depth."""
    return any(isinstance(c, TopK | Window) or _below(c) for c in expr.inputs())


def render_ordered(expr: TopK | Window, rendered: Rendered, ctx: StepContext) -> Rendered:
    if _below(expr):
        # Each operator reads its input's frames several times, so stacked
        # operators (one Window per OVER clause) would multiply the plan's
        # size until Spark's analyzer runs out of memory. A local checkpoint
        # (computed once, when first used) stands for the input instead.
        rendered = Rendered(
            None if rendered.old is None else rendered.old.localCheckpoint(eager=False),
            None if rendered.delta is None else rendered.delta.localCheckpoint(eager=False),
        )
    key = expr.group_key if isinstance(expr, TopK) else expr.partition_key
    key_cols = [column_name(i) for i in key]
    data = data_columns(expr.input.desc.arity)
    out_cols = data_columns(expr.desc.arity)
    before = ctx.lower - 1

    def at_before(df: DataFrame) -> DataFrame:
        state = df.groupBy(*data).agg(F.sum(DIFF).alias(COUNT)).filter(F.col(COUNT) > 0)
        return state.withColumn(POINT, F.lit(before).cast("long"))

    old = None
    if rendered.old is not None:
        computed = _compute(expr, at_before(rendered.old), key_cols)
        old = computed.select(*out_cols, F.col(OUT).alias(DIFF))
    if rendered.delta is None:
        return Rendered(old, None)

    delta = rendered.delta
    touched = delta.select(*key_cols).distinct()
    events = delta.select(*data, TIME, DIFF)
    if rendered.old is not None:
        keys = touched.select(*[F.col(c).alias(f"__t{c}") for c in key_cols])
        touched_old = rendered.old.join(
            keys, _null_safe([(c, f"__t{c}") for c in key_cols]), how="left_semi"
        )
        events = events.unionByName(
            touched_old.select(*data, F.lit(before).cast("long").alias(TIME), DIFF)
        )
    points = (
        delta.select(*key_cols, F.col(TIME).alias(POINT))
        .unionByName(touched.withColumn(POINT, F.lit(before).cast("long")))
        .distinct()
    )
    # The contents of each touched key at each point: events at or before it.
    renamed = points.select(*[F.col(c).alias(f"__p{c}") for c in key_cols], POINT)
    joined = events.join(
        renamed,
        (F.col(TIME) <= F.col(POINT)) & _null_safe([(c, f"__p{c}") for c in key_cols]),
        how="inner",
    )
    state = joined.groupBy(*data, POINT).agg(F.sum(DIFF).alias(COUNT)).filter(F.col(COUNT) > 0)
    values = _compute(expr, state, key_cols)
    inserts = values.filter(F.col(POINT) > before).select(
        *out_cols, F.col(POINT).alias(TIME), F.col(OUT).alias(DIFF)
    )
    # Retract each point's predecessor's contents at the point.
    by_key = (
        SparkWindow.partitionBy(*key_cols).orderBy(POINT)
        if key_cols
        else SparkWindow.orderBy(POINT)
    )
    successors = (
        points.withColumn("__prev", F.lag(POINT).over(by_key))
        .filter(F.col(POINT) > before)
        .select(*[F.col(c).alias(f"__q{c}") for c in key_cols], F.col(POINT).alias("__q"), "__prev")
    )
    retractions = values.join(
        successors,
        (values[POINT] == successors["__prev"]) & _null_safe([(c, f"__q{c}") for c in key_cols]),
        how="inner",
    ).select(*out_cols, F.col("__q").alias(TIME), (-F.col(OUT)).alias(DIFF))
    return Rendered(old, inserts.unionByName(retractions))
