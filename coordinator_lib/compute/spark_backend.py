"""The Spark backend of the delta rules (delta_rules.py): each primitive on
DataFrames (spark_frames.py), planned lazily; the caller runs one Spark job
when it writes the result.

Errors (compute/spark_errors.py): a Linear step's Filter and Map and a
Reduce's keys and arguments send the delta rows a scalar fails on to
`StepContext.errors` (with their time and diff) instead of failing the job;
those rows leave the data, in old as in delta (compute/error_collection.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce as fold

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from coordinator_lib.compute import plan
from coordinator_lib.compute.delta_rules import Keyed, Pair
from coordinator_lib.compute.join_plan import JoinStep
from coordinator_lib.compute.render_ordered import COUNT, OUT, ordered_values, stacked
from coordinator_lib.compute.scalar import column_name, to_spark
from coordinator_lib.compute.spark_aggregates import (
    COPIES,
    aggregate_column,
    array_agg_column,
    distinct_copies,
    sum_overflow,
)
from coordinator_lib.compute.spark_errors import (
    ERROR,
    error_column,
    first_error,
    no_error,
    split_errors,
)
from coordinator_lib.compute.spark_frames import (
    DIFF,
    POINT,
    TIME,
    bookkeeping,
    data_columns,
    is_timed,
    union_all,
)
from coordinator_lib.compute.temporal import spark_bounds
from coordinator_lib.expr import relation as rel
from coordinator_lib.expr.relation import AggregateExpr, AggregateFunc, Filter, Map
from coordinator_lib.expr.scalar import Column, ScalarExpr
from coordinator_lib.expr.table_functions import TableFunc, expand
from coordinator_lib.expr.temporal import TemporalFilter as TemporalFilterExpr
from coordinator_lib.persist.spark_batches import spark_type
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ColumnType

Rendered = Pair[DataFrame]


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


class SparkBackend:
    """`delta_rules.Backend` over DataFrames, for one step (`ctx`)."""

    def __init__(self, ctx: StepContext) -> None:
        self.ctx = ctx
        self.lower, self.upper, self.hydrating = ctx.lower, ctx.upper, ctx.hydrating

    def record(self, operator: str, rule: str) -> None:
        self.ctx.rules.append((operator, rule))

    def get(self, id: GlobalId) -> Rendered:
        return self.ctx.inputs[id]

    def stateful_input(self, step: plan.Step, pair: Rendered) -> Rendered:
        return pair

    def constant(self, step: plan.Constant, time: int | None) -> DataFrame | None:
        if not step.rows:
            return None
        fields = [
            T.StructField(column_name(i), spark_type(t.scalar_type), True)
            for i, t in enumerate(step.expr.desc.types)
        ]
        schema = T.StructType([*fields, T.StructField(DIFF, T.LongType(), False)])
        frame = self.ctx.spark.createDataFrame([(*row, diff) for row, diff in step.rows], schema)
        return frame if time is None else frame.withColumn(TIME, F.lit(time).cast("long"))

    def _split(self, df: DataFrame, split: Split) -> DataFrame:
        """The rows; a delta's errors go to the step's error collection."""
        rows, errors = split
        if is_timed(df):
            self.ctx.errors += errors
        return rows

    def map_filter_project(self, c: DataFrame, step: plan.Linear) -> DataFrame:
        for op in step.applied():
            if isinstance(op, Filter):
                c = self._split(c, _filter(c, op))
            elif isinstance(op, Map):
                c = self._split(c, _map(c, op, op.input.desc.arity))
            else:
                c = _project(c, op.outputs)
        return c

    def flat_map(self, c: DataFrame, step: plan.FlatMap) -> DataFrame:
        node = step.expr
        assert isinstance(node, rel.FlatMap)
        return _flat_map(c, node)

    def negate(self, c: DataFrame) -> DataFrame:
        return c.withColumn(DIFF, -F.col(DIFF))

    def union(self, cs: list[DataFrame]) -> DataFrame:
        return union_all(cs)

    def consolidate(self, c: DataFrame) -> DataFrame:
        return c  # a plan, summed where Spark reads it

    def join_matches(
        self, left: Rendered, right: Rendered, join: plan.Join, step: JoinStep
    ) -> tuple[DataFrame | None, DataFrame | None]:
        before = F.lit(self.lower - 1).cast("long")
        return (
            None if left.old is None else left.old.withColumn(TIME, before),
            None if right.old is None else right.old.withColumn(TIME, before),
        )

    def join_filter(self, c: DataFrame, join: plan.Join) -> DataFrame:
        return _apply_filters(c, [_equal(a, b, join.types) for a, b in join.first])

    def equi_join(
        self, left: DataFrame, right: DataFrame, join: plan.Join, step: JoinStep
    ) -> DataFrame:
        right = _rename_to(right, step.width - step.left_width, step.left_width)
        filters = [_equal(a, b, join.types) for a, b in step.filters]
        return _join(left, right, list(step.keys), filters, join.types)

    def check_scalars(self, c: DataFrame, node: plan.Reduce) -> DataFrame:
        expr = node.expr
        assert isinstance(expr, rel.Reduce)
        exprs = [*expr.group_key, *(a.expr for a in expr.aggregates)]
        return self._split(c, _checked(c, exprs, expr.input.desc.types))

    def key_by(self, c: DataFrame, node: Keyed) -> DataFrame:
        if isinstance(node, plan.TopK | plan.Window):
            # Each operator reads its input's frames several times, so stacked
            # operators (one Window per OVER clause) would multiply the plan's
            # size until Spark's analyzer runs out of memory. A local checkpoint
            # (computed once, when first used) stands for the input instead.
            return c.localCheckpoint(eager=False) if stacked(node.expr) else c
        group = _Group.of(node)
        return c.select(
            *[
                to_spark(k, group.types).alias(n)
                for k, n in zip(group.keys, group.key_cols, strict=True)
            ],
            *[
                to_spark(a.expr, group.types).alias(n)
                for a, n in zip(group.aggregates, group.agg_cols, strict=True)
            ],
            *bookkeeping(c),
        )

    def group_outputs(self, keyed_old: DataFrame, node: Keyed) -> DataFrame:
        before = self.lower - 1
        if isinstance(node, plan.TopK | plan.Window):
            expr = _ordered(node)
            state = keyed_old.groupBy(*data_columns(expr.input.desc.arity)).agg(
                F.sum(DIFF).alias(COUNT)
            )
            state = state.filter(F.col(COUNT) > 0).withColumn(POINT, F.lit(before).cast("long"))
            computed = ordered_values(expr, state, _ordered_keys(expr))
            if ERROR in computed.columns:  # a failing partition's error is in the errs already
                computed = computed.filter(F.col(ERROR).isNull())
            return computed.select(*data_columns(expr.desc.arity), F.col(OUT).alias(DIFF))
        group = _Group.of(node)
        points = keyed_old.select(*group.key_cols).distinct().withColumn(POINT, F.lit(before))
        events = keyed_old.withColumn(TIME, F.lit(before).cast("long"))
        values = group.values_at_points(events, points)
        return _emit_old(values, group.key_cols, group.aggregates, group.mode)

    def rows_at_touched_keys(
        self, keyed_old: DataFrame | None, keyed_delta: DataFrame | None, node: Keyed
    ) -> DataFrame | None:
        if keyed_old is None or keyed_delta is None:
            return None
        key_cols = _key_cols(node)
        return _semi_join(keyed_old, keyed_delta.select(*key_cols).distinct(), key_cols)

    def group_changes(
        self, touched_old: DataFrame | None, keyed_delta: DataFrame, node: Keyed
    ) -> DataFrame:
        before = F.lit(self.lower - 1).cast("long")
        key_cols = _key_cols(node)
        touched = keyed_delta.select(*key_cols).distinct()
        events = keyed_delta
        if touched_old is not None:
            events = events.unionByName(touched_old.withColumn(TIME, before))
        points = (
            keyed_delta.select(*key_cols, F.col(TIME).alias(POINT))
            .unionByName(touched.withColumn(POINT, before))
            .distinct()
        )
        if isinstance(node, plan.TopK | plan.Window):
            changes, errors = _ordered_changes(
                _ordered(node), events, points, key_cols, self.lower - 1
            )
            if errors is not None:
                self.ctx.errors.append(errors)
            return changes
        group = _Group.of(node)
        values = group.values_at_points(events, points)
        changes, errors = _emit_changes(
            values, key_cols, group.aggregates, group.mode, self.lower - 1
        )
        if any(a.func is AggregateFunc.SUM for a in group.aggregates):  # can overflow
            self.ctx.errors.append(errors)
        return changes

    def temporal_present(self, old: DataFrame, node: plan.TemporalFilter, time: int) -> DataFrame:
        lo, hi = F.col("__lo"), F.col("__hi")
        windowed = _windowed(old, node)
        at = F.lit(time)
        present = windowed.filter((lo.isNull() | (lo <= at)) & (hi.isNull() | (hi > at)))
        return present.select(*data_columns(node.expr.desc.arity), DIFF)

    def temporal_changes(self, c: DataFrame, node: plan.TemporalFilter) -> DataFrame:
        lo, hi = F.col("__lo"), F.col("__hi")
        lower, upper = F.lit(self.lower), F.lit(self.upper)
        columns = data_columns(node.expr.desc.arity)
        windowed = _windowed(c, node)
        retract = (-F.col(DIFF)).alias(DIFF)
        if not is_timed(c):  # rows already present (or pending) whose times come now
            return (
                windowed.filter(lo.isNotNull() & (lo >= lower) & (lo < upper))
                .select(*columns, lo.alias(TIME), DIFF)
                .unionByName(
                    windowed.filter(hi.isNotNull() & (hi >= lower) & (hi < upper)).select(
                        *columns, hi.alias(TIME), retract
                    )
                )
            )
        start = F.greatest(F.col(TIME), lo)  # greatest skips a NULL (unbounded) L
        kept = windowed.withColumn("__start", start).filter(hi.isNull() | (F.col("__start") < hi))
        return (
            kept.filter(F.col("__start") < upper)
            .select(*columns, F.col("__start").alias(TIME), DIFF)
            .unionByName(
                kept.filter(hi.isNotNull() & (hi < upper)).select(*columns, hi.alias(TIME), retract)
            )
        )

    def temporal_due(
        self, old: DataFrame | None, delta: DataFrame | None, node: plan.TemporalFilter
    ) -> DataFrame | None:
        # No arrangements on Spark: the old contents' changes due in the step.
        return None if old is None or self.hydrating else self.temporal_changes(old, node)


# ----------------------------------------------------------------- linear ops
Split = tuple[DataFrame, list[DataFrame]]  # (rows, their errors)


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


def _flat_map(df: DataFrame, node: rel.FlatMap) -> DataFrame:
    """The table function's values as an array per row (expr/table_functions.py:
    none for NULL arguments or a step pointing away from stop), exploded.
    Zipped calls (ROWS FROM): their arrays zipped by `arrays_zip`, which pads
    the shorter ones with NULL as table_functions.rows_from does."""
    types = node.input.desc.types
    arity = node.input.desc.arity
    call_types = node.call_types()
    arrays = [
        _call_values(call, [spark_type(t.scalar_type) for t in outs], types)
        for call, outs in zip(node.calls, call_types, strict=True)
    ]
    widths = [len(outs) for outs in call_types]
    keep = [F.col(c) for c in data_columns(arity)]
    if not node.zipped:
        values = arrays[0].column
        outs = [spark_type(t.scalar_type) for t in call_types[0]]
        if widths[0] == 1:
            value = [F.col("__value").cast(outs[0]).alias(column_name(arity))]
        else:  # a struct per row: its fields are the columns
            value = [F.col(f"__value.f{i}").alias(column_name(arity + i)) for i in range(widths[0])]
    else:
        # one array of structs, field j call j's value; a NULL array (NULL
        # arguments) gives no values, not a NULL zip
        element = _struct([a.dtype for a in arrays])
        values = F.arrays_zip(
            *(F.coalesce(a.column, F.array().cast(T.ArrayType(a.dtype))) for a in arrays)
        ).cast(T.ArrayType(element))
        value = []
        for j, width in enumerate(widths):
            base = arity + sum(widths[:j])
            if width == 1:
                value.append(F.col(f"__value.f{j}").alias(column_name(base)))
            else:
                value += [
                    F.col(f"__value.f{j}.f{i}").alias(column_name(base + i)) for i in range(width)
                ]
    width = sum(widths)
    if not node.ordinality:
        exploded = df.select(*keep, F.explode(values).alias("__value"), *bookkeeping(df))
        return exploded.select(*keep, *value, *bookkeeping(df))
    exploded = df.select(*keep, F.posexplode(values).alias("__pos", "__value"), *bookkeeping(df))
    position = (F.col("__pos") + 1).cast("long").alias(column_name(arity + width))
    return exploded.select(*keep, *value, position, *bookkeeping(df))


@dataclass(frozen=True)
class _CallArray:
    """One call's values as an array column and its element type."""

    column: SparkColumn
    dtype: T.DataType


