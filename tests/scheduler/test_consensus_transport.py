"""Messages through consensus mailboxes: the codec round-trips every
message type, mailboxes deliver each message once and stay bounded, and an
owner with agents talking only through consensus places and moves tasks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator_lib.persist.consensus import Consensus, open_consensus
from coordinator_lib.scheduler import (
    AddTableRequest,
    AddTableResponse,
    Agent,
    Barrier,
    Checkpoint,
    DispatchTableRequest,
    DispatchTableResponse,
    FakeClock,
    Heartbeat,
    HeartbeatResponse,
    InMemoryTableExecutor,
    Liveness,
    RemoveTableRequest,
    RemoveTableResponse,
    ReplicationSetState,
    Scheduler,
    TableState,
    TableStatus,
)
from coordinator_lib.scheduler.codec import decode, encode
from coordinator_lib.scheduler.consensus_lease import ConsensusLeaseStore
from coordinator_lib.scheduler.consensus_transport import (
    ConsensusTransport,
    capture_mailbox,
    owner_mailbox,
)
from coordinator_lib.scheduler.messages import stamp

HEADER = {"sender": "o", "to": "w1", "owner_revision": 3, "capture_epoch": 7, "seq": 11}


@pytest.fixture
def consensus(tmp_path: Path) -> Iterator[Consensus]:
    c = open_consensus(str(tmp_path / "consensus.db"))
    yield c
    c.close()


def test_codec_round_trips_every_message() -> None:
    status = TableStatus("u5", TableState.STOPPING, Checkpoint(10, 12))
    messages = [
        Heartbeat(spans=("u1", "u2"), is_stopping=True, collect_stats=True, **HEADER),
        Heartbeat(barrier=Barrier(5, 4), **HEADER),
        HeartbeatResponse(tables=(status,), liveness=Liveness.STOPPING, **HEADER),
        DispatchTableRequest(request=AddTableRequest("u1", True, Checkpoint(3, 4)), **HEADER),
        DispatchTableRequest(request=RemoveTableRequest("u1"), **HEADER),
        DispatchTableResponse(response=AddTableResponse(status, Checkpoint(9, 9)), **HEADER),
        DispatchTableResponse(response=RemoveTableResponse(status, Checkpoint(1, 2)), **HEADER),
    ]
    for message in messages:
        assert decode(encode(message)) == message


def test_mailbox_delivers_once_in_order_and_is_bounded(consensus: Consensus) -> None:
    owner = ConsensusTransport.for_owner(consensus, "c")
    capture = ConsensusTransport.for_capture(consensus, "c-0", "c")
    sent = [stamp(Heartbeat(), **{**HEADER, "to": "c-0", "seq": i}) for i in range(1, 6)]
    owner.send(sent[:2])
    owner.send(sent[2:])
    assert capture.recv() == sent
    assert capture.recv() == []
    reply = stamp(HeartbeatResponse(), **{**HEADER, "sender": "c-0", "to": "o"})
    capture.send([reply])
    assert owner.recv() == [reply]
    small = ConsensusTransport(consensus, "x", lambda m: "y", max_messages=3)
    small.send(sent)
    assert [m.seq for m in ConsensusTransport(consensus, "y", lambda m: "x").recv()] == [3, 4, 5]
    assert owner_mailbox("c") != capture_mailbox("c")


def test_owner_and_agents_over_consensus(consensus: Consensus) -> None:
    """Three captures, six tasks: all replicate once each, spread out; a
    drain empties a capture; the old capture's incarnation ending moves its
    tasks (no process, no network: just consensus)."""
    clock = FakeClock(1_000)
    leases = ConsensusLeaseStore(consensus, cluster="c", clock=clock)
    agents: dict[str, tuple[Agent, InMemoryTableExecutor, ConsensusTransport]] = {}
    held_leases = {}
    for i in range(3):
        capture_id = f"c-{i}"
        lease = held_leases[capture_id] = leases.acquire_capture_lease(capture_id, 1_000)
        executor = InMemoryTableExecutor()
        transport = ConsensusTransport.for_capture(consensus, capture_id, "c")
        agents[capture_id] = (Agent(capture_id, lease.epoch, executor), executor, transport)
    owner = leases.campaign_owner("serve", 10_000)
    assert owner is not None
    scheduler = Scheduler("serve", owner.revision, ConsensusTransport.for_owner(consensus, "c"))
    tasks = [f"u{i}" for i in range(6)]

    def round_() -> None:
        clock.advance(100)
        scheduler.tick(0, tasks, leases.alive_captures())
        for capture_id, (agent, executor, transport) in agents.items():
            held_leases[capture_id] = leases.renew_capture_lease(held_leases[capture_id], 1_000)
            executor.advance()
            transport.send(agent.tick(transport.recv()))

    def settled() -> bool:
        sets = scheduler.replication_sets
        return len(sets) == len(tasks) and all(
            s.state == ReplicationSetState.REPLICATING for s in sets.values()
        )

    for _ in range(60):
        round_()
        if settled():
            break
    assert settled()
    held = {c: [s for s, t in e.tables.items() if t.state == TableState.REPLICATING]
            for c, (_, e, _) in agents.items()}  # fmt: skip
    assert sorted(s for spans in held.values() for s in spans) == sorted(tasks)
    assert all(len(spans) == 2 for spans in held.values())

    while scheduler.drain_capture("c-0") != 0:
        round_()
    for _ in range(20):
        round_()
    assert not any(t.state == TableState.REPLICATING for t in agents["c-0"][1].tables.values())
    assert settled()

    # c-1 dies: its lease expires; its tasks move to c-0 and c-2.
    victim = agents.pop("c-1")[1]
    victim.close()
    lost = [s for s, rep in scheduler.replication_sets.items() if rep.primary == "c-1"]
    assert lost
    for _ in range(60):
        round_()
        if "c-1" not in leases.alive_captures() and settled():
            rest = {s for _, e, _ in agents.values() for s in e.tables}
            if set(lost) <= rest:
                break
    assert settled()
    assert all(scheduler.replication_sets[s].primary in ("c-0", "c-2") for s in lost)
