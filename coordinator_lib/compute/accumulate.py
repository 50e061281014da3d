"""Accumulating reduce: steps of sum/count views that cost what the delta costs.

A view `Linear*(Reduce(input))` whose aggregates are all COUNT or SUM (not
DISTINCT) keeps, beside its output shard, a *state shard* of per-group
accumulators: the group key, `rows` (the group's multiplicity) and, per
aggregate, `s<i>` (sum of value * diff) and `n<i>` (sum of diff over non-NULL
values). A step reads the input's delta and only the touched groups'
accumulators, never the input's old contents, so its cost follows the delta
(and the number of groups), not the data. This is what Materialize and
differential dataflow do with their accumulable reductions.

The output is a linear function of the state (COUNT is `n<i>`, SUM is `s<i>`
unless `n<i>` is 0, a group exists while `rows` > 0), so a step lands the
state first and then derives the output from the state's updates, each with
its own compare_and_append. A crash between the two leaves the output behind
the state; the next step catches it up from the state's updates. A state
shard is created when a view first takes a Spark step (hydrated from the
inputs at that time); from then on its steps stay on this path.
"""

from __future__ import annotations

from pyspark.sql import Column as SparkColumn
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from coordinator_lib.compute.plan import REDUCE_OUTPUT, AccumulatePlan, accumulate_plan
from coordinator_lib.compute.render import (
    DIFF,
    TIME,
    Rendered,
    StepContext,
    consolidate_delta,
    data_columns,
    render,
)
from coordinator_lib.compute.scalar import column_name, to_spark
from coordinator_lib.compute.spark_aggregates import times_copies
from coordinator_lib.compute.spark_numeric import numeric_add
from coordinator_lib.expr.relation import AggregateFunc
from coordinator_lib.persist.machine import Machine
from coordinator_lib.persist.shard import Shard
from coordinator_lib.persist.spark_batches import spark_type
from coordinator_lib.persist.spark_shard import (
    compare_and_append_dataframe,
    snapshot_dataframe,
    updates_between_dataframe,
)
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import ScalarType


def state_shard(output: Shard, plan: AccumulatePlan, since: int, create: bool) -> Shard | None:
    """The view's state shard (created at `since` if asked and missing)."""
    machine = Machine(output.machine.consensus, f"{output.shard_id}-acc")
    if machine.fetch() is None and not create:
        return None
    return Shard.open(machine, output.blob, plan.state_desc, initial_since=since)


def _finite(total: SparkColumn) -> SparkColumn:
    """A float sum that reached infinity fails the job with 22003: the step
    is then planned again off this path (dataflow.step), whose reduce tells
    an overflow (an error of the view) from a sum of infinities (a value)."""
    infinity = F.lit(float("inf"))
    overflow = F.raise_error(F.lit("value out of range: overflow (SQLSTATE 22003)"))
    return F.when(F.abs(total) == infinity, overflow).otherwise(total)


def _in_range(number: SparkColumn, operand: SparkColumn) -> SparkColumn:
    """A numeric past its bound (NULL from `spark_numeric` where `operand`
    is not) fails the job with 22003, as `_finite` does for floats."""
    overflow = F.raise_error(F.lit("numeric field overflow (SQLSTATE 22003)"))
    return F.when(operand.isNotNull() & number.isNull(), overflow).otherwise(number)


def _accumulator_columns(plan: AccumulatePlan) -> list[str]:
    return list(plan.state_desc.names[plan.key_arity :])


