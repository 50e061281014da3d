"""Accumulating reduce (compute/accumulate.py): sum/count views keep a state
shard of per-group accumulators; steps read the delta and the touched groups,
and the view stays exact at every time, across a switch from the in-process
engine and across a crash between landing the state and the output."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import SparkSession

from coordinator_lib.compute.accumulate import accumulate_plan, advance_state, state_shard
from coordinator_lib.compute.dataflow import step, step_inputs
from coordinator_lib.expr import (
    AggregateExpr,
    AggregateFunc,
    BinaryFunc,
    CallBinary,
    Column,
    Filter,
    Get,
    Join,
    Literal,
    Project,
    Reduce,
)
from coordinator_lib.repr import ColumnType, RelationDesc, ScalarType, Update
from tests.compute.harness import Environment, run_view

pytestmark = pytest.mark.spark

FACT = RelationDesc.of(("k", "integer"), ("v", "bigint"))
DIM = RelationDesc.of(("k", "integer", False), ("name", "text"))
SQL = (
    "SELECT name, count(*), sum(v), count(v) FROM fact JOIN dim ON fact.k = dim.k"
    " GROUP BY name HAVING count(*) > 1"
)


def _view(fact_id, dim_id):  # type: ignore[no-untyped-def]
    one = Literal(1, ColumnType(ScalarType.INTEGER, False))
    joined = Join((Get(fact_id, FACT), Get(dim_id, DIM)), ((Column(0), Column(2)),))
    reduce = Reduce(
        joined,
        (Column(3),),
        (
            AggregateExpr(AggregateFunc.COUNT, one),
            AggregateExpr(AggregateFunc.SUM, Column(1)),
            AggregateExpr(AggregateFunc.COUNT, Column(1)),
        ),
        ("name", "n", "total", "nv"),
    )
    two = Literal(1, ColumnType(ScalarType.BIGINT, False))
    return Project(Filter(reduce, (CallBinary(BinaryFunc.GT, Column(1), two),)), (0, 1, 2, 3))


def _workload(env: Environment, rng: random.Random, now: int) -> int:
    fact = [Update((rng.randrange(4), rng.choice([None, *range(-5, 6)])), now, 1) for _ in range(4)]
    old = env.shard("fact").snapshot(now - 1)
    if old:
        row, _ = rng.choice(old)
        fact.append(Update(row, now + 1, -1))
    env.advance("fact", fact, now + 2)
    env.advance("dim", [], now + 2)
    return now + 2


def _setup(spark: SparkSession, tmp_path):  # type: ignore[no-untyped-def]
    env = Environment(spark, tmp_path)
    fact_id, dim_id = env.table("fact", FACT), env.table("dim", DIM)
    env.advance("fact", [Update((1, 10), 0, 1), Update((1, None), 0, 1), Update((2, 3), 0, 1)], 1)
    env.advance("dim", [Update((k, f"n{k % 2}"), 0, 1) for k in range(4)], 1)
    expr = _view(fact_id, dim_id)
    assert accumulate_plan(expr) is not None
    description, output = run_view(env, "acc", expr, as_of=0)
    return env, description, output


def test_accumulated_view_matches_duckdb_at_every_time(spark: SparkSession, tmp_path) -> None:  # type: ignore[no-untyped-def]
    env, description, output = _setup(spark, tmp_path)
    rng = random.Random(3)
    now = 1
    inputs = {id: shard for id, shard in env.tables.values()}
    for _ in range(4):
        result = step(spark, description, inputs, output, local_max_rows=0)
        assert result is not None and result.rules == [("Reduce", "incremental: accumulated")]
        now = _workload(env, rng, now)
    step(spark, description, inputs, output, local_max_rows=0)
    assert output.upper().time == now
    assert state_shard(output, accumulate_plan(description.expr), 0, create=False) is not None
    assert env.check(SQL, output, since=0) == now


def test_view_switches_from_local_engine_to_accumulated(spark: SparkSession, tmp_path) -> None:  # type: ignore[no-untyped-def]
    env, description, output = _setup(spark, tmp_path)
    rng = random.Random(5)
    now = 1
    inputs = {id: shard for id, shard in env.tables.values()}
    for round in range(4):
        spark_engine = round >= 2
        result = step(
            spark, description, inputs, output, local_max_rows=0 if spark_engine else 10**9
        )
        assert result is not None and result.engine == ("spark" if spark_engine else "local")
        now = _workload(env, rng, now)
    step(spark, description, inputs, output, local_max_rows=10**9)  # stays accumulated
    assert output.upper().time == now
    assert env.check(SQL, output, since=0) == now


def test_crash_between_state_and_output_is_caught_up(spark: SparkSession, tmp_path) -> None:  # type: ignore[no-untyped-def]
    env, description, output = _setup(spark, tmp_path)
    inputs = {id: shard for id, shard in env.tables.values()}
    step(spark, description, inputs, output, local_max_rows=0)
    now = _workload(env, random.Random(7), 1)
    plan = accumulate_plan(description.expr)
    assert plan is not None
    state = state_shard(output, plan, 0, create=False)
    assert state is not None
    # Land the state's step, then "crash" before the output's.
    lower = state.upper().time
    frames, hydrating = step_inputs(spark, inputs, state.since().time, lower, now)
    advance_state(spark, plan, frames, state, lower, now, hydrating)
    assert state.upper().time == now and output.upper().time == 1
    step(spark, description, inputs, output, local_max_rows=0)
    assert output.upper().time == now
    assert env.check(SQL, output, since=0) == now
