"""Rendering relation expressions on Spark as delta rules.

A step advances a view from `lower` (u0) to `upper` (u1). Every operator
turns its inputs' (old, delta) into its own (old, delta):

- old: the operator's contents at u0 - 1, as rows with a `__diff`
  multiplicity (not necessarily consolidated);
- delta: its updates at their exact times in [u0, u1) (`__time`, `__diff`).

Rules (docs/architecture.md, "How SQL becomes a plan"):
- Filter, Map, Project, Union, Negate: applied to old and delta alike.
- Join: dA x B_old + A_old x dB + dA x dB, output time max(tA, tB).
- Reduce / Distinct / Threshold: only the keys the delta touches are
  recomputed, at every time the delta carries for them (and at u0 - 1 for
  the value to retract), so the output is exact at every time, not only at
  step boundaries.

Errors (compute/spark_errors.py): Filter, Map and a Reduce's keys and
arguments send the delta rows a scalar fails on to `StepContext.errors`
(with their time and diff) instead of failing the job; those rows leave the
data, in old as in delta (compute/error_collection.py).

Hydration at `as_of` is the same rendering with every old empty and every
input's snapshot as a delta at `as_of`. `None` stands for a collection known
to be empty, so no Spark work is planned for it. Everything stays lazy: the
caller runs one Spark job when it writes the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce as fold

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from coordinator_lib.compute.join_plan import first_filters, join_steps
from coordinator_lib.compute.rules import rule_for
from coordinator_lib.compute.scalar import column_name, to_spark
from coordinator_lib.compute.spark_errors import ERROR, error_column, first_error, split_errors
from coordinator_lib.expr.relation import (
    AggregateExpr,
    AggregateFunc,
    Constant,
    Distinct,
    Filter,
    Get,
    Join,
    Map,
    Negate,
    Project,
    Reduce,
    RelationExpr,
    Threshold,
    TopK,
    Union,
)
from coordinator_lib.expr.relation import Window as WindowOp
from coordinator_lib.expr.scalar import Column, ScalarExpr
from coordinator_lib.expr.temporal import TemporalFilter
from coordinator_lib.persist.spark_batches import spark_type
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ColumnType, RelationDesc

TIME = "__time"
DIFF = "__diff"
POINT = "__point"


@dataclass
class Rendered:
    """An operator's contents before the step and its changes during it."""

    old: DataFrame | None
    delta: DataFrame | None


@dataclass
class StepContext:
    spark: SparkSession
    lower: int
    upper: int
    inputs: dict[GlobalId, Rendered]
    hydrating: bool = False
    # (operator, rule) for each operator rendered, in pre-order (rules.py).
    rules: list[tuple[str, str]] = field(default_factory=list)
    # Error updates (code, message, __time, __diff): the errs collection.
    errors: list[DataFrame] = field(default_factory=list)


def data_columns(arity: int) -> list[str]:
    return [column_name(i) for i in range(arity)]


def empty_frame(spark: SparkSession, desc: RelationDesc, with_time: bool) -> DataFrame:
    fields = [
        T.StructField(column_name(i), spark_type(t.scalar_type), True)
        for i, t in enumerate(desc.types)
    ]
    if with_time:
        fields.append(T.StructField(TIME, T.LongType(), False))
    fields.append(T.StructField(DIFF, T.LongType(), False))
    return spark.createDataFrame([], T.StructType(fields))