def advance_state(
    spark: SparkSession,
    plan: AccumulatePlan,
    frames: dict[GlobalId, Rendered],
    state: Shard,
    lower: int,
    upper: int,
    hydrating: bool,
) -> None:
    """Land the state's changes for [lower, upper) (compare_and_append)."""
    ctx = StepContext(spark, lower, upper, frames, hydrating=hydrating)
    inner = render(plan.reduce.input, ctx)
    if inner.delta is None:
        state.compare_and_append([], Frontier.at(lower), Frontier.at(upper))
        return
    reduce = plan.reduce
    types = reduce.input.desc.types
    keys = [f"k{i}" for i in range(plan.key_arity)]
    accs = _accumulator_columns(plan)
    columns = [
        to_spark(k, types).alias(name) for k, name in zip(reduce.group_key, keys, strict=True)
    ]
    sums = [F.sum(DIFF).alias("rows")]
    floats = set()  # float sums' accumulators: checked against overflow
    numerics = set()  # numeric sums' accumulators: added with all their places
    for i, aggregate in enumerate(reduce.aggregates):
        scalar_type = aggregate.typ(types).scalar_type
        out_type = spark_type(scalar_type)
        value = to_spark(aggregate.expr, types).cast(out_type)
        columns.append(value.alias(f"v{i}"))
        if aggregate.func is AggregateFunc.SUM:
            value = F.col(f"v{i}")
            added = _in_range(times_copies(value, F.col(DIFF), scalar_type), value)
            total = F.sum(added).cast(out_type)
            if scalar_type in (ScalarType.REAL, ScalarType.DOUBLE):
                floats.add(f"s{i}")  # checked once accumulated: a delta's inf reaches it
            if scalar_type is ScalarType.NUMERIC:
                numerics.add(f"s{i}")
            # Never NULL, so a missing previous value is told apart by `rows`.
            sums.append(F.coalesce(total, F.lit(0).cast(out_type)).alias(f"s{i}"))
        sums.append(
            F.coalesce(F.sum(F.when(F.col(f"v{i}").isNotNull(), F.col(DIFF))), F.lit(0)).alias(
                f"n{i}"
            )
        )
    per_time = inner.delta.select(*columns, TIME, DIFF).groupBy(*keys, TIME).agg(*sums)
    running = Window.partitionBy(*keys).orderBy(TIME).rowsBetween(Window.unboundedPreceding, 0)
    cumulative = per_time.select(
        *keys, TIME, *[F.sum(a).over(running).alias(f"d_{a}") for a in accs]
    )
    if hydrating:
        joined = cumulative
        for a in accs:
            joined = joined.withColumn(f"o_{a}", F.lit(None).cast("long"))
    else:
        # The touched groups' accumulators before the step (the state holds
        # one row per group, so this reads as many rows as there are groups).
        old = snapshot_dataframe(state, spark, lower - 1).select(
            *[F.col(k).alias(f"ok_{k}") for k in keys], *[F.col(a).alias(f"o_{a}") for a in accs]
        )
        condition = F.lit(True)
        for k in keys:
            condition = condition & F.col(k).eqNullSafe(F.col(f"ok_{k}"))
        joined = cumulative.join(old, on=condition, how="left").drop(*[f"ok_{k}" for k in keys])
    for a in accs:
        before = F.coalesce(F.col(f"o_{a}"), F.lit(0))
        if a in numerics:
            accumulated = numeric_add(before, F.col(f"d_{a}"))
        else:
            accumulated = before + F.col(f"d_{a}")
        joined = joined.withColumn(a, _finite(accumulated) if a in floats else accumulated)
    order = Window.partitionBy(*keys).orderBy(TIME)
    with_prev = joined.select(
        *keys,
        TIME,
        *accs,
        *[F.coalesce(F.lag(a).over(order), F.col(f"o_{a}")).alias(f"p_{a}") for a in accs],
    )
    inserts = with_prev.filter(F.col("rows") > 0).select(
        *keys, *accs, F.col(TIME).alias("__time"), F.lit(1).cast("long").alias("__diff")
    )
    retractions = with_prev.filter(F.coalesce(F.col("p_rows"), F.lit(0)) > 0).select(
        *keys,
        *[F.col(f"p_{a}").alias(a) for a in accs],
        F.col(TIME).alias("__time"),
        F.lit(-1).cast("long").alias("__diff"),
    )
    changes = inserts.unionByName(retractions)
    consolidated = (
        changes.groupBy(*keys, *accs, "__time")
        .agg(F.sum("__diff").alias("__diff"))
        .filter(F.col("__diff") != 0)
    )
    compare_and_append_dataframe(state, consolidated, Frontier.at(lower), Frontier.at(upper))


def catch_up_output(
    spark: SparkSession, plan: AccumulatePlan, state: Shard, output: Shard, lower: int, upper: int
) -> int:
    """Land the output's changes for [lower, upper), derived from the state's
    updates in that range (a linear map). Returns the rows written."""
    changes = updates_between_dataframe(state, spark, lower, Frontier.at(upper))
    if changes is None:
        output.compare_and_append([], Frontier.at(lower), Frontier.at(upper))
        return 0
    reduce = plan.reduce
    out = [F.col(f"k{i}").alias(column_name(i)) for i in range(plan.key_arity)]
    for i, aggregate in enumerate(reduce.aggregates):
        name = column_name(plan.key_arity + i)
        if aggregate.func is AggregateFunc.COUNT:
            out.append(F.col(f"n{i}").alias(name))
        else:
            out.append(F.when(F.col(f"n{i}") > 0, F.col(f"s{i}")).alias(name))
    finalized = changes.select(*out, F.col("__time").alias(TIME), F.col("__diff").alias(DIFF))
    ctx = StepContext(spark, lower, upper, {REDUCE_OUTPUT: Rendered(None, finalized)})
    rendered = render(plan.top, ctx)
    if rendered.delta is None:
        output.compare_and_append([], Frontier.at(lower), Frontier.at(upper))
        return 0
    arity = plan.top.desc.arity
    delta = consolidate_delta(rendered.delta, arity)
    named = delta.select(
        *[F.col(c).alias(n) for c, n in zip(data_columns(arity), output.desc.names, strict=True)],
        F.col(TIME).alias("__time"),
        F.col(DIFF).alias("__diff"),
    )
    return compare_and_append_dataframe(output, named, Frontier.at(lower), Frontier.at(upper))


__all__ = [
    "REDUCE_OUTPUT",
    "AccumulatePlan",
    "accumulate_plan",
    "advance_state",
    "catch_up_output",
    "state_shard",
]
