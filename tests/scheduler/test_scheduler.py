"""The owner's Scheduler over a synchronous cluster: placement, the global
watermark, move, drain, rebalance, the in-flight limit, capture death and
restart, owner failover, and message fencing."""

from __future__ import annotations

import threading

import pytest

from coordinator_lib.scheduler import (
    CHECKPOINT_CANNOT_PROCEED,
    AddTableRequest,
    Barrier,
    DispatchTableRequest,
    HeartbeatResponse,
    Liveness,
    ReplicationSetState,
    Role,
    TableState,
    TableStatus,
    Watermark,
)
from coordinator_lib.scheduler.messages import stamp
from tests.scheduler.support import TICK_MS, TTL_MS, Cluster

TABLES = [f"u{i}" for i in range(12)]


def settled_cluster(captures: int = 3, tables: list[str] = TABLES, **options) -> Cluster:
    cluster = Cluster([f"w{i}" for i in range(captures)], tables, **options)
    cluster.run_until(cluster.settled)
    return cluster


def in_flight(cluster: Cluster) -> int:
    return sum(
        1
        for rep in cluster.scheduler.replication_sets.values()
        if rep.state != ReplicationSetState.REPLICATING
    )


def test_cannot_proceed_until_every_task_has_a_status() -> None:
    cluster = Cluster(["w0", "w1"], TABLES)
    first = cluster.tick()
    assert first == Watermark(CHECKPOINT_CANNOT_PROCEED, CHECKPOINT_CANNOT_PROCEED)
    assert not cluster.scheduler.is_initialized()
    cluster.run_until(cluster.settled)
    cluster.run_until(lambda: cluster.checkpoint > 0, max_ticks=3)


def test_tasks_are_spread_evenly() -> None:
    cluster = settled_cluster(captures=3)
    assert sorted(len(spans) for spans in cluster.placement().values()) == [4, 4, 4]
    statuses = cluster.scheduler.get_task_statuses()
    assert sum(len(tasks) for tasks in statuses.values()) == len(TABLES)
    assert all(role == Role.PRIMARY for tasks in statuses.values() for role in tasks.values())


def test_watermark_is_the_least_task_checkpoint_and_never_regresses() -> None:
    cluster = settled_cluster()
    for _ in range(10):
        cluster.tick()
    checkpoints = [w.checkpoint_ts for w in cluster.watermarks if w.checkpoint_ts]
    assert checkpoints == sorted(checkpoints)
    least = min(rep.checkpoint.checkpoint_ts for rep in cluster.scheduler.replication_sets.values())
    assert cluster.watermarks[-1].checkpoint_ts == least
    # A caller passing a stale checkpoint does not drag it back.
    cluster.checkpoint = 0
    assert cluster.tick().checkpoint_ts >= checkpoints[-1]


def test_barrier_caps_the_watermark() -> None:
    cluster = settled_cluster()
    cap = cluster.checkpoint + 1
    cluster.barrier = Barrier(global_barrier_ts=cap + 5, min_table_barrier_ts=cap)
    for _ in range(5):
        watermark = cluster.tick()
    assert watermark == Watermark(cap, cap + 5)


def test_no_tasks_reports_the_barrier() -> None:
    cluster = Cluster(["w0"], [])
    cluster.barrier = Barrier(500, 400)
    cluster.run_until(cluster.scheduler.is_initialized)
    assert cluster.tick() == Watermark(400, 500)


def test_new_and_dropped_tasks() -> None:
    cluster = settled_cluster()
    cluster.tables = [*TABLES[2:], "u100"]
    cluster.run_until(cluster.settled)
    assert "u100" in cluster.scheduler.replication_sets
    assert all(span not in ex.tables for ex in cluster.executors.values() for span in TABLES[:2])


def test_move_table() -> None:
    cluster = settled_cluster()
    rep = cluster.scheduler.replication_sets["u0"]
    dest = next(c for c in cluster.agents if c != rep.primary)
    assert cluster.scheduler.move_table("u0", dest)
    assert not cluster.scheduler.move_table("u0", dest)  # already pending
    cluster.run_until(lambda: cluster.scheduler.replication_sets["u0"].primary == dest)
    cluster.run_until(cluster.settled)
    assert "u0" in cluster.placement()[dest]