def render(expr: RelationExpr, ctx: StepContext) -> Rendered:
    """Render `expr` for one step (see the module docstring)."""
    # The rule comes from the table EXPLAIN reads too (rules.py).
    ctx.rules.append((type(expr).__name__, rule_for(expr).value))
    if isinstance(expr, Get):
        return ctx.inputs[expr.id]
    if isinstance(expr, Constant):
        return _constant(expr, ctx)
    if isinstance(expr, Filter):
        return _fallible(render(expr.input, ctx), lambda df: _filter(df, expr), ctx)
    if isinstance(expr, Map):
        arity = expr.input.desc.arity
        return _fallible(render(expr.input, ctx), lambda df: _map(df, expr, arity), ctx)
    if isinstance(expr, Project):
        return _linear(render(expr.input, ctx), lambda df: _project(df, expr.outputs))
    if isinstance(expr, Negate):
        return _linear(render(expr.input, ctx), lambda df: df.withColumn(DIFF, -F.col(DIFF)))
    if isinstance(expr, Union):
        parts = [render(child, ctx) for child in expr.inputs_]
        return Rendered(_union_all([p.old for p in parts]), _union_all([p.delta for p in parts]))
    if isinstance(expr, Join):
        return _join(expr, ctx)
    if isinstance(expr, Reduce):
        exprs = [*expr.group_key, *(a.expr for a in expr.aggregates)]
        types = expr.input.desc.types
        return _reduce(
            _fallible(render(expr.input, ctx), lambda df: _checked(df, exprs, types), ctx),
            expr.input.desc,
            expr.group_key,
            expr.aggregates,
            ctx,
            mode="reduce",
        )
    if isinstance(expr, Distinct):
        arity = expr.input.desc.arity
        keys = tuple(Column(i) for i in range(arity))
        return _reduce(render(expr.input, ctx), expr.input.desc, keys, (), ctx, mode="reduce")
    if isinstance(expr, Threshold):
        arity = expr.input.desc.arity
        keys = tuple(Column(i) for i in range(arity))
        return _reduce(render(expr.input, ctx), expr.input.desc, keys, (), ctx, mode="threshold")
    if isinstance(expr, TopK | WindowOp):
        from coordinator_lib.compute.render_ordered import render_ordered  # imports this module

        return render_ordered(expr, render(expr.input, ctx), ctx)
    if isinstance(expr, TemporalFilter):
        from coordinator_lib.compute.temporal import render_temporal_spark  # imports this module

        return render_temporal_spark(expr, render(expr.input, ctx), ctx)
    raise TypeError(f"no rendering for {type(expr).__name__}")


# ----------------------------------------------------------------- linear ops
def _linear(rendered: Rendered, op) -> Rendered:  # type: ignore[no-untyped-def]
    return Rendered(
        None if rendered.old is None else op(rendered.old),
        None if rendered.delta is None else op(rendered.delta),
    )


def _union_all(frames: list[DataFrame | None]) -> DataFrame | None:
    present = [f for f in frames if f is not None]
    if not present:
        return None
    return fold(lambda a, b: a.unionByName(b), present)


Split = tuple[DataFrame, list[DataFrame]]  # (rows, their errors)


def _fallible(rendered: Rendered, op: Callable[[DataFrame], Split], ctx: StepContext) -> Rendered:
    """A linear operator whose rows may fail: old keeps the rows that do not
    (their errors were taken in earlier), the delta's errors go to ctx.errors."""
    old = None if rendered.old is None else op(rendered.old)[0]
    delta = None
    if rendered.delta is not None:
        delta, errors = op(rendered.delta)
        ctx.errors += errors
    return Rendered(old, delta)


def _filter(df: DataFrame, expr: Filter) -> Split:
    """Predicates in order: a row's error counts only where those before hold."""
    types = expr.input.desc.types
    errors = []
    for predicate in expr.predicates:
        keep = F.coalesce(to_spark(predicate, types), F.lit(False))
        error = error_column(predicate, types)
        if error is not None:
            df, errs = split_errors(df.withColumn(ERROR, error))
            errors.append(errs)
        df = df.filter(keep)
    return df, errors


def _map(df: DataFrame, expr: Map, arity: int) -> Split:
    """Each value only where no scalar before it (or it) failed on the row."""
    types = list(expr.input.desc.types)
    marked = False
    for i, scalar in enumerate(expr.scalars):
        column = to_spark(scalar, tuple(types))
        error = error_column(scalar, tuple(types))
        if error is not None:
            earlier = F.col(ERROR)
            df = df.withColumn(
                ERROR, F.when(earlier.isNotNull(), earlier).otherwise(error) if marked else error
            )
            marked = True
        if marked:
            column = F.when(F.col(ERROR).isNull(), column)
        out_type = scalar.typ(tuple(types))
        df = df.withColumn(column_name(arity + i), column.cast(spark_type(out_type.scalar_type)))
        types.append(out_type)
    if not marked:
        return df, []
    df, errors = split_errors(df)
    return df, [errors]