def _call_values(
    call: rel.TableCall, outs: list[T.DataType], types: tuple[ColumnType, ...]
) -> _CallArray:
    args = [to_spark(e, types) for e in call.exprs]
    out = outs[0] if len(outs) == 1 else _struct(outs)
    if call.func is TableFunc.GENERATE_SERIES and len(args) == 3:
        start, stop, step = args
        reaches = F.when(step > 0, start <= stop).otherwise(start >= stop)
        return _CallArray(
            F.when(reaches, F.sequence(start, stop, step)).cast(T.ArrayType(out)), out
        )
    if call.func is TableFunc.UNNEST:
        (values,) = args
        return _CallArray(values.cast(T.ArrayType(out)), out)
    func = call.func  # the Python implementation as a UDF giving an array
    return _CallArray(F.udf(lambda *values: expand(func, values), T.ArrayType(out))(*args), out)


def _struct(types: list[T.DataType]) -> T.StructType:
    return T.StructType([T.StructField(f"f{i}", t, True) for i, t in enumerate(types)])


def _checked(df: DataFrame, exprs: list[ScalarExpr], types: tuple[ColumnType, ...]) -> Split:
    """A Reduce's input without the rows its keys or arguments fail on."""
    first = first_error([error_column(e, types) for e in exprs])
    if first is None:
        return df, []
    df, errs = split_errors(df.withColumn(ERROR, first))
    return df, [errs]