def test_move_requests_are_ignored_until_initialized_and_dropped_for_unknown_targets() -> None:
    cluster = Cluster(["w0", "w1"], TABLES)
    assert not cluster.scheduler.move_table("u0", "w1")
    assert not cluster.scheduler.rebalance()
    assert cluster.scheduler.drain_capture("w0") == 1  # unknown yet: ask again
    cluster.run_until(cluster.settled)
    assert cluster.scheduler.move_table("u0", "nobody")
    cluster.tick()
    assert cluster.scheduler.scheduler_manager.move_table.tasks == {}


def test_drain_capture_moves_everything_off_within_the_limit() -> None:
    cluster = settled_cluster(captures=3, max_task_concurrency=2)
    counts = []
    while (count := cluster.scheduler.drain_capture("w0")) > 0:
        counts.append(count)
        cluster.tick()
        assert len(cluster.scheduler.replication_manager.running_tasks) <= 2
        assert in_flight(cluster) <= 2
        assert len(counts) < 200
    assert counts[0] == 4 and counts == sorted(counts, reverse=True)
    cluster.run_until(cluster.settled)
    assert cluster.placement()["w0"] == []
    # A drained capture is stopping: new tasks go elsewhere.
    cluster.tables = [*TABLES, "u100"]
    cluster.run_until(cluster.settled)
    assert "u100" not in cluster.placement()["w0"]


def test_a_new_owner_finishes_a_drain_next_to_an_already_drained_capture() -> None:
    """Found by the simulation: with w0 drained (still stopping) and w1's
    drain under way, a new owner picks up stopping captures by itself; it
    must not keep picking the empty w0 and leave w1's tasks where they are."""
    cluster = settled_cluster(captures=3, max_task_concurrency=1)
    cluster.run_until(lambda: cluster.scheduler.drain_capture("w0") == 0)
    cluster.run_until(
        lambda: (
            cluster.scheduler.drain_capture("w1") > 0
            and cluster.agents["w1"].liveness == Liveness.STOPPING
        )
    )
    assert any(rep.primary == "w1" for rep in cluster.scheduler.replication_sets.values())
    cluster.new_owner()  # the drain request dies with the old owner
    cluster.run_until(
        lambda: (
            cluster.settled()
            and all(rep.primary == "w2" for rep in cluster.scheduler.replication_sets.values())
        )
    )
    assert cluster.placement() == {"w0": [], "w1": [], "w2": sorted(TABLES)}


def test_drain_with_a_single_capture_is_refused() -> None:
    cluster = settled_cluster(captures=1)
    assert cluster.scheduler.drain_capture("w0") == len(TABLES)
    assert cluster.scheduler.scheduler_manager.draining_target() == ""
    assert cluster.scheduler.drain_capture("nobody") == 0


def test_rebalance_onto_a_new_capture_within_the_limit() -> None:
    cluster = settled_cluster(captures=2, max_task_concurrency=3)
    cluster.start("w9")
    cluster.run_until(cluster.scheduler.is_initialized)
    assert cluster.placement()["w9"] == []
    assert cluster.scheduler.rebalance()
    for _ in range(100):
        cluster.tick()
        assert in_flight(cluster) <= 3
        if not cluster.scheduler.scheduler_manager.rebalance.rebalance and cluster.settled():
            break
    assert sorted(len(s) for s in cluster.placement().values()) == [4, 4, 4]


def test_periodic_balance() -> None:
    cluster = settled_cluster(captures=2, check_balance_interval=5)
    cluster.start("w9")
    cluster.run_until(lambda: len(cluster.placement()["w9"]) == 4 and cluster.settled())