def _checked(df: DataFrame, exprs: list[ScalarExpr], types: tuple[ColumnType, ...]) -> Split:
    """A Reduce's input without the rows its keys or arguments fail on."""
    first = first_error([error_column(e, types) for e in exprs])
    if first is None:
        return df, []
    df, errs = split_errors(df.withColumn(ERROR, first))
    return df, [errs]


def _bookkeeping(df: DataFrame) -> list[str]:
    return [c for c in (TIME, DIFF) if c in df.columns]


def _project(df: DataFrame, outputs: tuple[int, ...]) -> DataFrame:
    columns = [F.col(column_name(o)).alias(column_name(i)) for i, o in enumerate(outputs)]
    return df.select(*columns, *_bookkeeping(df))


def _constant(expr: Constant, ctx: StepContext) -> Rendered:
    desc = expr.desc
    schema_fields = [
        T.StructField(column_name(i), spark_type(t.scalar_type), True)
        for i, t in enumerate(desc.types)
    ]
    rows = [(*row, diff) for row, diff in expr.rows]
    schema = T.StructType([*schema_fields, T.StructField(DIFF, T.LongType(), False)])
    frame = ctx.spark.createDataFrame(rows, schema) if rows else None
    if frame is None:
        return Rendered(None, None)
    if ctx.hydrating:
        return Rendered(None, frame.withColumn(TIME, F.lit(ctx.lower).cast("long")))
    return Rendered(frame, None)


# ----------------------------------------------------------------------- join
def _rename_to(df: DataFrame, arity: int, offset: int) -> DataFrame:
    columns = [F.col(column_name(i)).alias(column_name(offset + i)) for i in range(arity)]
    return df.select(*columns, *_bookkeeping(df))


def _join(expr: Join, ctx: StepContext) -> Rendered:
    offsets = expr.input_offsets()
    types = expr.desc.types
    parts = [
        _linear(render(child, ctx), lambda df, c=child, o=off: _rename_to(df, c.desc.arity, o))
        for child, off in zip(expr.inputs_, offsets, strict=True)
    ]
    first = [to_spark(a, types) == to_spark(b, types) for a, b in first_filters(expr)]
    accumulated = _linear(parts[0], lambda df: _apply_filters(df, first))
    for join_step, part in zip(join_steps(expr), parts[1:], strict=True):
        filters = [to_spark(a, types) == to_spark(b, types) for a, b in join_step.filters]
        accumulated = _binary_join(accumulated, part, list(join_step.keys), filters, types)
    return accumulated


def _apply_filters(df: DataFrame, filters: list[SparkColumn]) -> DataFrame:
    for condition in filters:
        df = df.filter(F.coalesce(condition, F.lit(False)))
    return df


def _binary_join(
    left: Rendered,
    right: Rendered,
    keys: list[tuple[ScalarExpr, ScalarExpr]],
    filters: list[SparkColumn],
    types: tuple[ColumnType, ...],
) -> Rendered:
    def join(a: DataFrame, b: DataFrame, time: str) -> DataFrame:
        a_cols = [c for c in a.columns if c not in (TIME, DIFF)]
        b_cols = [c for c in b.columns if c not in (TIME, DIFF)]
        a2 = a.select(
            *a_cols,
            *[to_spark(k, types).alias(f"__lk{i}") for i, (k, _) in enumerate(keys)],
            *[F.col(c).alias(f"__l{c}") for c in _bookkeeping(a)],
        )
        b2 = b.select(
            *b_cols,
            *[to_spark(k, types).alias(f"__rk{i}") for i, (_, k) in enumerate(keys)],
            *[F.col(c).alias(f"__r{c}") for c in _bookkeeping(b)],
        )
        if keys:
            condition = fold(
                lambda x, y: x & y,
                [F.col(f"__lk{i}") == F.col(f"__rk{i}") for i in range(len(keys))],
            )
            joined = a2.join(b2, on=condition, how="inner")
        else:
            joined = a2.crossJoin(b2)
        joined = _apply_filters(joined, filters)
        diff = (F.col(f"__l{DIFF}") * F.col(f"__r{DIFF}")).alias(DIFF)
        out = [*a_cols, *b_cols]
        if time == "left":
            return joined.select(*out, F.col(f"__l{TIME}").alias(TIME), diff)
        if time == "right":
            return joined.select(*out, F.col(f"__r{TIME}").alias(TIME), diff)
        if time == "max":
            latest = F.greatest(F.col(f"__l{TIME}"), F.col(f"__r{TIME}")).alias(TIME)
            return joined.select(*out, latest, diff)
        return joined.select(*out, diff)

    delta_parts = []
    if left.delta is not None and right.old is not None:
        delta_parts.append(join(left.delta, right.old, "left"))
    if left.old is not None and right.delta is not None:
        delta_parts.append(join(left.old, right.delta, "right"))
    if left.delta is not None and right.delta is not None:
        delta_parts.append(join(left.delta, right.delta, "max"))
    old = None
    if left.old is not None and right.old is not None:
        old = join(left.old, right.old, "none")
    return Rendered(old, _union_all(delta_parts))


