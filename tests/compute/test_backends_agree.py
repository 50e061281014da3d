"""The two backends of the delta rules (compute/spark_backend.py and
compute/local_backend.py) on the same plans and inputs give the same step:
the same old contents, the same updates at the same times, the same error
updates and the same rules. One plan per family of rules (map-filter-project
with failing rows, joins, reduces, TopK / Window, temporal filters), each
incremental from a random lower and hydrating, so a primitive that one
backend gets wrong (a join's time rule, a group's retraction) shows here
before it shows in a differential suite.

Histories as in test_delta_rules.py."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from coordinator_lib.compute.local import LocalContext, LocalRendered, render_local
from coordinator_lib.compute.render import DIFF, TIME, Rendered, StepContext, render
from coordinator_lib.expr.relation import (
    AggregateExpr,
    AggregateFunc,
    Distinct,
    Filter,
    Frame,
    FrameMode,
    Join,
    Map,
    Negate,
    OrderKey,
    Project,
    Reduce,
    RelationExpr,
    Threshold,
    TopK,
    Union,
    Window,
    WindowExpr,
    WindowFunc,
)
from coordinator_lib.expr.scalar import BinaryFunc, CallBinary, Column, Literal
from coordinator_lib.expr.temporal import TemporalBound, TemporalFilter
from coordinator_lib.repr.update import Update
from tests.compute.test_delta_rules import (
    A_ID,
    B_ID,
    BIGINT,
    UPPER,
    A,
    B,
    _collect,
    _contents,
    _frame,
    _history,
)

pytestmark = pytest.mark.spark

TWO = Literal(2, BIGINT)
PLANS: dict[str, RelationExpr] = {
    # 10 / v fails where v = 0: error updates on both, at the same times.
    "map_filter_project": Project(
        Filter(
            Map(A, (CallBinary(BinaryFunc.DIV, Literal(10, BIGINT), Column(1)),)),
            (CallBinary(BinaryFunc.GT, Column(2), Literal(-10, BIGINT)),),
        ),
        (2, 0),
    ),
    "join_then_reduce": Reduce(
        Join((A, B), ((Column(0), Column(2)),)),
        (Column(0),),
        (
            AggregateExpr(AggregateFunc.COUNT, Column(3)),
            AggregateExpr(AggregateFunc.SUM, Column(1)),
            AggregateExpr(AggregateFunc.MIN, Column(3)),
            AggregateExpr(AggregateFunc.MAX, Column(1), distinct=True),
        ),
    ),
    "three_way_join_distinct": Distinct(
        Project(Join((A, B, A), ((Column(0), Column(2), Column(4)),)), (0, 1, 5))
    ),
    "topk_over_except_all": TopK(
        Threshold(Union((A, Negate(B)))), (0,), (OrderKey(1, desc=True),), limit=1
    ),
    "window": Window(
        A,
        (0,),
        (OrderKey(1),),
        (WindowExpr(WindowFunc.ROW_NUMBER), WindowExpr(WindowFunc.SUM, (1,))),
    ),
    # frames: RANGE offsets over a descending key with NULLs (NULL rows are
    # their own peers), ROWS offsets, value functions at frame positions,
    # lag by a per-row offset (k, NULL included)
    "window_frames": Window(
        A,
        (),
        (OrderKey(1, desc=True),),
        (
            WindowExpr(WindowFunc.SUM, (1,), frame=Frame(FrameMode.RANGE, -1, 1)),
            WindowExpr(WindowFunc.COUNT, (0,), frame=Frame(FrameMode.RANGE, None, -1)),
            WindowExpr(WindowFunc.FIRST_VALUE, (1,), frame=Frame(FrameMode.RANGE, 1, None)),
            WindowExpr(WindowFunc.LAST_VALUE, (0,), frame=Frame(FrameMode.ROWS, -2, -1)),
            WindowExpr(WindowFunc.NTH_VALUE, (0,), 2, frame=Frame(FrameMode.ROWS, None, 0)),
            WindowExpr(WindowFunc.MAX, (0,), frame=Frame(FrameMode.ROWS, 1, 2)),
            WindowExpr(WindowFunc.LAG, (1, 0), offset=None),
            WindowExpr(WindowFunc.COUNT, (0,), frame=Frame(FrameMode.ROWS, -1, -2)),  # empty
            # array_agg(v ORDER BY k DESC NULLS LAST): its record built from (v, k)
            WindowExpr(
                WindowFunc.ARRAY_AGG,
                (1, 0),
                order=((True, False),),
                frame=Frame(FrameMode.ROWS, -1, 1),
            ),
        ),
    ),
    # present from v until v + 2 (ms), the times of the history
    "temporal": TemporalFilter(
        A,
        (
            TemporalBound(BinaryFunc.GTE, Column(1)),
            TemporalBound(BinaryFunc.LT, CallBinary(BinaryFunc.ADD, Column(1), TWO)),
        ),
    ),
}

Step = tuple[Counter[Any], Counter[Any], Counter[Any], list[tuple[str, str]]]


def _local(expr: RelationExpr, histories: dict[Any, Any], lower: int, hydrating: bool) -> Step:
    """(old, delta, errors, rules) of one in-process step."""
    inputs = {}
    for id, updates in histories.items():
        if hydrating:
            now = [Update(r, lower, d) for r, _, d in _contents(updates, lower)]
            inputs[id] = LocalRendered(None, now or None)
        else:
            old = [(r, d) for r, _, d in _contents(updates, lower - 1)]
            delta = [Update(r, t, d) for r, t, d in updates if t >= lower]
            inputs[id] = LocalRendered(lambda old=old: old, delta or None)
    upper = lower + 1 if hydrating else UPPER
    ctx = LocalContext(lower, upper, inputs, hydrating=hydrating)
    rendered = render_local(expr, ctx)
    old: Counter[Any] = Counter()
    for row, diff in rendered.old() if rendered.old is not None else []:
        old[row] += diff
    delta: Counter[Any] = Counter()
    for row, t, diff in rendered.delta or []:
        delta[(row, t)] += diff
    errors: Counter[Any] = Counter()
    for row, t, diff in ctx.errors:
        errors[(row, t)] += diff
    return _nonzero(old), _nonzero(delta), _nonzero(errors), ctx.rules


def _spark(
    spark: SparkSession, expr: RelationExpr, histories: dict[Any, Any], lower: int, hydrating: bool
) -> Step:
    """(old, delta, errors, rules) of one Spark step."""
    inputs = {}
    for id, updates in histories.items():
        if hydrating:
            now = _contents(updates, lower)
            inputs[id] = Rendered(None, _frame(spark, now, True) if now else None)
        else:
            delta = [u for u in updates if u[1] >= lower]
            inputs[id] = Rendered(
                _frame(spark, _contents(updates, lower - 1), False),
                _frame(spark, delta, True) if delta else None,
            )
    upper = lower + 1 if hydrating else UPPER
    ctx = StepContext(spark, lower, upper, inputs, hydrating=hydrating)
    rendered = render(expr, ctx)
    arity = expr.desc.arity
    frames = [] if rendered.delta is None else [rendered.delta]
    if rendered.old is not None:  # old rows at time -1: apart from every delta time
        frames.append(rendered.old.withColumn(TIME, F.lit(-1).cast("long")))
    by_time = _collect(frames, arity)
    old = by_time.pop(-1, Counter())
    delta: Counter[Any] = Counter()
    for t, rows in by_time.items():
        for row, diff in rows.items():
            delta[(row, t)] += diff
    errors: Counter[Any] = Counter()
    for frame in ctx.errors:
        for r in frame.collect():
            errors[((r["code"], r["message"]), r[TIME])] += r[DIFF]
    return _nonzero(old), _nonzero(delta), _nonzero(errors), ctx.rules


def _nonzero(counter: Counter[Any]) -> Counter[Any]:
    return Counter({k: v for k, v in counter.items() if v != 0})


@pytest.mark.parametrize("name", list(PLANS))
def test_spark_and_in_process_backends_take_the_same_step(spark: SparkSession, name: str) -> None:
    expr = PLANS[name]
    rng = random.Random(f"{name}-13")
    histories = {A_ID: _history(rng), B_ID: _history(rng)}
    for lower, hydrating in ((rng.randint(1, UPPER - 1), False), (rng.randrange(UPPER), True)):
        local = _local(expr, histories, lower, hydrating)
        on_spark = _spark(spark, expr, histories, lower, hydrating)
        what = f"{name} from {lower}{' hydrating' if hydrating else ''}"
        assert local[0] == on_spark[0], f"old contents of {what}"
        assert local[1] == on_spark[1], f"updates of {what}"
        assert local[2] == on_spark[2], f"error updates of {what}"
        assert local[3] == on_spark[3], f"rules of {what}"
