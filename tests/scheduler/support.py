"""A synchronous cluster for Scheduler tests: one owner, agents over
in-memory executors, a perfect network (every message delivered on the
next tick, in order), leases on a fake clock."""

from __future__ import annotations

from collections.abc import Callable

from coordinator_lib.scheduler import (
    CHECKPOINT_CANNOT_PROCEED,
    Agent,
    Barrier,
    CaptureLease,
    ClockWriter,
    FakeClock,
    InMemoryLeaseStore,
    InMemoryTableExecutor,
    Message,
    QueueTransport,
    ReplicationSetState,
    Scheduler,
    TableState,
    Watermark,
)

TICK_MS = 100
TTL_MS = 500


class Cluster:
    def __init__(self, captures: list[str], tables: list[str], **scheduler_options) -> None:
        self.clock = FakeClock(1_000)
        self.leases = InMemoryLeaseStore(self.clock)
        self.transport = QueueTransport()
        self.agents: dict[str, Agent] = {}
        self.executors: dict[str, InMemoryTableExecutor] = {}
        self.capture_leases: dict[str, CaptureLease] = {}
        self.delays: dict[str, int] = {}
        for capture in captures:
            self.start(capture)
        self.tables = list(tables)
        self.checkpoint = 0
        self.barrier: Barrier | None = None
        self.revision = 1
        self.options = {"seed": 1, **scheduler_options}
        self.scheduler = Scheduler("owner", self.revision, self.transport, **self.options)
        self.in_flight: list[Message] = []
        self.watermarks: list[Watermark] = []

    def start(self, capture: str) -> None:
        lease = self.leases.acquire_capture_lease(capture, TTL_MS)
        executor = InMemoryTableExecutor(writer=ClockWriter(self.clock), **self.delays)
        self.capture_leases[capture] = lease
        self.executors[capture] = executor
        self.agents[capture] = Agent(capture, lease.epoch, executor)

    def kill(self, capture: str) -> None:
        """The process dies; its lease runs out later."""
        self.executors.pop(capture).close()
        del self.agents[capture]
        self.capture_leases.pop(capture)

    def new_owner(self, **options) -> Scheduler:
        """The owner dies; a successor (higher revision) takes over."""
        self.revision += 1
        self.transport = QueueTransport()
        self.scheduler = Scheduler(
            f"owner{self.revision}", self.revision, self.transport, **{**self.options, **options}
        )
        self.in_flight = []
        return self.scheduler

    def tick(self) -> Watermark:
        self.clock.advance(TICK_MS)
        for capture, lease in list(self.capture_leases.items()):
            renewed = self.leases.renew_capture_lease(lease, TTL_MS)
            assert renewed is not None
            self.capture_leases[capture] = renewed
        self.transport.deliver(self.in_flight)
        watermark = self.scheduler.tick(
            self.checkpoint, self.tables, self.leases.alive_captures(), self.barrier
        )
        if watermark.checkpoint_ts != CHECKPOINT_CANNOT_PROCEED:
            assert watermark.checkpoint_ts >= self.checkpoint
            self.checkpoint = watermark.checkpoint_ts
        self.watermarks.append(watermark)
        inbox: dict[str, list[Message]] = {}
        for message in self.transport.take_sent():
            inbox.setdefault(message.to, []).append(message)
        self.in_flight = []
        for capture, agent in self.agents.items():
            self.executors[capture].advance()
            self.in_flight.extend(agent.tick(inbox.get(capture, [])))
        return watermark

    def run_until(self, condition: Callable[[], bool], max_ticks: int = 200) -> int:
        for n in range(max_ticks):
            if condition():
                return n
            self.tick()
        raise AssertionError(f"not reached in {max_ticks} ticks: {self.describe()}")

    def placement(self) -> dict[str, list[str]]:
        """Which capture replicates which task, per the executors."""
        return {
            capture: sorted(
                span for span, t in ex.tables.items() if t.state == TableState.REPLICATING
            )
            for capture, ex in self.executors.items()
        }

    def settled(self) -> bool:
        """Every table replicates on exactly one capture, nothing else held,
        and the owner agrees."""
        if not self.scheduler.is_initialized():
            return False
        holders: dict[str, list[tuple[str, TableState]]] = {}
        for capture, ex in self.executors.items():
            for span, t in ex.tables.items():
                holders.setdefault(span, []).append((capture, t.state))
        if sorted(holders) != sorted(self.tables):
            return False
        reps = self.scheduler.replication_sets
        for span in self.tables:
            rep = reps.get(span)
            if rep is None or rep.state != ReplicationSetState.REPLICATING:
                return False
            if [(rep.primary, TableState.REPLICATING)] != holders[span]:
                return False
        return len(reps) == len(self.tables)

    def describe(self) -> str:
        reps = "\n".join(repr(r) for r in self.scheduler.replication_sets.values())
        return f"\n{reps}\n{self.placement()}"