# --------------------------------------------------------------------- reduce
def _reduce(
    rendered: Rendered,
    input_desc: RelationDesc,
    group_key: tuple[ScalarExpr, ...],
    aggregates: tuple[AggregateExpr, ...],
    ctx: StepContext,
    mode: str,
) -> Rendered:
    """Recompute the touched keys at every time the delta has for them.

    `mode` "reduce" emits one row per group with the aggregates; "threshold"
    emits each distinct row with its multiplicity when positive."""
    types = input_desc.types
    nkeys = len(group_key)
    key_cols = [f"__k{i}" for i in range(nkeys)]
    agg_cols = [f"__a{i}" for i in range(len(aggregates))]
    output_types = [a.typ(types) for a in aggregates]

    def keyed(df: DataFrame) -> DataFrame:
        return df.select(
            *[to_spark(k, types).alias(c) for k, c in zip(group_key, key_cols, strict=True)],
            *[to_spark(a.expr, types).alias(c) for a, c in zip(aggregates, agg_cols, strict=True)],
            *_bookkeeping(df),
        )

    before = ctx.lower - 1
    old_keyed = None if rendered.old is None else keyed(rendered.old)
    if rendered.delta is None:
        if old_keyed is None:
            return Rendered(None, None)
        points = old_keyed.select(*key_cols).distinct().withColumn(POINT, F.lit(before))
        values = _values_at_points(
            old_keyed.withColumn(TIME, F.lit(before).cast("long")),
            points,
            key_cols,
            agg_cols,
            aggregates,
            output_types,
        )
        return Rendered(_emit_old(values, key_cols, aggregates, mode), None)

    delta_keyed = keyed(rendered.delta)
    touched = delta_keyed.select(*key_cols).distinct()
    events = delta_keyed
    if old_keyed is not None:
        touched_old = _semi_join(old_keyed, touched, key_cols)
        events = events.unionByName(touched_old.withColumn(TIME, F.lit(before).cast("long")))
    points = (
        delta_keyed.select(*key_cols, F.col(TIME).alias(POINT))
        .unionByName(touched.withColumn(POINT, F.lit(before).cast("long")))
        .distinct()
    )
    values = _values_at_points(events, points, key_cols, agg_cols, aggregates, output_types)
    delta = _emit_changes(values, key_cols, aggregates, mode, before)
    old = None
    if old_keyed is not None:
        old_points = old_keyed.select(*key_cols).distinct().withColumn(POINT, F.lit(before))
        old_values = _values_at_points(
            old_keyed.withColumn(TIME, F.lit(before).cast("long")),
            old_points,
            key_cols,
            agg_cols,
            aggregates,
            output_types,
        )
        old = _emit_old(old_values, key_cols, aggregates, mode)
    return Rendered(old, delta)


def _null_safe_keys(left: DataFrame, right: DataFrame, key_cols: list[str]) -> SparkColumn:
    if not key_cols:
        return F.lit(True)
    return fold(lambda a, b: a & b, [left[c].eqNullSafe(right[c]) for c in key_cols])


def _semi_join(df: DataFrame, keys: DataFrame, key_cols: list[str]) -> DataFrame:
    if not key_cols:
        return df  # the one global group is touched
    return df.join(keys, on=_null_safe_keys(df, keys, key_cols), how="left_semi")