def _project(df: DataFrame, outputs: tuple[int, ...]) -> DataFrame:
    columns = [F.col(column_name(o)).alias(column_name(i)) for i, o in enumerate(outputs)]
    return df.select(*columns, *bookkeeping(df))


# ----------------------------------------------------------------------- join
def _equal(a: ScalarExpr, b: ScalarExpr, types: tuple[ColumnType, ...]) -> SparkColumn:
    return to_spark(a, types) == to_spark(b, types)


def _rename_to(df: DataFrame, arity: int, offset: int) -> DataFrame:
    columns = [F.col(column_name(i)).alias(column_name(offset + i)) for i in range(arity)]
    return df.select(*columns, *bookkeeping(df))


def _apply_filters(df: DataFrame, filters: list[SparkColumn]) -> DataFrame:
    for condition in filters:
        df = df.filter(F.coalesce(condition, F.lit(False)))
    return df


def _join(
    a: DataFrame,
    b: DataFrame,
    keys: list[tuple[ScalarExpr, ScalarExpr]],
    filters: list[SparkColumn],
    types: tuple[ColumnType, ...],
) -> DataFrame:
    """Rows of `a` and `b` with equal, non-NULL keys passing `filters`; the
    diff is the product, the time the later of the two (if both are timed)."""
    a_cols = [c for c in a.columns if c not in (TIME, DIFF)]
    b_cols = [c for c in b.columns if c not in (TIME, DIFF)]
    a2 = a.select(
        *a_cols,
        *[to_spark(k, types).alias(f"__lk{i}") for i, (k, _) in enumerate(keys)],
        *[F.col(c).alias(f"__l{c}") for c in bookkeeping(a)],
    )
    b2 = b.select(
        *b_cols,
        *[to_spark(k, types).alias(f"__rk{i}") for i, (_, k) in enumerate(keys)],
        *[F.col(c).alias(f"__r{c}") for c in bookkeeping(b)],
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
    if is_timed(a) and is_timed(b):
        latest = F.greatest(F.col(f"__l{TIME}"), F.col(f"__r{TIME}")).alias(TIME)
        return joined.select(*out, latest, diff)
    return joined.select(*out, diff)


# --------------------------------------------------------- keyed operators
@dataclass(frozen=True)
class _Group:
    """A Reduce, Distinct or Threshold as keys and aggregates over columns
    `__k<i>` and `__a<j>`. `mode` "reduce" emits one row per group with the
    aggregates; "threshold" each distinct row with its multiplicity when positive."""

    keys: tuple[ScalarExpr, ...]
    aggregates: tuple[AggregateExpr, ...]
    types: tuple[ColumnType, ...]
    mode: str

    @staticmethod
    def of(node: Keyed) -> _Group:
        expr = node.expr
        types = expr.inputs()[0].desc.types
        if isinstance(expr, rel.Reduce):
            return _Group(expr.group_key, expr.aggregates, types, "reduce")
        keys = tuple(Column(i) for i in range(len(types)))
        return _Group(
            keys, (), types, "threshold" if isinstance(node, plan.Threshold) else "reduce"
        )

    @property
    def key_cols(self) -> list[str]:
        return [f"__k{i}" for i in range(len(self.keys))]

    @property
    def agg_cols(self) -> list[str]:
        return [f"__a{i}" for i in range(len(self.aggregates))]

    def values_at_points(self, events: DataFrame, points: DataFrame) -> DataFrame:
        output_types = [a.typ(self.types) for a in self.aggregates]
        return _values_at_points(
            events, points, self.key_cols, self.agg_cols, self.aggregates, output_types
        )


def _ordered(node: Keyed) -> rel.TopK | rel.Window:
    expr = node.expr
    assert isinstance(expr, rel.TopK | rel.Window)
    return expr


def _ordered_keys(expr: rel.TopK | rel.Window) -> list[str]:
    key = expr.group_key if isinstance(expr, rel.TopK) else expr.partition_key
    return [column_name(i) for i in key]


def _key_cols(node: Keyed) -> list[str]:
    if isinstance(node, plan.TopK | plan.Window):
        return _ordered_keys(_ordered(node))
    return _Group.of(node).key_cols


def _null_safe(pairs: list[tuple[str, str]]) -> SparkColumn:
    """Columns equal pairwise, NULL equal to NULL (the names are distinct)."""
    return fold(lambda a, b: a & b, [F.col(a).eqNullSafe(F.col(b)) for a, b in pairs], F.lit(True))


def _ordered_changes(
    expr: rel.TopK | rel.Window,
    events: DataFrame,
    points: DataFrame,
    key_cols: list[str],
    before: int,
) -> tuple[DataFrame, DataFrame | None]:
    """At each point after `before`, the point's output minus its
    predecessor's. A partition whose evaluation fails at a point (`ERROR`)
    has its error in place of its rows: (data changes, error changes as
    code, message, time, diff; None if the operator cannot fail)."""
    data = data_columns(expr.input.desc.arity)
    out_cols = data_columns(expr.desc.arity)
    events = events.select(*data, TIME, DIFF)
    # The contents of each touched key at each point: events at or before it.
    renamed = points.select(*[F.col(c).alias(f"__p{c}") for c in key_cols], POINT)
    joined = events.join(
        renamed,
        (F.col(TIME) <= F.col(POINT)) & _null_safe([(c, f"__p{c}") for c in key_cols]),
        how="inner",
    )
    state = joined.groupBy(*data, POINT).agg(F.sum(DIFF).alias(COUNT)).filter(F.col(COUNT) > 0)
    values = ordered_values(expr, state, key_cols)
    failing = None
    if ERROR in values.columns:
        failing = values.filter(F.col(ERROR).isNotNull()).select(*key_cols, POINT, ERROR).distinct()
        values = values.filter(F.col(ERROR).isNull())
    inserts = values.filter(F.col(POINT) > before).select(
        *out_cols, F.col(POINT).alias(TIME), F.col(OUT).alias(DIFF)
    )
    # Retract each point's predecessor's contents at the point.
    by_key = Window.partitionBy(*key_cols).orderBy(POINT) if key_cols else Window.orderBy(POINT)
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
    changes = inserts.unionByName(retractions)
    if failing is None:
        return changes, None
    error = F.col(ERROR)
    arrivals = failing.filter(F.col(POINT) > before).select(
        error["code"].alias("code"),
        error["message"].alias("message"),
        F.col(POINT).alias(TIME),
        F.lit(1).cast("long").alias(DIFF),
    )
    departures = failing.join(
        successors,
        (failing[POINT] == successors["__prev"]) & _null_safe([(c, f"__q{c}") for c in key_cols]),
        how="inner",
    ).select(
        error["code"].alias("code"),
        error["message"].alias("message"),
        F.col("__q").alias(TIME),
        F.lit(-1).cast("long").alias(DIFF),
    )
    return changes, arrivals.unionByName(departures)


# ------------------------------------------------------------------ temporal
def _windowed(df: DataFrame, node: plan.TemporalFilter) -> DataFrame:
    """`df` with each row's bounds `__lo`, `__hi` (NULL: unbounded), only
    the rows ever present."""
    expr = node.expr
    assert isinstance(expr, TemporalFilterExpr)
    lower, upper, valid = spark_bounds(expr.bounds, expr.input.desc.types)
    lo, hi = F.col("__lo"), F.col("__hi")
    windowed = df.withColumn("__lo", lower).withColumn("__hi", upper)
    return windowed.filter(valid & (lo.isNull() | hi.isNull() | (lo < hi)))


# --------------------------------------------------------------------- reduce
def _semi_join(df: DataFrame, keys: DataFrame, key_cols: list[str]) -> DataFrame:
    """The rows of `df` whose key (NULL equal to NULL) is among `keys`'."""
    if not key_cols:
        return df  # the one global group is touched
    # Renamed, so the condition cannot resolve to one side when both frames
    # descend from the same input.
    renamed = keys.select(*[F.col(c).alias(f"__t{c}") for c in key_cols])
    return df.join(renamed, _null_safe([(c, f"__t{c}") for c in key_cols]), how="left_semi")


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
        F.sum(DIFF).alias(COPIES)
    )
    present = F.col(COPIES) > 0
    aggs = [F.sum(COPIES).alias("__rows")]
    errors: list[SparkColumn | None] = []
    group = [*[f"__p{c}" for c in key_cols], POINT]
    for aggregate, col, out_type in zip(aggregates, agg_cols, output_types, strict=True):
        value = F.col(col)
        if aggregate.func is AggregateFunc.ARRAY_AGG:  # a struct (value, keys...)
            column = array_agg_column(aggregate, value, present)
            aggs.append(column.cast(spark_type(out_type.scalar_type)).alias(col))
            continue
        copies = COPIES
        if aggregate.func is AggregateFunc.SUM and aggregate.distinct:
            copies = f"__d{col}"
            tuples = distinct_copies(tuples, group, col, copies)
        if aggregate.func is not AggregateFunc.COUNT:
            # count's output type (bigint) is not its input's: count(text) counts text.
            value = value.cast(spark_type(out_type.scalar_type))
        column = aggregate_column(aggregate, value, present, out_type.scalar_type, copies=copies)
        if aggregate.func is AggregateFunc.SUM:
            # A sum past its type is NULL here and an error of its group.
            column = column.try_cast(spark_type(out_type.scalar_type))
        aggs.append(column.alias(col))
        errors.append(sum_overflow(aggregate, value, out_type.scalar_type, copies=copies))
    error = first_error(errors)
    aggs.append((no_error() if error is None else error).alias(ERROR))
    grouped = tuples.groupBy(*group).agg(*aggs)
    return grouped.select(
        *[F.col(f"__p{c}").alias(c) for c in key_cols], POINT, "__rows", *agg_cols, ERROR
    )


