"""Hand-built plans maintained by the Spark renderer agree with DuckDB at
every readable time, under random inserts, updates and deletes."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.expr import (
    AggregateExpr,
    AggregateFunc,
    BinaryFunc,
    CallBinary,
    Column,
    Distinct,
    Filter,
    Get,
    Join,
    Literal,
    Project,
    Reduce,
)
from coordinator_lib.repr import ColumnType, RelationDesc, ScalarType, Update
from tests.compute.harness import Environment, run_view

FACT = RelationDesc.of(("k", "integer"), ("v", "bigint"))
DIM = RelationDesc.of(("k", "integer", False), ("name", "text"))


def _plans(fact_id, dim_id):  # type: ignore[no-untyped-def]
    fact, dim = Get(fact_id, FACT), Get(dim_id, DIM)
    joined = Join((fact, dim), ((Column(0), Column(2)),))
    one = Literal(1, ColumnType(ScalarType.INTEGER, False))
    return {
        "filter": (
            Filter(
                fact,
                (
                    CallBinary(
                        BinaryFunc.GT, Column(1), Literal(0, ColumnType(ScalarType.BIGINT, False))
                    ),
                ),
            ),
            "SELECT k, v FROM fact WHERE v > 0",
        ),
        "join": (
            Project(joined, (3, 1)),
            "SELECT name, v FROM fact JOIN dim ON fact.k = dim.k",
        ),
        "join_group": (
            Reduce(
                joined,
                (Column(3),),
                (
                    AggregateExpr(AggregateFunc.SUM, Column(1)),
                    AggregateExpr(AggregateFunc.COUNT, one),
                    AggregateExpr(AggregateFunc.MIN, Column(1)),
                    AggregateExpr(AggregateFunc.MAX, Column(1)),
                ),
                ("name", "total", "n", "lo", "hi"),
            ),
            "SELECT name, sum(v), count(*), min(v), max(v)"
            " FROM fact JOIN dim ON fact.k = dim.k GROUP BY name",
        ),
        "group_nullable_key": (
            Reduce(
                fact,
                (Column(0),),
                (
                    AggregateExpr(AggregateFunc.COUNT, Column(1)),
                    AggregateExpr(AggregateFunc.SUM, Column(1)),
                ),
                ("k", "n", "s"),
            ),
            "SELECT k, count(v), sum(v) FROM fact GROUP BY k",
        ),
        "distinct": (
            Distinct(Project(fact, (0,))),
            "SELECT DISTINCT k FROM fact",
        ),
        "int_div": (
            Project(
                Filter(
                    fact,
                    (
                        CallBinary(
                            BinaryFunc.NOT_EQ,
                            Column(0),
                            Literal(0, ColumnType(ScalarType.INTEGER, False)),
                        ),
                    ),
                ),
                (0,),
            ),
            "SELECT k FROM fact WHERE k <> 0",
        ),
    }


updates_strategy = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["fact", "dim"]),
            st.integers(0, 4),
            st.one_of(st.none(), st.integers(-3, 3)),
            st.booleans(),
        ),
        max_size=5,
    ),
    min_size=1,
    max_size=4,
)


PLANS = ["filter", "join", "join_group", "group_nullable_key", "distinct", "int_div"]


@pytest.mark.spark
@pytest.mark.parametrize("plan", PLANS)
@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rounds=updates_strategy, seed=st.integers(0, 1000))
def test_spark_view_matches_duckdb_at_every_time(
    spark, tmp_path_factory, plan, rounds, seed
) -> None:  # type: ignore[no-untyped-def]
    _check(spark, tmp_path_factory, "spark", plan, rounds, seed)


@pytest.mark.parametrize("plan", PLANS)
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rounds=updates_strategy, seed=st.integers(0, 1000))
def test_local_view_matches_duckdb_at_every_time(tmp_path_factory, plan, rounds, seed) -> None:  # type: ignore[no-untyped-def]
    """In-process: no Spark session, so no JVM."""
    _check(None, tmp_path_factory, "local", plan, rounds, seed)


def _check(spark, tmp_path_factory, engine: str, plan: str, rounds, seed: int) -> None:  # type: ignore[no-untyped-def]
    """Run random rounds through the view on `engine`; compare at every time."""
    rng = random.Random(seed)
    env = Environment(spark, tmp_path_factory.mktemp("env"))
    fact_id = env.table("fact", FACT)
    dim_id = env.table("dim", DIM)
    expr, sql = _plans(fact_id, dim_id)[plan]
    present: dict[str, list[tuple]] = {"fact": [], "dim": []}
    # Initial contents at time 0, then the view starts at as_of 0.
    env.advance("fact", [Update((1, 10), 0, 1), Update((None, 5), 0, 1)], 1)
    env.advance("dim", [Update((1, "a"), 0, 1), Update((2, "b"), 0, 1)], 1)
    present["fact"] += [(1, 10), (None, 5)]
    present["dim"] += [(1, "a"), (2, "b")]
    description, output = run_view(env, plan, expr, as_of=0)
    env.step_view(description, output, engine)
    now = 1
    for changes in rounds:
        batch = {"fact": [], "dim": []}
        for position, (table, key, value, delete) in enumerate(changes):
            # Several times within one step, in order, so a delete never
            # precedes the insert of the row it removes.
            t = now + (position * 3) // max(len(changes), 1)
            if delete and present[table]:
                row = present[table].pop(rng.randrange(len(present[table])))
                batch[table].append(Update(row, t, -1))
            elif table == "fact":
                row = (key, value)
                present[table].append(row)
                batch[table].append(Update(row, t, 1))
            elif all(r[0] != key for r in present["dim"]):
                row = (key, f"n{key % 3}")
                present["dim"].append(row)
                batch["dim"].append(Update(row, t, 1))
        now += 3
        for table in ("fact", "dim"):
            env.advance(table, batch[table], now)
        env.step_view(description, output, engine)
        assert output.upper().time == now
    assert env.check(sql, output, since=0) == now