def _values_at_points(
    events: DataFrame,
    points: DataFrame,
    key_cols: list[str],
    agg_cols: list[str],
    aggregates: tuple[AggregateExpr, ...],
    output_types: list[ColumnType],
) -> DataFrame:
    """Per (key, point): the aggregates over events with time <= point.
    Columns: keys, __point, __rows (total multiplicity), one per aggregate."""
    renamed = points.select(*[F.col(c).alias(f"__p{c}") for c in key_cols], POINT)
    condition = F.col(TIME) <= F.col(POINT)
    for c in key_cols:
        condition = condition & F.col(c).eqNullSafe(F.col(f"__p{c}"))
    joined = events.join(renamed, on=condition, how="inner")
    # Consolidate each distinct input tuple first, so MIN/MAX/DISTINCT see the
    # rows present (multiplicity > 0) at that point. Aggregates compute in
    # their output type: sum(bigint) is numeric and must not overflow at 64 bits.
    tuples = joined.groupBy(*[f"__p{c}" for c in key_cols], POINT, *agg_cols).agg(
        F.sum(DIFF).alias("__m")
    )
    present = F.col("__m") > 0
    aggs = [F.sum("__m").alias("__rows")]
    for aggregate, col, out_type in zip(aggregates, agg_cols, output_types, strict=True):
        value = F.col(col)
        if aggregate.func is AggregateFunc.ARRAY_AGG:  # a struct (value, keys...)
            column = _array_agg(aggregate, value, present)
            aggs.append(column.cast(spark_type(out_type.scalar_type)).alias(col))
            continue
        if aggregate.func is not AggregateFunc.COUNT:
            # count's output type (bigint) is not its input's: count(text) counts text.
            value = value.cast(spark_type(out_type.scalar_type))
        aggs.append(_aggregate_column(aggregate, value, present).alias(col))
    grouped = tuples.groupBy(*[f"__p{c}" for c in key_cols], POINT).agg(*aggs)
    return grouped.select(
        *[F.col(f"__p{c}").alias(c) for c in key_cols], POINT, "__rows", *agg_cols
    )


def _compare_field(
    left: SparkColumn, right: SparkColumn, descending: bool, nulls_first: bool
) -> SparkColumn:
    before, after = F.lit(-1), F.lit(1)
    return (
        F.when(left.isNull() & right.isNull(), F.lit(0))
        .when(left.isNull(), before if nulls_first else after)
        .when(right.isNull(), after if nulls_first else before)
        .when(left < right, after if descending else before)
        .when(left > right, before if descending else after)
        .otherwise(F.lit(0))
    )


def _array_agg(aggregate: AggregateExpr, record: SparkColumn, present: SparkColumn) -> SparkColumn:
    """array_agg over structs (f0 the value, f1... the ORDER BY keys): each
    non-NULL struct as often as its multiplicity, sorted by the keys then the
    value (ascending, NULLs last), as `local_scalar._array_agg` does; NULL
    for no rows. Collecting structs keeps NULL values."""
    m = F.col("__m")
    items = F.flatten(
        F.collect_list(F.when(present & record.isNotNull(), F.array_repeat(record, m.cast("int"))))
    )
    fields = [*[f"f{i + 1}" for i in range(len(aggregate.order))], "f0"]
    directions = [*aggregate.order, (False, False)]

    def compare(left: SparkColumn, right: SparkColumn) -> SparkColumn:
        result: SparkColumn | None = None
        for name, (descending, nulls_first) in reversed(list(zip(fields, directions, strict=True))):
            this = _compare_field(left[name], right[name], descending, nulls_first)
            result = this if result is None else F.when(this != 0, this).otherwise(result)
        assert result is not None
        return result

    ordered = F.array_sort(items, compare)
    return F.when(F.size(items) > 0, F.transform(ordered, lambda item: item["f0"]))


