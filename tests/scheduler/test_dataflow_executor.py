"""`DataflowExecutor`, the TableExecutor of `tidemark worker`, on a real
ComputeController and storage in this process (small steps run on the
local engine: no Spark is started): prepare writes nothing and holds the
inputs, commit starts stepping, remove stops the writer before the task
reads as removed, statuses report the view's durable upper; and its
LeaseFence stops a stale primary."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from coordinator_lib.compute import ComputeController, DataflowDescription
from coordinator_lib.compute import dataflow as dataflow_module
from coordinator_lib.expr import AggregateExpr, AggregateFunc, Column, Get, Reduce
from coordinator_lib.repr import Frontier, GlobalId, LagWriteFrontier, RelationDesc, Update
from coordinator_lib.scheduler.dataflow_executor import DataflowExecutor
from coordinator_lib.scheduler.lease import FakeClock, InMemoryLeaseStore, LeaseFence
from coordinator_lib.scheduler.messages import Checkpoint, TableState
from coordinator_lib.spark_session import LazySparkSession
from coordinator_lib.storage import (
    CollectionDescription,
    DataSource,
    StorageController,
    table_description,
)

T = GlobalId.user(1)
VIEW = GlobalId.user(2)
SPAN = str(VIEW)
DESC = RelationDesc.of(("k", "integer", False), ("v", "bigint", False))
EXPR = Reduce(
    Get(T, DESC), (Column(0),), (AggregateExpr(AggregateFunc.SUM, Column(1)),), ("k", "total")
)


def no_spark():
    raise AssertionError("these steps are small: no Spark session may start")


class Env:
    def __init__(self, root: Path) -> None:
        self.storage = StorageController.open(str(root))
        self.storage.create_collections([(T, table_description(DESC))])
        self.rows: list[tuple[int, int]] = []
        self.append([(1, 10), (2, 5)])
        self.storage.create_collections(
            [(VIEW, CollectionDescription(EXPR.desc, DataSource.other(), Frontier.at(0)))]
        )
        self.spark = LazySparkSession(factory=no_spark)

    def compute(self, instance: str | None = None) -> ComputeController:
        compute = ComputeController(self.storage, self.spark)  # type: ignore[arg-type]
        if instance is not None:
            compute.create_instance(instance)
        return compute

    def describe(self, span: str) -> DataflowDescription:
        """As `tidemark worker` resolves a view: as_of at its upper - 1."""
        assert span == SPAN
        since, upper = self.storage.collection_frontiers(VIEW)
        assert since.time is not None and upper.time is not None
        return DataflowDescription(VIEW, EXPR, max(upper.time - 1, since.time), sink_id=VIEW)

    def append(self, rows: list[tuple[int, int]]) -> None:
        upper = self.table_upper()
        self.storage.append([(T, [Update(r, upper, 1) for r in rows], upper + 1)])
        self.rows += rows

    def table_upper(self) -> int:
        upper = self.storage.collection_frontiers(T)[1].time
        assert upper is not None
        return upper

    def view_upper(self) -> int:
        upper = self.storage.collection_frontiers(VIEW)[1].time
        assert upper is not None
        return upper

    def view_rows(self) -> int:
        return self.storage.shard(VIEW).statistics().rows

    def check_view(self) -> None:
        """The view at its last complete time equals the sums of the rows."""
        totals: Counter = Counter()
        for k, v in self.rows:
            totals[k] += v
        got = Counter()
        for row, diff in self.storage.snapshot(VIEW, self.view_upper() - 1):
            got[tuple(row)] += diff
        assert +got == Counter({(k, s): 1 for k, s in totals.items()})


@pytest.fixture
def env(tmp_path: Path):
    env = Env(tmp_path)
    yield env
    assert not env.spark.started
    env.storage.close()


def test_prepare_commit_remove(env: Env) -> None:
    compute = env.compute()
    executor = DataflowExecutor(compute, env.describe)
    owner_checkpoint = Checkpoint(0, 0)

    # Prepare: the dataflow exists and holds its inputs; nothing is written.
    assert executor.add_table_span(SPAN, owner_checkpoint, is_prepare=True)
    assert executor.is_add_table_span_finished(SPAN, is_prepare=True)
    assert not executor.is_add_table_span_finished(SPAN, is_prepare=False)
    status = executor.get_table_span_status(SPAN, collect_stat=False)
    assert status.state == TableState.PREPARED
    assert status.checkpoint.checkpoint_ts == env.view_upper() == 0
    env.storage.set_read_policy([(T, LagWriteFrontier(0))])  # compact eagerly
    env.append([(1, 1)])
    env.append([(3, 7)])
    for _ in range(3):
        assert executor.advance() == 0
    env.storage.maintain()
    assert env.view_upper() == 0 and env.view_rows() == 0  # nothing written
    assert env.storage.collection_frontiers(T)[0] == Frontier.at(0)  # held at the as_of

    # Commit: it steps from where the view is, up to the input's upper.
    assert executor.add_table_span(SPAN, owner_checkpoint, is_prepare=False)
    assert executor.is_add_table_span_finished(SPAN, is_prepare=False)
    assert executor.advance() == 1
    assert env.view_upper() == env.table_upper() == 3
    env.check_view()
    env.append([(2, 100)])
    executor.advance()
    assert env.view_upper() == 4
    env.check_view()
    status = executor.get_table_span_status(SPAN, collect_stat=False)
    assert status.state == TableState.REPLICATING
    assert status.checkpoint == Checkpoint(4, 4)

    # Remove: the writer stops before the task is reported removed.
    assert executor.remove_table_span(SPAN)
    assert compute.find_dataflow(VIEW) is None
    env.append([(1, 1000)])
    assert executor.advance() == 0
    assert env.view_upper() == 4  # nothing steps it any more
    assert executor.is_remove_table_span_finished(SPAN) == (4, True)
    assert executor.get_table_span_status(SPAN, False).state == TableState.ABSENT
    # The view's durable dependency hold stays for whoever runs it next.
    env.storage.maintain()
    since = env.storage.collection_frontiers(T)[0].time
    assert since is not None and since <= 3

    # A later add (the task came back) resumes at the view's upper.
    assert executor.add_table_span(SPAN, Checkpoint(4, 4), is_prepare=False)
    executor.advance()
    assert env.view_upper() == 5
    env.check_view()


def test_status_before_the_view_is_read_is_the_owners_checkpoint(env: Env) -> None:
    """The owner's checkpoint is the floor a task reports (it never goes
    back); the dataflow itself starts at the view's durable upper."""
    env.append([(1, 1)])
    compute = env.compute("before")  # some earlier primary stepped the view
    compute.create_dataflow("before", env.describe(SPAN))
    compute.step_dataflow(VIEW)
    compute.forget_dataflows("before", [VIEW])
    assert env.view_upper() == 2
    executor = DataflowExecutor(compute, env.describe)
    assert executor.add_table_span(SPAN, Checkpoint(1, 1), is_prepare=True)
    status = executor.get_table_span_status(SPAN, False)
    assert status.checkpoint == Checkpoint(2, 2)  # the durable upper, above the owner's


