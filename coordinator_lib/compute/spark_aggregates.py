"""The aggregates of Reduce and of Window, as Spark columns: written once,
for a group (spark_backend.py's grouped aggregation) or a window frame
(render_ordered.py), so both compute bit-identical values. Each row counts
`__m` times (its multiplicity at a point; 1 per exploded copy in a window).
A SUM's own overflow is one rule for both (`sum_overflow`): an error of its
group, or of its window's partition, never a failed job.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from coordinator_lib.compute.spark_errors import error_struct
from coordinator_lib.compute.spark_numeric import times_count
from coordinator_lib.expr.functions.interval import spark_order_key
from coordinator_lib.expr.relation import AggregateExpr, AggregateFunc
from coordinator_lib.expr.scalar import is_integer
from coordinator_lib.persist.spark_batches import spark_type
from coordinator_lib.repr.relation import ScalarType

# Puts one Spark aggregate call over a window frame (identity when grouped).
Over = Callable[[SparkColumn], SparkColumn]
COPIES = "__m"  # a row's multiplicity: how many times the aggregates count it


def _grouped(column: SparkColumn) -> SparkColumn:
    return column


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


def array_agg_column(
    aggregate: AggregateExpr, record: SparkColumn, present: SparkColumn, over: Over = _grouped
) -> SparkColumn:
    """array_agg over structs (f0 the value, f1... the ORDER BY keys): each
    non-NULL struct as often as its multiplicity, sorted by the keys then the
    value (ascending, NULLs last), as `local_scalar._array_agg` does; NULL
    for no rows. Collecting structs keeps NULL values."""
    m = F.col("__m")
    items = F.flatten(
        over(
            F.collect_list(
                F.when(present & record.isNotNull(), F.array_repeat(record, m.cast("int")))
            )
        )
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


def times_copies(value: SparkColumn, m: SparkColumn, out_type: ScalarType) -> SparkColumn:
    """What a row adds to a SUM of `out_type`: its value times its copies,
    a numeric one with all of numeric's places (`spark_numeric.times_count`)."""
    return times_count(value, m) if out_type is ScalarType.NUMERIC else value * m


def aggregate_column(
    aggregate: AggregateExpr,
    value: SparkColumn,
    present: SparkColumn,
    out_type: ScalarType,
    over: Over = _grouped,
    copies: str = COPIES,
) -> SparkColumn:
    """One aggregate (its output of `out_type`) over the rows (`copies`
    copies each) of a group, or of a window frame when `over` puts each
    Spark aggregate over it. Interval min/max order the values by
    PostgreSQL's interval key (then by field, as the in-process engine
    does), not by field alone. A DISTINCT SUM is a SUM whose `copies`
    count each value present once (`distinct_copies`)."""
    m = F.col(copies)
    nonnull = value.isNotNull()
    func = aggregate.func
    if aggregate.distinct:
        keep = present & nonnull
        if func is AggregateFunc.COUNT:
            return over(F.count_distinct(F.when(keep, value)))
        assert func is not AggregateFunc.SUM or copies != COPIES, "needs distinct_copies"
        # min/max over distinct values is min/max over values
    if func is AggregateFunc.COUNT:
        return F.coalesce(over(F.sum(F.when(nonnull, m))), F.lit(0)).cast("long")
    if func is AggregateFunc.SUM:
        # A sum past its type is NULL here (the caller try_casts it to its
        # output type) and an error of its group or partition (`sum_overflow`).
        # A row counted no times adds nothing (an infinity times 0 is NaN).
        total = over(F.try_sum(F.when(nonnull & (m != 0), times_copies(value, m, out_type))))
        return F.when(over(F.sum(F.when(nonnull, m))) > 0, total)
    if func in (AggregateFunc.MIN, AggregateFunc.MAX):
        interval = out_type is ScalarType.INTERVAL
        keyed = F.struct(spark_order_key(value).alias("k"), value.alias("v")) if interval else value
        pick = F.min if func is AggregateFunc.MIN else F.max
        chosen = over(pick(F.when(present, keyed)))
        return chosen.getField("v") if interval else chosen
    if func is AggregateFunc.STRING_AGG:
        # Each value as often as its multiplicity (once with DISTINCT), sorted.
        repeat = F.lit(1) if aggregate.distinct else m.cast("int")
        items = F.flatten(
            over(F.collect_list(F.when(present & nonnull, F.array_repeat(value, repeat))))
        )
        ordered = F.sort_array(items, asc=not aggregate.descending)
        joined = F.array_join(ordered, aggregate.separator or "")
        return F.when(F.size(items) > 0, joined)
    raise TypeError(f"no rendering for aggregate {func}")


def distinct_copies(tuples: DataFrame, group: list[str], column: str, copies: str) -> DataFrame:
    """`tuples` (a group's rows with their multiplicity `__m`) with a column
    `copies`: 1 on one row of each non-NULL value of `column` present in
    its group (multiplicity above 0), 0 elsewhere. A DISTINCT SUM is the SUM
    over these copies, as the in-process engine adds each value present
    once (`local_groups.Accumulators`), so it has the SUM's overflow checks."""
    present = (F.col(COPIES) > 0) & F.col(column).isNotNull()
    order = Window.partitionBy(*group, column).orderBy(F.col(COPIES).desc())
    first = F.row_number().over(order) == 1
    return tuples.withColumn(copies, F.when(present & first, 1).otherwise(0).cast("long"))


def sum_overflow(
    aggregate: AggregateExpr,
    value: SparkColumn,
    out_type: ScalarType,
    over: Over = _grouped,
    copies: str = COPIES,
) -> SparkColumn | None:
    """A SUM's own overflow, as the local engine raises it
    (`local_groups.Accumulators.output`, `local_scalar.aggregate_values`):
    22003 where the sum leaves its type although each value fits (a numeric
    beyond its bound, an integer beyond its width, a finite float sum that
    is infinite), over a group or, with `over`, a window frame. Its group's
    row (its partition's rows) is then an error, as Materialize's reduce
    sends it to errs, instead of a failed job; None if it cannot overflow."""
    if aggregate.func is not AggregateFunc.SUM:
        return None
    m = F.col(copies)
    nonnull = value.isNotNull()
    counted = nonnull & (m != 0)
    if out_type in (ScalarType.REAL, ScalarType.DOUBLE):
        infinity = F.lit(float("inf"))
        total = over(F.sum(F.when(counted, value * m)))
        finite = over(F.max(F.when(counted, F.abs(value)))) < infinity
        overflow = (F.abs(total) == infinity) & finite
        return F.when(overflow, error_struct("22003", "value out of range: overflow"))
    if out_type is ScalarType.NUMERIC:
        message = "numeric field overflow"
    elif is_integer(out_type):
        message = f"{out_type.value} out of range"
    else:
        return None
    # The sum is checked against the output type, not its own; a numeric
    # product past numeric's bound is NULL (`times_count`), an overflow too.
    product = times_copies(value, m, out_type)
    some = over(F.sum(F.when(nonnull, m))) > 0
    total = over(F.try_sum(F.when(counted, product))).try_cast(spark_type(out_type))
    lost = over(F.max(counted & product.isNull()))
    return F.when(some & (total.isNull() | lost), error_struct("22003", message))