def _aggregate_column(
    aggregate: AggregateExpr, value: SparkColumn, present: SparkColumn
) -> SparkColumn:
    m = F.col("__m")
    nonnull = value.isNotNull()
    func = aggregate.func
    if aggregate.distinct:
        keep = present & nonnull
        if func is AggregateFunc.COUNT:
            return F.count_distinct(F.when(keep, value))
        if func is AggregateFunc.SUM:
            return F.sum_distinct(F.when(keep, value))
        # min/max over distinct values is min/max over values
    if func is AggregateFunc.COUNT:
        return F.coalesce(F.sum(F.when(nonnull, m)), F.lit(0)).cast("long")
    if func is AggregateFunc.SUM:
        total = F.sum(F.when(nonnull, value * m))
        return F.when(F.sum(F.when(nonnull, m)) > 0, total)
    if func is AggregateFunc.MIN:
        return F.min(F.when(present, value))
    if func is AggregateFunc.MAX:
        return F.max(F.when(present, value))
    if func is AggregateFunc.STRING_AGG:
        # Each value as often as its multiplicity (once with DISTINCT), sorted.
        copies = F.lit(1) if aggregate.distinct else m.cast("int")
        items = F.flatten(F.collect_list(F.when(present & nonnull, F.array_repeat(value, copies))))
        ordered = F.sort_array(items, asc=not aggregate.descending)
        joined = F.array_join(ordered, aggregate.separator or "")
        return F.when(F.size(items) > 0, joined)
    raise TypeError(f"no rendering for aggregate {func}")


def _final_columns(key_cols: list[str], aggregates: tuple[AggregateExpr, ...]) -> list[SparkColumn]:
    cols = [F.col(c).alias(column_name(i)) for i, c in enumerate(key_cols)]
    cols += [F.col(f"__a{j}").alias(column_name(len(key_cols) + j)) for j in range(len(aggregates))]
    return cols


def _emit_old(values: DataFrame, key_cols: list[str], aggregates, mode: str) -> DataFrame:  # type: ignore[no-untyped-def]
    present = values.filter(F.col("__rows") > 0)
    diff = F.col("__rows") if mode == "threshold" else F.lit(1).cast("long")
    return present.select(*_final_columns(key_cols, aggregates), diff.alias(DIFF))


def _emit_changes(
    values: DataFrame,
    key_cols: list[str],
    aggregates,
    mode: str,
    before: int,  # type: ignore[no-untyped-def]
) -> DataFrame:
    """From the value of each key at each point, the changes: at each point
    after `before`, retract the previous value and insert the new one."""
    window = Window.partitionBy(*key_cols).orderBy(POINT) if key_cols else Window.orderBy(POINT)
    row_cols = [f"__a{j}" for j in range(len(aggregates))]
    previous = values.select(
        "*",
        F.lag("__rows").over(window).alias("__prev_rows"),
        *[F.lag(c).over(window).alias(f"__prev{c}") for c in row_cols],
    ).filter(F.col(POINT) > before)
    if mode == "threshold":
        new_diff = F.greatest(F.col("__rows"), F.lit(0))
        old_diff = F.greatest(F.coalesce(F.col("__prev_rows"), F.lit(0)), F.lit(0))
        changed = previous.select(
            *_final_columns(key_cols, aggregates),
            F.col(POINT).alias(TIME),
            (new_diff - old_diff).cast("long").alias(DIFF),
        )
        return changed.filter(F.col(DIFF) != 0)
    inserts = previous.filter(F.col("__rows") > 0).select(
        *_final_columns(key_cols, aggregates),
        F.col(POINT).alias(TIME),
        F.lit(1).cast("long").alias(DIFF),
    )
    retractions = previous.filter(F.coalesce(F.col("__prev_rows"), F.lit(0)) > 0).select(
        *[F.col(c).alias(column_name(i)) for i, c in enumerate(key_cols)],
        *[
            F.col(f"__prev{c}").alias(column_name(len(key_cols) + j))
            for j, c in enumerate(row_cols)
        ],
        F.col(POINT).alias(TIME),
        F.lit(-1).cast("long").alias(DIFF),
    )
    return inserts.unionByName(retractions)


def consolidate_delta(df: DataFrame, arity: int) -> DataFrame:
    """Sum diffs per (row, time) and drop zeros: the output of a step."""
    columns = data_columns(arity)
    return df.groupBy(*columns, TIME).agg(F.sum(DIFF).alias(DIFF)).filter(F.col(DIFF) != 0)