def test_fence_stops_a_worker_frozen_past_its_lease(env: Env) -> None:
    clock = FakeClock(1_000)
    leases = InMemoryLeaseStore(clock)
    fence = LeaseFence(leases, leases.acquire_capture_lease("w", 500), clock)
    executor = DataflowExecutor(env.compute(), env.describe, fence=fence)
    assert executor.add_table_span(SPAN, Checkpoint(0, 0), is_prepare=False)
    assert executor.advance() == 1
    assert env.view_upper() == 1
    clock.advance(600)  # frozen past its TTL: the lease expired, unrenewed
    env.append([(1, 1)])
    assert executor.advance() == 0
    assert env.view_upper() == 1  # it started no step
    assert fence.lost.is_set() and "expired" in (fence.reason or "")


@pytest.mark.parametrize("superseded", [True, False])
def test_lost_race_without_the_lease_stops(env: Env, monkeypatch, superseded: bool) -> None:
    """Another writer lands the step between this worker's read of the upper
    and its compare-and-append: the CaS refuses it (UpperMismatch). Without
    its lease (another incarnation took the capture id) the worker stops;
    with it (the winner was some other writer) it carries on."""
    clock = FakeClock(1_000)
    leases = InMemoryLeaseStore(clock)
    fence = LeaseFence(leases, leases.acquire_capture_lease("w", 10_000), clock)
    executor = DataflowExecutor(env.compute(), env.describe, fence=fence)
    assert executor.add_table_span(SPAN, Checkpoint(0, 0), is_prepare=False)
    assert executor.advance() == 1
    rival = env.compute("rival")
    rival.create_dataflow("rival", env.describe(SPAN))
    if superseded:
        leases.acquire_capture_lease("w", 10_000)  # a new incarnation elsewhere

    real = dataflow_module.plan_step_local
    raced: list[int] = []

    def racing(description, inputs, lower, *rest):
        result = real(description, inputs, lower, *rest)
        if not raced:  # between our read of the upper and our CaS
            raced.append(lower)
            assert rival.step_dataflow(VIEW).landed
        return result

    monkeypatch.setattr(dataflow_module, "plan_step_local", racing)
    env.append([(2, 2)])
    executor.advance()
    assert raced == [1]
    assert executor.lost_races == 1
    assert env.view_upper() == 2  # the rival's step, landed once
    env.check_view()
    assert fence.lost.is_set() is superseded
    env.append([(3, 3)])
    if superseded:
        assert executor.advance() == 0
        assert env.view_upper() == 2
    else:
        assert executor.advance() == 1
        assert env.view_upper() == 3
        env.check_view()
