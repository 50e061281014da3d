"""Each delta rule of render.py against evaluation from scratch.

A random history of updates to two inputs (hypothesis picks the seed, so
every example is a busy one) is split at a random `lower` into
the inputs' contents before it (old) and their updates in [lower, upper)
(delta). Rendering an operator incrementally and applying its delta to its
old output must give, at every time in [lower - 1, upper), what rendering it
from scratch gives: the renderer's hydration mode (old empty, the inputs'
contents at t as a delta at as_of = t).
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator_lib.compute.render import (
    DIFF,
    TIME,
    Rendered,
    StepContext,
    data_columns,
    empty_frame,
    render,
)
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
    Map,
    Negate,
    Project,
    Reduce,
    Threshold,
    Union,
)
from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.repr import ColumnType, GlobalId, RelationDesc, ScalarType

pytestmark = pytest.mark.spark

A_ID, B_ID = GlobalId.user(1), GlobalId.user(2)
DESC = RelationDesc.of(("k", "integer"), ("v", "bigint"))
A, B = Get(A_ID, DESC), Get(B_ID, DESC)
UPPER = 4  # updates happen at times 0..3
BIGINT = ColumnType(ScalarType.BIGINT, False)
ALL_AGGREGATES = (
    AggregateExpr(AggregateFunc.COUNT, Literal(True, ColumnType(ScalarType.BOOLEAN, False))),
    AggregateExpr(AggregateFunc.COUNT, Column(1)),
    AggregateExpr(AggregateFunc.SUM, Column(1)),
    AggregateExpr(AggregateFunc.MIN, Column(1)),
    AggregateExpr(AggregateFunc.MAX, Column(1)),
    AggregateExpr(AggregateFunc.COUNT, Column(1), distinct=True),
    AggregateExpr(AggregateFunc.SUM, Column(1), distinct=True),
)

OPERATORS: dict[str, RelationExpr] = {
    "filter": Filter(A, (CallBinary(BinaryFunc.GT, Column(1), Literal(0, BIGINT)),)),
    "map": Map(A, (CallBinary(BinaryFunc.MUL, Column(1), Literal(2, BIGINT)),)),
    "project": Project(A, (1, 0, 1)),
    "union": Union((A, B)),
    "negate": Negate(A),
    "join": Join((A, B), ((Column(0), Column(2)),)),
    "reduce": Reduce(A, (Column(0),), ALL_AGGREGATES),
    "reduce_global": Reduce(A, (), ALL_AGGREGATES),
    "distinct": Distinct(A),
    # Threshold only matters over negative multiplicities: EXCEPT ALL.
    "threshold": Threshold(Union((A, Negate(B)))),
}

Update = tuple[tuple[Any, ...], int, int]


def _history(rng: random.Random) -> list[Update]:
    """Random updates at times 0..UPPER-1 that never make a multiplicity
    negative: inserts of small rows (NULLs included), deletes of present ones."""
    present: Counter = Counter()
    out: list[Update] = []
    for t in sorted(rng.randrange(UPPER) for _ in range(rng.randint(4, 10))):
        if present and rng.random() < 0.35:
            victim = rng.choice(sorted(present, key=repr))
            present[victim] -= 1
            present = +present
            out.append((victim, t, -1))
        else:
            r = (rng.choice([None, 0, 1, 2]), rng.choice([None, -2, -1, 0, 1, 2]))
            present[r] += 1
            out.append((r, t, 1))
    return out


def _frame(spark: SparkSession, updates: list[Update], with_time: bool) -> DataFrame:
    """Rows with `__diff`, after `__time` when `with_time`."""
    schema = empty_frame(spark, DESC, with_time=with_time).schema
    rows = [(*r, t, d) if with_time else (*r, d) for r, t, d in updates]
    return spark.createDataFrame(rows, schema)


def _collect(frames: list[DataFrame], arity: int) -> dict[int, Counter]:
    """time -> consolidated rows of the union of `frames` (one Spark job)."""
    if not frames:
        return {}
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    out: dict[int, Counter] = {}
    for r in union.collect():
        row = tuple(_as_value(r[c]) for c in data_columns(arity))
        out.setdefault(r[TIME], Counter())[row] += r[DIFF]
    return out


def _as_value(value: Any) -> Any:
    """A Spark value as the in-process engine holds it (arrays as tuples)."""
    return tuple(_as_value(v) for v in value) if isinstance(value, list) else value


def _contents(updates: list[Update], t: int) -> list[Update]:
    total: Counter = Counter()
    for r, time, d in updates:
        if time <= t:
            total[r] += d
    return [(r, t, d) for r, d in total.items() if d != 0]


@pytest.mark.parametrize("operator", list(OPERATORS))
@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32))
def test_incremental_rule_equals_evaluation_from_scratch(
    spark: SparkSession, operator: str, seed: int
) -> None:
    expr = OPERATORS[operator]
    arity = expr.desc.arity
    rng = random.Random(seed)
    histories = {A_ID: _history(rng), B_ID: _history(rng)}
    lower = rng.randint(1, UPPER - 1)

    # Incremental: old contents at lower - 1, updates in [lower, UPPER).
    inputs = {}
    for id, updates in histories.items():
        old = _contents(updates, lower - 1)
        delta = [u for u in updates if u[1] >= lower]
        inputs[id] = Rendered(
            _frame(spark, old, False), _frame(spark, delta, True) if delta else None
        )
    rendered = render(expr, StepContext(spark, lower, UPPER, inputs))
    parts = [] if rendered.delta is None else [rendered.delta]
    if rendered.old is not None:
        parts.append(rendered.old.withColumn(TIME, F.lit(lower - 1).cast("long")))
    incremental = _collect(parts, arity)
    assert set(incremental) <= set(range(lower - 1, UPPER))

    # From scratch: hydrate at every time t (everything a delta at as_of = t).
    scratch_parts = []
    for t in range(lower - 1, UPPER):
        fresh = {
            id: Rendered(None, _frame(spark, _contents(updates, t), True))
            for id, updates in histories.items()
        }
        out = render(expr, StepContext(spark, t, t + 1, fresh, hydrating=True)).delta
        if out is not None:
            scratch_parts.append(out)
    scratch = _collect(scratch_parts, arity)

    accumulated: Counter = Counter()
    for t in range(lower - 1, UPPER):
        accumulated.update(incremental.get(t, Counter()))
        got = Counter({r: d for r, d in accumulated.items() if d != 0})
        want = Counter({r: d for r, d in scratch.get(t, Counter()).items() if d != 0})
        assert got == want, f"{operator} at {t} (lower {lower}): {dict(got)} != {dict(want)}"