def _final_columns(key_cols: list[str], aggregates: tuple[AggregateExpr, ...]) -> list[SparkColumn]:
    cols = [F.col(c).alias(column_name(i)) for i, c in enumerate(key_cols)]
    cols += [F.col(f"__a{j}").alias(column_name(len(key_cols) + j)) for j in range(len(aggregates))]
    return cols


def _emit_old(
    values: DataFrame, key_cols: list[str], aggregates: tuple[AggregateExpr, ...], mode: str
) -> DataFrame:
    # A group whose aggregate fails has its error in the errs already.
    present = values.filter((F.col("__rows") > 0) & F.col(ERROR).isNull())
    diff = F.col("__rows") if mode == "threshold" else F.lit(1).cast("long")
    return present.select(*_final_columns(key_cols, aggregates), diff.alias(DIFF))


def _emit_changes(
    values: DataFrame,
    key_cols: list[str],
    aggregates: tuple[AggregateExpr, ...],
    mode: str,
    before: int,
) -> tuple[DataFrame, DataFrame]:
    """From the value of each key at each point, the changes: at each point
    after `before`, retract the previous value and insert the new one. A
    group whose aggregate fails (`ERROR`) has its error in place of its row:
    (data changes, error changes as code, message, time, diff)."""
    window = Window.partitionBy(*key_cols).orderBy(POINT) if key_cols else Window.orderBy(POINT)
    row_cols = [f"__a{j}" for j in range(len(aggregates))]
    previous = values.select(
        "*",
        F.lag("__rows").over(window).alias("__prev_rows"),
        F.lag(ERROR).over(window).alias(f"__prev{ERROR}"),
        *[F.lag(c).over(window).alias(f"__prev{c}") for c in row_cols],
    ).filter(F.col(POINT) > before)
    now = F.col("__rows") > 0
    was = F.coalesce(F.col("__prev_rows"), F.lit(0)) > 0
    error, was_error = F.col(ERROR), F.col(f"__prev{ERROR}")
    errors = previous.filter(now & error.isNotNull()).select(
        error["code"].alias("code"),
        error["message"].alias("message"),
        F.col(POINT).alias(TIME),
        F.lit(1).cast("long").alias(DIFF),
    )
    errors = errors.unionByName(
        previous.filter(was & was_error.isNotNull()).select(
            was_error["code"].alias("code"),
            was_error["message"].alias("message"),
            F.col(POINT).alias(TIME),
            F.lit(-1).cast("long").alias(DIFF),
        )
    )
    if mode == "threshold":
        new_diff = F.greatest(F.col("__rows"), F.lit(0))
        old_diff = F.greatest(F.coalesce(F.col("__prev_rows"), F.lit(0)), F.lit(0))
        changed = previous.select(
            *_final_columns(key_cols, aggregates),
            F.col(POINT).alias(TIME),
            (new_diff - old_diff).cast("long").alias(DIFF),
        )
        return changed.filter(F.col(DIFF) != 0), errors
    inserts = previous.filter(now & error.isNull()).select(
        *_final_columns(key_cols, aggregates),
        F.col(POINT).alias(TIME),
        F.lit(1).cast("long").alias(DIFF),
    )
    retractions = previous.filter(was & was_error.isNull()).select(
        *[F.col(c).alias(column_name(i)) for i, c in enumerate(key_cols)],
        *[
            F.col(f"__prev{c}").alias(column_name(len(key_cols) + j))
            for j, c in enumerate(row_cols)
        ],
        F.col(POINT).alias(TIME),
        F.lit(-1).cast("long").alias(DIFF),
    )
    return inserts.unionByName(retractions), errors