def test_dead_capture_tasks_are_rescheduled_when_its_lease_expires() -> None:
    cluster = settled_cluster()
    lost = cluster.placement()["w1"]
    cluster.kill("w1")
    for _ in range(TTL_MS // TICK_MS - 1):
        cluster.tick()
        assert "w1" in cluster.scheduler.capture_manager.captures  # lease still valid
    ticks = cluster.run_until(cluster.settled)
    assert ticks < 20
    placement = cluster.placement()
    assert "w1" not in placement
    assert sorted(placement["w0"] + placement["w2"]) == sorted(TABLES)
    assert set(lost) <= set(placement["w0"] + placement["w2"])


def test_restarted_capture_is_a_new_incarnation() -> None:
    cluster = settled_cluster()
    lost = cluster.placement()["w1"]
    cluster.kill("w1")
    cluster.start("w1")  # same id, new epoch: the old one's tasks are gone
    cluster.run_until(cluster.settled)
    epochs = {c: s.epoch for c, s in cluster.scheduler.capture_manager.captures.items()}
    assert epochs["w1"] == cluster.capture_leases["w1"].epoch
    assert sorted(span for spans in cluster.placement().values() for span in spans) == sorted(
        TABLES
    )
    assert lost  # they ran somewhere again


def test_owner_failover_rebuilds_without_moving_anything() -> None:
    cluster = settled_cluster(max_task_concurrency=2)
    before = cluster.placement()
    checkpoint = cluster.checkpoint
    calls = {c: list(ex.calls) for c, ex in cluster.executors.items()}
    successor = cluster.new_owner()
    assert cluster.tick().checkpoint_ts == CHECKPOINT_CANNOT_PROCEED
    cluster.run_until(cluster.settled)
    assert successor.owner_revision == 2
    assert cluster.placement() == before
    assert {c: ex.calls for c, ex in cluster.executors.items()} == calls
    assert all(a.owner_revision == 2 and a.owner_id == "owner2" for a in cluster.agents.values())
    cluster.tick()
    assert cluster.checkpoint >= checkpoint


def test_owner_failover_mid_move_finishes_the_move() -> None:
    cluster = Cluster(["w0", "w1"], TABLES[:4])
    cluster.run_until(cluster.settled)
    for ex in cluster.executors.values():
        ex.stop_ticks = 3
    rep = cluster.scheduler.replication_sets["u0"]
    dest = "w1" if rep.primary == "w0" else "w0"
    cluster.scheduler.move_table("u0", dest)
    cluster.run_until(
        lambda: cluster.scheduler.replication_sets["u0"].state == ReplicationSetState.COMMIT
    )
    cluster.new_owner()
    cluster.run_until(cluster.settled)
    assert "u0" in cluster.placement()[dest]


def test_stale_and_duplicate_messages_are_ignored() -> None:
    cluster = settled_cluster(captures=1, tables=["u0"])
    scheduler = cluster.scheduler
    rep = scheduler.replication_sets["u0"]
    epoch = scheduler.capture_manager.captures["w0"].epoch
    bogus = HeartbeatResponse(tables=(TableStatus("u0", TableState.STOPPED),))

    def send(**header) -> None:
        agent = cluster.agents["w0"]
        agent._seq += 1  # as if the agent had sent it
        fields = dict(
            sender="w0", to="owner", owner_revision=1, capture_epoch=epoch, seq=agent._seq
        )
        fields.update(header)
        cluster.in_flight.append(stamp(bogus, **fields))
        cluster.tick()

    send(owner_revision=0)  # for a deposed owner
    send(capture_epoch=epoch - 1)  # from an earlier incarnation
    send(to="someone-else")
    send(seq=1)  # older than what was accepted
    assert rep.state == ReplicationSetState.REPLICATING
    send()  # a fresh one is believed: the primary "stopped", so u0 is re-added
    assert rep.state != ReplicationSetState.REPLICATING
    cluster.run_until(cluster.settled)


def test_orphan_copies_are_removed() -> None:
    """A capture holding a task the owner did not give it (ordered by an
    earlier owner) is asked to drop it."""
    cluster = settled_cluster(captures=2, tables=["u0"])
    primary = cluster.scheduler.replication_sets["u0"].primary
    other = "w1" if primary == "w0" else "w0"
    epoch = cluster.capture_leases[other].epoch
    request = AddTableRequest("u0", True, cluster.scheduler.replication_sets["u0"].checkpoint)
    rogue = stamp(
        DispatchTableRequest(request=request),
        sender="owner",
        to=other,
        owner_revision=1,
        capture_epoch=epoch,
        seq=cluster.scheduler._seq + 1,
    )
    cluster.scheduler._seq += 1  # as if the owner had sent it
    cluster.agents[other].tick([rogue])
    assert cluster.executors[other].state_of("u0") == TableState.PREPARED
    cluster.run_until(lambda: cluster.executors[other].state_of("u0") == TableState.ABSENT)
    assert cluster.settled()


def test_control_calls_from_another_thread() -> None:
    cluster = settled_cluster()
    stop = threading.Event()

    def poke() -> None:
        while not stop.is_set():
            cluster.scheduler.drain_capture("w2")
            cluster.scheduler.get_task_statuses()

    thread = threading.Thread(target=poke)
    thread.start()
    try:
        cluster.run_until(lambda: cluster.scheduler.drain_capture("w2") == 0 and cluster.settled())
    finally:
        stop.set()
        thread.join()
    assert cluster.placement()["w2"] == []


def test_closed_scheduler_refuses_to_tick() -> None:
    cluster = Cluster(["w0"], [])
    cluster.scheduler.close()
    with pytest.raises(RuntimeError):
        cluster.tick()
