"""The compute controller: replicas, read holds, indexes, peeks, subscribes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from coordinator_lib.compute import (
    ComputeController,
    DataflowCreationError,
    DataflowDescription,
    InstanceMissing,
)
from coordinator_lib.compute.controller import RECENT_STEPS
from coordinator_lib.expr import AggregateExpr, AggregateFunc, Column, Get, Reduce
from coordinator_lib.repr import Frontier, GlobalId, LagWriteFrontier, RelationDesc, Update
from coordinator_lib.storage import (
    CollectionDescription,
    DataSource,
    StorageController,
    table_description,
)
from tests.compute.harness import as_multiset

pytestmark = pytest.mark.spark

T = GlobalId.user(1)
VIEW = GlobalId.user(2)
INDEX = GlobalId.user(3)
DESC = RelationDesc.of(("k", "integer", False), ("v", "bigint", False))


def _sum_by_k() -> Reduce:
    return Reduce(
        Get(T, DESC),
        (Column(0),),
        (AggregateExpr(AggregateFunc.SUM, Column(1)),),
        ("k", "total"),
    )


def _expected(rows: list[tuple[int, int]]) -> dict:
    totals: dict[int, int] = {}
    for k, v in rows:
        totals[k] = totals.get(k, 0) + v
    return as_multiset([((k, total), 1) for k, total in totals.items()])


@pytest.fixture
def env(tmp_path: Path, spark: SparkSession):  # type: ignore[no-untyped-def]
    storage = StorageController.open(str(tmp_path))
    storage.create_collections([(T, table_description(DESC))])
    storage.append([(T, [Update((1, 10), 0, 1), Update((2, 5), 0, 1)], 1)])
    compute = ComputeController(storage, spark)
    compute.create_instance("default")
    yield storage, compute
    storage.close()


def _create_view(storage: StorageController, compute: ComputeController, as_of: int = 0) -> None:
    expr = _sum_by_k()
    storage.create_collections(
        [(VIEW, CollectionDescription(expr.desc, DataSource.other(), Frontier.at(as_of)))]
    )
    compute.create_dataflow("default", DataflowDescription(VIEW, expr, as_of, sink_id=VIEW))


def test_two_replicas_maintain_one_view_exactly(env) -> None:  # type: ignore[no-untyped-def]
    storage, compute = env
    compute.add_replica("default", "r1")
    compute.add_replica("default", "r2")
    _create_view(storage, compute)
    rows = [(1, 10), (2, 5)]
    landed = []
    for t in range(1, 4):
        storage.append([(T, [Update((t % 2 + 1, t), t, 1)], t + 1)])
        rows.append((t % 2 + 1, t))
        results = compute.process()
        landed.append(sorted(r.landed for r in results if r.upper == t + 1))
        assert storage.collection_frontiers(VIEW)[1] == Frontier.at(t + 1)
        assert as_multiset(storage.snapshot(VIEW, t)) == _expected(rows)
    # The second replica finds each step already landed by the first.
    assert [True] in landed[1:] or [False, True] in landed[1:]


def test_input_holds_stop_compaction_at_the_dataflow(env) -> None:  # type: ignore[no-untyped-def]
    storage, compute = env
    compute.add_replica("default", "r1")
    _create_view(storage, compute, as_of=0)
    storage.set_read_policy([(T, LagWriteFrontier(0))])
    for t in range(1, 6):
        storage.append([(T, [Update((1, t), t, 1)], t + 1)])
    storage.maintain()
    # The dataflow has not stepped yet: it still needs T at its as_of, 0.
    assert storage.collection_frontiers(T)[0] == Frontier.at(0)
    compute.process()
    storage.maintain()
    view_upper = storage.collection_frontiers(VIEW)[1]
    assert view_upper == Frontier.at(6)
    assert storage.collection_frontiers(T)[0] == Frontier.at(5)  # view upper - 1
    compute.drop_collections("default", [VIEW])
    storage.maintain()
    assert storage.collection_frontiers(T)[0] == Frontier.at(6)  # holds released


def test_dataflow_as_of_before_input_since_is_refused(env) -> None:  # type: ignore[no-untyped-def]
    storage, compute = env
    storage.set_read_policy([(T, LagWriteFrontier(0))])
    storage.append([(T, [], 10)])
    storage.maintain()
    with pytest.raises(DataflowCreationError, match="as_of 2 is before the since"):
        compute.create_dataflow(
            "default", DataflowDescription(VIEW, _sum_by_k(), 2, sink_id=None, index_key=(0,))
        )
    with pytest.raises(InstanceMissing):
        compute.create_dataflow("nope", DataflowDescription(VIEW, _sum_by_k(), 10, index_key=(0,)))


def test_index_peek_reads_memory_not_persist(env, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    storage, compute = env
    compute.add_replica("default", "r1")
    compute.create_dataflow("default", DataflowDescription(INDEX, _sum_by_k(), 0, index_key=(0,)))
    storage.append([(T, [Update((1, 7), 1, 1), Update((3, 1), 2, 1)], 3)])
    compute.process()
    compute.process()
    assert compute.collection_frontiers("default", INDEX).write_frontier == Frontier.at(3)
    # Take persist's data away: a peek on the index must not need it.
    blob = tmp_path / "blob"
    moved = tmp_path / "blob-away"
    shutil.move(blob, moved)
    try:
        at_1 = compute.peek("default", INDEX, 1)
        at_2 = compute.peek("default", INDEX, 2)
    finally:
        shutil.move(moved, blob)
    assert as_multiset(at_1) == _expected([(1, 10), (2, 5), (1, 7)])
    assert as_multiset(at_2) == _expected([(1, 10), (2, 5), (1, 7), (3, 1)])


def test_subscribe_yields_snapshot_then_changes(env) -> None:  # type: ignore[no-untyped-def]
    storage, compute = env
    storage.append([(T, [Update((5, 1), 1, 1)], 2)])
    stream = compute.subscribe(T, as_of=0, up_to=3, timeout_s=5)
    first = next(stream)
    assert sorted(u.row for u in first.updates) == [(1, 10), (2, 5)]
    assert all(u.time == 0 for u in first.updates)
    storage.append([(T, [Update((1, 10), 2, -1)], 4)])
    rest = list(stream)
    updates = [u for batch in rest for u in batch.updates]
    assert sorted(updates) == [Update((1, 10), 2, -1), Update((5, 1), 1, 1)]
    assert rest[-1].upper == Frontier.at(3)


def test_a_long_running_dataflow_keeps_only_its_recent_steps(env) -> None:  # type: ignore[no-untyped-def]
    """A view steps every tick for as long as the server runs: what it keeps
    per step must not pile up (issue 18: the demo server grew without bound)."""
    storage, compute = env
    compute.add_replica("default", "r1")
    _create_view(storage, compute)
    ticks = RECENT_STEPS + 10
    for t in range(1, ticks + 1):
        storage.append([(T, [Update((1, t), t, 1)], t + 1)])
        compute.process()
    dataflow = compute.dataflow("default", VIEW)
    assert storage.collection_frontiers(VIEW)[1] == Frontier.at(ticks + 1)
    assert len(dataflow.steps) == RECENT_STEPS
    assert dataflow.steps[-1].upper == ticks + 1
