"""A dataflow: one view's plan kept up to date in its output shard.

`step()` advances the output from its upper u0 to u1 = the least upper of the
inputs, rendering the plan's delta rules (render.py) and landing the result
with one compare_and_append, so any number of replicas may run the same
dataflow: the CaS on the upper decides who lands each step, and a replica that
loses simply finds the output already advanced.

The first step (u0 == as_of) hydrates: every input's snapshot at as_of counts
as a delta at as_of, on top of its updates in (as_of, u1). A restarted
replica resumes at the output's durable upper: nothing is recomputed from
scratch, nothing is written twice.

When every input is closed (a view of constants has no inputs at all), the
view is complete for all time: one step renders [lower, FOREVER) and lands
with the empty upper, and the dataflow never steps again.

A step also lands the view's error collection (compute/error_collection.py):
the updates of the rows its scalars fail on, and its inputs' errors, land
in the view's error shard just before its output.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator_lib.compute.accumulate import (
    AccumulatePlan,
    accumulate_plan,
    advance_state,
    catch_up_output,
    state_shard,
)
from coordinator_lib.compute.arranged import (
    StepReads,
    StepState,
    arranged_upper,
    has_state,
    hydrate,
    is_stateful,
    land,
    prepare,
    render_step,
)
from coordinator_lib.compute.engine import (
    DELTA_SHARE,
    HYDRATE_SHARE,
    LOCAL_MAX_ROWS,
    Engine,
    Work,
    choose_engine,
)
from coordinator_lib.compute.error_collection import (
    error_shard,
    input_errors,
    land_errors,
    landed_upper,
)
from coordinator_lib.compute.plan import Step as PlanStep
from coordinator_lib.compute.plan import plan_can_fail
from coordinator_lib.compute.render import (
    DIFF,
    TIME,
    Rendered,
    StepContext,
    consolidate_delta,
    data_columns,
    render,
)
from coordinator_lib.compute.rules import Rule
from coordinator_lib.compute.spark_errors import exact_on_failure, is_data_error
from coordinator_lib.compute.spark_spool import spooled_rows, write_spool
from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.persist.errors import UpperMismatch
from coordinator_lib.persist.scratch import scratch_dir
from coordinator_lib.persist.shard import Shard
from coordinator_lib.persist.spark_shard import (
    compare_and_append_dataframe,
    snapshot_dataframe,
    updates_between_dataframe,
)
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.repr.update import Row, Update

# The upper a step renders to when its inputs are closed: later than any
# time, so every update and temporal event is taken; it lands as the empty
# frontier (`step_frontier`).
FOREVER = 2**62


def step_frontier(upper: int) -> Frontier:
    """The frontier a step to `upper` leaves behind."""
    return Frontier.empty() if upper == FOREVER else Frontier.at(upper)


@dataclass(frozen=True)
class DataflowDescription:
    """What to build (seed 001's DataflowDescription, reduced to one object):
    `expr` over the `imports`, exported to the storage collection `sink_id`
    (a materialized view) and/or kept as an index arrangement."""

    id: GlobalId
    expr: RelationExpr
    as_of: int
    sink_id: GlobalId | None = None
    index_key: tuple[int, ...] | None = None
    debug_name: str = ""

    @property
    def imports(self) -> set[GlobalId]:
        return self.expr.depends_on()

    @property
    def desc(self) -> RelationDesc:
        return self.expr.desc


@dataclass
class StepResult:
    lower: int
    upper: int
    rows_written: int
    landed: bool  # False: another replica landed this step first
    seconds: float
    rules: list[tuple[str, str]] = field(default_factory=list)
    engine: str = "spark"  # or "local"
    # What the step read (in-process steps; None on Spark, which does not count).
    reads: StepReads | None = None
    # "spark": Spark built the view's arrangements before this in-process
    # step (arranged.hydrate; its reads count in `reads.snapshot`).
    hydrated_by: str | None = None


def _as_collection(df: DataFrame, arity: int, with_time: bool) -> DataFrame:
    """Rename a shard DataFrame's data columns to c0, c1, ..."""
    names = [c for c in df.columns if c not in (TIME, DIFF, "__time", "__diff")]
    columns = [F.col(f"`{n}`").alias(c) for n, c in zip(names, data_columns(arity), strict=True)]
    extra = [TIME] if with_time else []
    return df.select(*columns, *extra, DIFF)


def step_inputs(
    spark: SparkSession, shards: dict[GlobalId, Shard], as_of: int, lower: int, upper: int
) -> tuple[dict[GlobalId, Rendered], bool]:
    """Each input's contents at lower - 1 and its updates in [lower, upper)."""
    hydrating = lower == as_of
    inputs: dict[GlobalId, Rendered] = {}
    for id, shard in shards.items():
        arity = shard.desc.arity
        if hydrating:
            snapshot = _as_collection(snapshot_dataframe(shard, spark, as_of), arity, False)
            delta: DataFrame | None = snapshot.withColumn(TIME, F.lit(as_of).cast("long"))
            later = updates_between_dataframe(shard, spark, as_of + 1, Frontier.at(upper))
            if later is not None:
                assert delta is not None
                delta = delta.unionByName(_as_collection(later, arity, True))
            inputs[id] = Rendered(None, delta)
        else:
            old = _as_collection(snapshot_dataframe(shard, spark, lower - 1), arity, False)
            updates = updates_between_dataframe(shard, spark, lower, Frontier.at(upper))
            inputs[id] = Rendered(
                old, None if updates is None else _as_collection(updates, arity, True)
            )
    return inputs, hydrating


def input_upper(shards: dict[GlobalId, Shard]) -> Frontier:
    """The least upper of the inputs: everything before it is known."""
    upper = Frontier.empty()
    for shard in shards.values():
        upper = upper.meet(shard.upper())
    return upper


def plan_step(
    spark: SparkSession,
    description: DataflowDescription,
    inputs: dict[GlobalId, Shard],
    lower: int,
    upper: int,
) -> tuple[DataFrame | None, list[Update], list[tuple[str, str]]]:
    """The view's consolidated updates in [lower, upper), named like its desc
    (plus `__time`, `__diff`), as a lazy DataFrame (None if there are none);
    its error updates (collected: a Spark job if the plan can fail)."""
    frames, hydrating = step_inputs(spark, inputs, description.as_of, lower, upper)
    ctx = StepContext(spark, lower, upper, frames, hydrating=hydrating)
    rendered = render(description.expr, ctx)
    errors = input_errors(inputs.values(), description.as_of, lower, upper)
    if ctx.errors:
        frame = functools.reduce(lambda a, b: a.unionByName(b), ctx.errors)
        counted = frame.groupBy("code", "message", TIME).agg(F.sum(DIFF).alias(DIFF))
        errors += [
            Update((r["code"], r["message"]), r[TIME], r[DIFF])
            for r in counted.filter(F.col(DIFF) != 0).collect()
        ]
    if rendered.delta is None:
        return None, errors, ctx.rules
    arity = description.desc.arity
    delta = consolidate_delta(rendered.delta, arity)
    names = description.desc.names
    named = delta.select(
        *[F.col(c).alias(n) for c, n in zip(data_columns(arity), names, strict=True)],
        F.col(TIME).alias("__time"),
        F.col(DIFF).alias("__diff"),
    )
    return named, errors, ctx.rules


def next_step_bounds(
    lower: int | None, inputs: dict[GlobalId, Shard], until: int | None
) -> int | None:
    """The upper the next step can reach from `lower` (FOREVER once every
    input is closed), or None."""
    if lower is None:
        return None
    available = input_upper(inputs).time
    if available is None and until is None:
        return FOREVER
    upper = available if until is None else (until if available is None else min(available, until))
    if upper is None or upper <= lower:
        return None
    return upper


def stored_rows(inputs: dict[GlobalId, Shard]) -> int:
    """Updates the inputs store, from batch metadata (no data read)."""
    return sum(shard.statistics().rows for shard in inputs.values())


def stored_and_changed_rows(inputs: dict[GlobalId, Shard], lower: int) -> tuple[int, int]:
    """Updates the inputs store, and those at times from `lower` on (at most:
    a batch that also holds older times counts whole), from batch metadata
    read once per input (one consensus read each)."""
    stored = changed = 0
    for shard in inputs.values():
        for batch in shard.state().batches:
            stored += batch.rows
            if batch.upper is None or batch.upper > lower:
                changed += batch.rows
    return stored, changed


def plan_step_local(
    description: DataflowDescription,
    inputs: dict[GlobalId, Shard],
    lower: int,
    upper: int,
    state: StepState | None = None,
    reads: StepReads | None = None,
) -> tuple[list[Update], list[Update], list[tuple[str, str]]]:
    """Like plan_step, in-process: the consolidated updates in [lower, upper)
    and the error updates; stateful rules read `state` (compute/arranged.py)."""
    return render_step(
        description.expr,
        description.as_of,
        inputs,
        lower,
        upper,
        state,
        StepReads() if reads is None else reads,
    )


def step(
    spark: SparkSession,
    description: DataflowDescription,
    inputs: dict[GlobalId, Shard],
    output: Shard,
    until: int | None = None,
    local_max_rows: int = LOCAL_MAX_ROWS,
) -> StepResult | None:
    """Advance the output shard to the inputs' least upper (or `until`),
    landing the step with compare_and_append; None if there is nothing to do.
    Small inputs run in-process, larger ones on Spark."""
    started = time.perf_counter()
    lower = output.upper().time
    upper = next_step_bounds(lower, inputs, until)
    if upper is None or lower is None:
        return None
    rows_stored, rows_changed = stored_and_changed_rows(inputs, lower)
    # Over large inputs a small step runs in-process if the view has state,
    # or Spark can build it (inputs too large to read whole in-process).
    arranged = rows_stored > local_max_rows and has_state(description.expr, output)
    spark_hydrates = (
        spark is not None
        and lower > description.as_of
        and rows_stored > HYDRATE_SHARE * local_max_rows
        and is_stateful(description.expr)
    )
    engine = choose_engine(
        Work.STEP,
        rows_stored,
        local_max_rows,
        delta_rows=rows_changed,
        arranged=arranged,
        spark_hydrates=spark_hydrates,
    )
    # Accumulated state only pays off for steps to come: a closing step has none.
    plan = accumulate_plan(description.expr) if upper != FOREVER else None
    if plan is not None and not _has_errors(description.expr, inputs, output):
        existing = state_shard(output, plan, lower, create=False)
        keep_state = choose_engine(
            Work.STATE,
            rows_stored,
            local_max_rows,
            existing is not None,
            rows_changed,
            arranged,
            spark_hydrates,
        )
        if keep_state is Engine.SPARK:
            try:
                return _accumulating_step(spark, description, plan, inputs, output, until, started)
            except Exception as error:
                if not is_data_error(error):
                    raise
                # A value fails: the view keeps errors from now on, by the rules below.
                error_shard(output, create=True)
    # A step that landed its errors but not its output: redo it to the same upper.
    landed = landed_upper(output, lower)
    upper = upper if landed is None else landed
    rows = 0
    reads = None
    hydrated_by = None
    try:
        if engine is Engine.LOCAL:
            reads = StepReads()
            closing = upper == FOREVER  # no steps to come: it keeps no state
            if (
                not closing
                and spark_hydrates
                and _state_far_behind(description, inputs, output, lower, local_max_rows)
            ):
                with scratch_dir(output.blob) as spool:
                    olds = _spark_olds(spark, inputs, lower, spool)
                    hydrate(description, inputs, output, lower, olds, reads)
                hydrated_by = "spark"
            state = None if closing else prepare(description, inputs, output, lower, reads)
            updates, errors, rules = plan_step_local(
                description, inputs, lower, upper, state, reads
            )
            if landed is None:
                land_errors(output, errors, lower, upper)
            output.compare_and_append(updates, Frontier.at(lower), step_frontier(upper))
            if state is not None:
                land(state, upper)
            rows = len(updates)
        else:
            rows, rules = exact_on_failure(
                lambda: _spark_step(spark, description, inputs, output, lower, upper, landed)
            )
    except UpperMismatch:
        return StepResult(
            lower, upper, 0, False, time.perf_counter() - started, [], engine, reads, hydrated_by
        )
    seconds = time.perf_counter() - started
    return StepResult(lower, upper, rows, True, seconds, rules, engine, reads, hydrated_by)


def _state_far_behind(
    description: DataflowDescription,
    inputs: dict[GlobalId, Shard],
    output: Shard,
    lower: int,
    local_max_rows: int,
) -> bool:
    """Whether the view's arrangements are missing, or behind `lower` by
    more changes than an in-process step replays (a Spark step moved the
    output on): Spark builds them again rather than Python."""
    upper = arranged_upper(description.expr, output, inputs)
    if upper is None:
        return True
    if upper >= lower:
        return False
    _, behind = stored_and_changed_rows(inputs, upper)
    return behind >= local_max_rows // DELTA_SHARE


def _spark_olds(
    spark: SparkSession, inputs: dict[GlobalId, Shard], at: int, directory: Path
) -> Callable[[PlanStep], Callable[[], Iterable[tuple[Row, int]]]]:
    """A plan step's contents before `at`, computed by Spark (one job) and
    written as Parquet to a directory in `directory` (compute/spark_spool.py),
    read back as rows a batch at a time at each use: a stateful operator's
    input, for arranged.hydrate, which holds a chunk of it, not all of it."""

    def olds(step: PlanStep) -> Callable[[], Iterable[tuple[Row, int]]]:
        spooled: list[Path] = []

        def rows() -> Iterator[tuple[Row, int]]:
            expr = step.expr
            if not spooled:
                sub = DataflowDescription(GlobalId.transient(0), expr, at - 1)
                used = {id: inputs[id] for id in expr.depends_on()}
                frame, _, _ = plan_step(spark, sub, used, at - 1, at)
                path = directory / f"olds-{sum(1 for _ in directory.iterdir())}"
                if frame is not None:
                    write_spool(frame, expr.desc, str(path))
                spooled.append(path)
            if spooled[0].exists():
                yield from spooled_rows(str(spooled[0]), expr.desc.arity)

        return rows

    return olds


def _spark_step(
    spark: SparkSession,
    description: DataflowDescription,
    inputs: dict[GlobalId, Shard],
    output: Shard,
    lower: int,
    upper: int,
    landed: int | None,
) -> tuple[int, list[tuple[str, str]]]:
    """A step on Spark: (rows written, rules). Its errors land only once the
    output's batch is written, so a job that fails on a value has landed
    nothing and the step can be planned again with exact errors."""
    delta, errors, rules = plan_step(spark, description, inputs, lower, upper)

    def land_step_errors() -> None:
        if landed is None:
            land_errors(output, errors, lower, upper)

    if delta is None:
        land_step_errors()
        output.compare_and_append([], Frontier.at(lower), step_frontier(upper))
        return 0, rules
    rows = compare_and_append_dataframe(
        output, delta, Frontier.at(lower), step_frontier(upper), before_append=land_step_errors
    )
    return rows, rules


def _has_errors(expr: RelationExpr, inputs: dict[GlobalId, Shard], output: Shard) -> bool:
    """Whether the view can have errors: the accumulating path keeps none.
    A view that ever had one (its error shard exists) stays off it."""
    return (
        plan_can_fail(expr)
        or error_shard(output) is not None
        or any(error_shard(s) is not None for s in inputs.values())
    )


def _accumulating_step(
    spark: SparkSession,
    description: DataflowDescription,
    plan: AccumulatePlan,
    inputs: dict[GlobalId, Shard],
    output: Shard,
    until: int | None,
    started: float,
) -> StepResult | None:
    """Advance the state shard, then the output from the state's updates
    (compute/accumulate.py). A state created now is hydrated at the output's
    last complete time, or at the as_of if the view is new."""
    out_lower = output.upper().time
    assert out_lower is not None
    hydrate_at = max(out_lower - 1, description.as_of)
    state = state_shard(output, plan, hydrate_at, create=True)
    assert state is not None
    state_since, state_lower = state.since().time, state.upper().time
    assert state_since is not None and state_lower is not None
    fresh = state_lower == state_since  # hydrates at out_lower - 1 on this step
    if state_lower < out_lower and not fresh:
        raise RuntimeError(
            f"state shard {state.shard_id} is at {state_lower}, behind its view at {out_lower}"
        )
    upper = next_step_bounds(state_lower, inputs, until)
    if upper is not None:
        frames, hydrating = step_inputs(spark, inputs, state_since, state_lower, upper)
        # Losing the race means another replica advanced the state: catch up.
        with contextlib.suppress(UpperMismatch):
            advance_state(spark, plan, frames, state, state_lower, upper, hydrating)
    state_upper = state.upper().time
    assert state_upper is not None
    if state_upper <= out_lower:
        return None
    try:
        rows = catch_up_output(spark, plan, state, output, out_lower, state_upper)
    except UpperMismatch:
        return StepResult(out_lower, state_upper, 0, False, time.perf_counter() - started, [])
    rules = [("Reduce", Rule.ACCUMULATED.value)]
    return StepResult(
        out_lower, state_upper, rows, True, time.perf_counter() - started, rules, "spark"
    )
