"""A deterministic simulation of the table scheduler under faults, driven by
one seeded RNG: owners and captures as simulated processes over an
in-memory network that delays, drops, reorders and duplicates messages;
captures crash, pause past their lease and restart as new incarnations;
owners crash, pause and are replaced (a new owner revision); tasks come and
go; moves, rebalances and drains are requested at random. Then faults stop
and the run must settle.

Writes are modelled the way `tidemark worker` makes them
(scheduler/dataflow_executor.py): each task has a shard upper in
"consensus"; a step reads the upper, computes (possibly over several
ticks, during which its process may freeze) and lands with a
compare-and-append on that upper alone, which decides. Each incarnation
has a `LeaseFence` (scheduler/lease.py), the same class the worker uses: no
step starts once the incarnation's lease has expired by its own last
renewal, and a step that lost the CaS makes it check its lease in the
store; a fenced incarnation ends (every writer stops, a new incarnation
starts). So a stale primary's in-flight step lands only if nobody advanced
the shard meanwhile, and then it stops.

Checked all along:
- *the CaS decides*: the landed writes of a task form one chain of
  disjoint intervals [lower, upper), each landed by one writer (no two
  captures land writes for the same times);
- *one writer*: writer sessions never interleave on a task's shard (once a
  newer session landed a write, an older one never lands again), a fenced
  incarnation never steps again, and at no moment do two live incarnations
  both run a writer for one task;
- *checkpoint*: each owner's watermark and the persisted global checkpoint
  never regress, and the checkpoint never passes a current task's upper.

Checked once faults stop (within a bound of steps):
- *no lost task*: every current task replicates on exactly one live
  capture, which the owner agrees is its primary, and nothing else holds it;
  dropped tasks are held nowhere;
- *progress*: the global checkpoint passes the time faults stopped;
- *drain and move finish*: a drain of a capture reaches 0, requested moves
  land, a rebalance completes; moves and drains requested during the faults
  are tracked too: each lands (the task's primary is the destination, the
  drained capture runs no task) or is abandoned for a reason (the owner
  that took the move was replaced, the task was dropped, the destination or
  drained capture became a new incarnation or began draining, every other
  capture is draining too).

Each seed also draws its fault profile (`random_config`): calm or hostile,
short or long (straggling) delays, fast or slow executors. Faults are made
likelier at delicate moments ("buggify"): an owner is more likely to die
while one of its moves is committing.

Any failure raises `SimulationError` with the seed and the recent events;
`Simulation(seed, config).run()` replays it exactly (everything iterates
in a fixed order; nothing depends on string hashing or wall time).
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from coordinator_lib.scheduler.agent import Agent
from coordinator_lib.scheduler.capture_manager import CaptureState
from coordinator_lib.scheduler.lease import (
    CaptureLease,
    FakeClock,
    InMemoryLeaseStore,
    LeaseFence,
    OwnerLease,
)
from coordinator_lib.scheduler.memory_executor import InMemoryTableExecutor
from coordinator_lib.scheduler.messages import (
    CHECKPOINT_CANNOT_PROCEED,
    Barrier,
    CaptureId,
    Checkpoint,
    Liveness,
    Message,
    Span,
    TableState,
)
from coordinator_lib.scheduler.replication_set import ReplicationSetState
from coordinator_lib.scheduler.scheduler import Scheduler


class SimulationError(AssertionError):
    """A property failed; the message names the seed and recent events."""


@dataclass(frozen=True)
class SimConfig:
    captures: int = 3
    owners: int = 2
    initial_tasks: int = 5
    chaos_steps: int = 60
    settle_bound: int = 400
    """Steps allowed for each settling phase (settle, drain, each move,
    rebalance) once faults stop."""
    tick_ms: int = 100
    capture_ttl_ticks: int = 4
    owner_ttl_ticks: int = 4
    max_delay: int = 4
    straggler: float = 0.02
    """Chance a message is held back far longer (up to 10 * max_delay)."""
    drop: float = 0.08
    duplicate: float = 0.05
    capture_crash: float = 0.01
    capture_pause: float = 0.008
    capture_pause_ticks: int = 0
    """Longest capture pause (0: three lease TTLs)."""
    capture_partition: float = 0.006
    owner_crash: float = 0.008
    owner_pause: float = 0.008
    owner_crash_mid_move: float = 0.1
    """Chance per step an owner dies while one of its moves is committing
    (the old primary stopping), the moment a successor must get right."""
    refuse: float = 0.05
    executor_delay: int = 3
    """Most ticks a prepare or commit takes."""
    stop_delay: int = 3
    """Most ticks a stop takes (a dataflow's last flush can be slow)."""
    task_churn: float = 0.04
    api_call: float = 0.04
    max_task_concurrency: int = 3
    heartbeat_tick: int = 2
    slow_step: float = 0.2
    """Chance a step's compare-and-append comes a tick after it read the
    upper (a process frozen in between resumes with a stale step)."""


def random_config(seed: int) -> SimConfig:
    """A fault profile drawn from the seed, so a sweep covers calm and
    hostile regimes: few or many captures, short or long delays (long ones
    let stale duplicates arrive after a task moved on), rare or frequent
    crashes, pauses and owner failovers."""
    rng = random.Random(seed ^ 0x5EED)
    hostility = rng.choice((0.5, 1.0, 2.0, 3.0))
    return SimConfig(
        captures=rng.randint(2, 5),
        owners=rng.randint(1, 3),
        initial_tasks=rng.randint(1, 10),
        chaos_steps=rng.randint(40, 90),
        max_delay=rng.choice((1, 3, 6, 12)),
        straggler=rng.choice((0.0, 0.02, 0.1)),
        drop=rng.choice((0.0, 0.05, 0.15, 0.3)),
        duplicate=rng.choice((0.0, 0.05, 0.2, 0.4)),
        capture_crash=0.01 * hostility,
        capture_pause=0.008 * hostility,
        capture_partition=0.006 * hostility,
        owner_crash=0.008 * hostility,
        owner_pause=0.012 * hostility,
        owner_crash_mid_move=rng.choice((0.0, 0.1, 0.3)),
        refuse=rng.choice((0.0, 0.05, 0.2)),
        executor_delay=(executor_delay := rng.choice((0, 1, 3, 8))),
        stop_delay=(stop_delay := rng.choice((0, 3, 8, 30))),
        settle_bound=300 + 60 * max(executor_delay, stop_delay),
        task_churn=rng.choice((0.0, 0.04, 0.1)),
        api_call=rng.choice((0.02, 0.06, 0.15)),
        max_task_concurrency=rng.randint(1, 5),
        heartbeat_tick=rng.randint(1, 3),
        slow_step=rng.choice((0.0, 0.2, 0.5)),
    )


@dataclass
class SimStats:
    steps: int = 0
    landed_writes: int = 0
    fenced_writes: int = 0
    """Steps not started or given up because the incarnation's fence was
    lost (its lease expired, or it lost a race without its lease)."""
    lost_races: int = 0
    """Compare-and-appends that failed because the upper had moved."""
    stale_lands: int = 0
    """Steps in flight when their incarnation's lease expired that still
    landed (nobody had advanced the shard: the CaS decided)."""
    elections: int = 0
    restarts: int = 0
    moves_done: int = 0
    drains_done: int = 0
    chaos_moves_done: int = 0
    """Moves requested during the faults that landed."""
    chaos_drains_done: int = 0
    chaos_abandoned: int = 0
    """Requests during the faults abandoned for a reason (see `_track`)."""
    messages: int = 0
    drops: int = 0
    duplicates: int = 0
    reorders: int = 0
    """Messages delivered, while faults are on, before one sent earlier to
    the same recipient."""


# -- consensus: shard uppers and the global checkpoint ------------------------


@dataclass(eq=False)
class _Session:
    span: Span
    capture_id: CaptureId
    epoch: int
    number: int
    fence: LeaseFence
    pending: tuple[int, int] | None = None
    """A step in flight: the [lower, upper) it read and will CaS."""
    stopped: bool = False
    fenced: bool = False


class _Shard:
    """A task's output shard: its upper and who landed which times."""

    __slots__ = ("last_landed", "last_writer", "past_writers", "upper")

    def __init__(self, upper: int) -> None:
        self.upper = upper
        self.last_writer: _Session | None = None
        self.past_writers: set[_Session] = set()
        self.last_landed: tuple[int, int, _Session] | None = None
        """The latest landed write: (lower, upper, writer)."""

    def compare_and_append(self, expected_upper: int, new_upper: int) -> bool:
        """Persist's CaS (invariant 2): the only thing deciding a write."""
        if self.upper != expected_upper:
            return False
        self.upper = new_upper
        return True


class _Writer:
    """The dataflows of one capture incarnation, as a worker steps them: read
    the upper, compute, compare-and-append; the incarnation's LeaseFence is
    asked before each step and after a lost race."""

    def __init__(
        self, sim: Simulation, capture_id: CaptureId, epoch: int, fence: LeaseFence
    ) -> None:
        self.sim = sim
        self.capture_id = capture_id
        self.epoch = epoch
        self.fence = fence
        self._sessions = 0

    def start(self, span: Span, checkpoint: Checkpoint) -> _Session:
        self._sessions += 1
        session = _Session(span, self.capture_id, self.epoch, self._sessions, self.fence)
        self.sim.active_sessions.setdefault(span, []).append(session)
        return session

    def write(self, session: object) -> Checkpoint | None:
        assert isinstance(session, _Session)
        sim = self.sim
        if session.stopped:
            sim.fail(f"stopped writer session {session} asked to write")
        if session.fenced:
            sim.fail(f"{session.capture_id}@{session.epoch} kept stepping after its fence was lost")
        shard = sim.shards[session.span]
        if session.pending is None:
            if not self.fence.may_write():
                self._fenced(session)
                return None
            lower, now = shard.upper, sim.clock.now_ms()
            if now <= lower:
                return Checkpoint(lower, lower)
            session.pending = (lower, now)
            slow = sim.config.slow_step
            if slow and sim.rng.random() < slow:
                return Checkpoint(lower, lower)  # the CaS comes next tick
        lower, upper = session.pending
        session.pending = None
        if not shard.compare_and_append(lower, upper):
            sim.stats.lost_races += 1
            if not self.fence.after_lost_race():
                self._fenced(session)
                return None
            return Checkpoint(shard.upper, shard.upper)
        sim.stats.landed_writes += 1
        if sim.clock.now_ms() >= self.fence.lease.expires_at_ms:  # (renewals keep it current)
            sim.stats.stale_lands += 1
        self._record(shard, session, lower, upper)
        return Checkpoint(upper, upper)

    def _fenced(self, session: _Session) -> None:
        session.fenced = True
        self.sim.stats.fenced_writes += 1

    def _record(self, shard: _Shard, session: _Session, lower: int, upper: int) -> None:
        if shard.last_landed is not None:
            last_lower, last_upper, writer = shard.last_landed
            if lower < last_upper:
                self.sim.fail(
                    f"{session.span}: {session.capture_id}@{session.epoch}"
                    f" landed [{lower}, {upper})"
                    f" over [{last_lower}, {last_upper}) of {writer.capture_id}@{writer.epoch}"
                    " (two writers landed the same times)"
                )
        shard.last_landed = (lower, upper, session)
        last = shard.last_writer
        if last is session:
            return
        if session in shard.past_writers:
            self.sim.fail(
                f"{session.span}: writer {session.capture_id}@{session.epoch}#{session.number}"
                f" landed again after {last.capture_id}@{last.epoch}#{last.number} (two primaries)"
                if last is not None
                else f"{session.span}: writer landed again"
            )
        if last is not None:
            shard.past_writers.add(last)
        shard.last_writer = session

    def stop(self, session: object) -> None:
        assert isinstance(session, _Session)
        session.stopped = True
        session.pending = None  # a step not landed yet never lands
        self.sim.active_sessions[session.span].remove(session)


# -- the network --------------------------------------------------------------


class _Network:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.in_flight: list[tuple[int, float, int, Message]] = []
        self._order = 0
        self._delivered: dict[str, int] = {}  # recipient -> latest send order delivered
        self.faulty = True

    def send(self, messages: list[Message]) -> None:
        sim, rng, cfg = self.sim, self.sim.rng, self.sim.config
        step = sim.step_no
        for message in messages:
            sim.stats.messages += 1
            if message.sender in sim.partitioned or message.to in sim.partitioned:
                continue
            copies = 1
            if self.faulty:
                if rng.random() < cfg.drop:
                    sim.stats.drops += 1
                    continue
                if rng.random() < cfg.duplicate:
                    sim.stats.duplicates += 1
                    copies = 2
            for _ in range(copies):
                delay = rng.randint(0, cfg.max_delay if self.faulty else 1)
                if self.faulty and rng.random() < cfg.straggler:
                    delay = rng.randint(cfg.max_delay, 10 * cfg.max_delay)
                self._order += 1
                heapq.heappush(self.in_flight, (step + delay, rng.random(), self._order, message))

    def deliver(self) -> dict[str, list[Message]]:
        inbox: dict[str, list[Message]] = {}
        step = self.sim.step_no
        while self.in_flight and self.in_flight[0][0] <= step:
            _, _, order, message = heapq.heappop(self.in_flight)
            if message.to in self.sim.partitioned:
                continue
            if self.faulty:
                if order < self._delivered.get(message.to, 0):
                    self.sim.stats.reorders += 1
                else:
                    self._delivered[message.to] = order
            inbox.setdefault(message.to, []).append(message)
        return inbox


class _SimTransport:
    def __init__(self, network: _Network) -> None:
        self.network = network
        self.inbox: list[Message] = []

    def send(self, messages) -> None:
        self.network.send(list(messages))

    def recv(self) -> list[Message]:
        inbox, self.inbox = self.inbox, []
        return inbox


# -- processes ----------------------------------------------------------------


class _CaptureProc:
    def __init__(self, sim: Simulation, capture_id: CaptureId) -> None:
        self.sim = sim
        self.capture_id = capture_id
        self.lease: CaptureLease | None = None
        self.fence: LeaseFence | None = None
        self.agent: Agent | None = None
        self.executor: InMemoryTableExecutor | None = None
        self.down_until = -1  # crashed until this step
        self.paused_until = -1
        self.start()

    @property
    def running(self) -> bool:
        return self.agent is not None

    def start(self) -> None:
        sim, rng = self.sim, self.sim.rng
        cfg = sim.config
        self.lease = sim.leases.acquire_capture_lease(
            self.capture_id, cfg.capture_ttl_ticks * cfg.tick_ms
        )
        epoch = self.lease.epoch
        self.fence = LeaseFence(sim.leases, self.lease, sim.clock)

        def delay(hi: int):
            return lambda span: rng.randint(0, hi)

        def refuse(span: Span) -> bool:
            return sim.network.faulty and rng.random() < cfg.refuse

        self.executor = InMemoryTableExecutor(
            prepare_ticks=delay(cfg.executor_delay),
            commit_ticks=delay(cfg.executor_delay),
            stop_ticks=delay(cfg.stop_delay),
            refuse=refuse,
            writer=_Writer(sim, self.capture_id, epoch, self.fence),
        )
        self.agent = Agent(self.capture_id, epoch, self.executor)
        sim.event(f"capture {self.capture_id}@{epoch} starts")

    def stop(self, graceful: bool) -> None:
        assert self.executor is not None and self.lease is not None
        self.executor.close()
        if graceful:
            self.sim.leases.release_capture_lease(self.lease)
        self.agent = self.executor = None
        self.lease = self.fence = None

    def step(self, inbox: list[Message]) -> None:
        sim = self.sim
        if not self.running:
            if sim.step_no >= self.down_until:
                sim.stats.restarts += 1
                self.start()
            return
        if sim.step_no < self.paused_until:
            return  # frozen: no renewals, no work; messages to it are lost
        assert self.agent is not None and self.executor is not None and self.lease is not None
        assert self.fence is not None
        # A process resuming from a pause first does what it was doing
        # (a step in flight reaches its CaS; new steps meet the fence), only
        # then notices its lease is gone.
        self.executor.advance()
        if self.fence.lost.is_set():
            sim.event(f"capture {self.capture_id}@{self.lease.epoch} fenced: {self.fence.reason}")
            self.stop(graceful=False)
            self.down_until = sim.step_no + 1
            return
        if self.capture_id not in sim.partitioned:
            renewed = sim.leases.renew_capture_lease(
                self.lease, sim.config.capture_ttl_ticks * sim.config.tick_ms
            )
            if renewed is None:
                sim.event(f"capture {self.capture_id}@{self.lease.epoch} lost its lease")
                self.stop(graceful=False)
                self.down_until = sim.step_no + 1
                return
            self.lease = renewed
            self.fence.renewed(renewed)
        sim.network.send(self.agent.tick(inbox))


class _OwnerProc:
    def __init__(self, sim: Simulation, owner_id: str) -> None:
        self.sim = sim
        self.owner_id = owner_id
        self.lease: OwnerLease | None = None
        self.scheduler: Scheduler | None = None
        self.transport = _SimTransport(sim.network)
        self.down_until = -1
        self.paused_until = -1
        self.last_watermark = 0

    def step(self, inbox: list[Message]) -> None:
        sim = self.sim
        cfg = sim.config
        if sim.step_no < self.down_until or sim.step_no < self.paused_until:
            return
        ttl = cfg.owner_ttl_ticks * cfg.tick_ms
        if self.scheduler is not None and self.lease is not None:
            # A zombie owner resuming from a pause acts once before it
            # learns it was deposed: its messages carry the old revision.
            self._tick(inbox)
            self.lease = sim.leases.renew_owner_lease(self.lease, ttl)
            if self.lease is None:
                sim.event(f"owner {self.owner_id} deposed")
                self.scheduler = None
            return
        if self.owner_id in sim.partitioned:
            return
        self.lease = sim.leases.campaign_owner(self.owner_id, ttl)
        if self.lease is not None:
            sim.stats.elections += 1
            sim.event(f"owner {self.owner_id} elected at revision {self.lease.revision}")
            self.scheduler = Scheduler(
                self.owner_id,
                self.lease.revision,
                self.transport,
                max_task_concurrency=cfg.max_task_concurrency,
                heartbeat_tick=cfg.heartbeat_tick,
                check_balance_interval=50,
                seed=sim.rng.randrange(1 << 30),
            )
            self.last_watermark = 0
            self._tick([])

    def _tick(self, inbox: list[Message]) -> None:
        sim = self.sim
        assert self.scheduler is not None and self.lease is not None
        self.transport.inbox = inbox
        # The coordinator bounds progress by the present (TiCDC: the barrier).
        now = sim.clock.now_ms()
        watermark = self.scheduler.tick(
            sim.global_checkpoint,
            list(sim.tables),
            sim.leases.alive_captures(),
            Barrier(now, now),
        )
        checkpoint = watermark.checkpoint_ts
        if checkpoint == CHECKPOINT_CANNOT_PROCEED:
            return
        if checkpoint < self.last_watermark:
            sim.fail(f"owner {self.owner_id}: watermark {checkpoint} < {self.last_watermark}")
        self.last_watermark = checkpoint
        sim.persist_checkpoint(self.lease.revision, checkpoint)

    def crash(self) -> None:
        self.scheduler = None
        self.lease = None


# -- the simulation -----------------------------------------------------------


@dataclass
class _Drain:
    """A drain taken by an owner during the faults (tracked until done)."""

    target: CaptureId
    target_epoch: int
    revision: int  # of the owner that took it
    issued: int  # step


@dataclass
class _Move:
    """A move taken by an owner during the faults (tracked until done)."""

    span: Span
    dest: CaptureId
    dest_epoch: int
    revision: int  # of the owner that took it
    issued: int  # step


@dataclass
class _Pending:
    drains: list[_Drain] = field(default_factory=list)
    moves: list[_Move] = field(default_factory=list)


class Simulation:
    def __init__(self, seed: int, config: SimConfig | None = None) -> None:
        self.seed = seed
        self.config = config or SimConfig()
        self.rng = random.Random(seed)
        self.clock = FakeClock(1_000)
        self.leases = InMemoryLeaseStore(self.clock)
        self.stats = SimStats()
        self.events: list[str] = []
        self.step_no = 0
        self.partitioned: set[str] = set()
        self.network = _Network(self)
        self.shards: dict[Span, _Shard] = {}
        self.active_sessions: dict[Span, list[_Session]] = {}
        """Writer sessions started and not stopped (a paused process's too)."""
        self.tables: list[Span] = []
        self._next_table = 0
        self.global_checkpoint = 0
        self._checkpoint_revision = 0
        for _ in range(self.config.initial_tasks):
            self._create_table()
        self.captures = [_CaptureProc(self, f"w{i}") for i in range(self.config.captures)]
        self.owners = [_OwnerProc(self, f"serve{i}") for i in range(self.config.owners)]
        self._partition_until: dict[str, int] = {}
        self.pending = _Pending()

    # -- bookkeeping ---------------------------------------------------------

    def event(self, text: str) -> None:
        self.events.append(f"[{self.step_no}] {text}")

    def fail(self, why: str) -> None:
        tail = "\n".join(self.events[-60:])
        raise SimulationError(f"seed {self.seed}, step {self.step_no}: {why}\n{tail}")

    def _create_table(self) -> None:
        span = f"t{self._next_table}"
        self._next_table += 1
        self.shards[span] = _Shard(self.clock.now_ms())
        self.tables.append(span)
        self.event(f"create {span}")

    def persist_checkpoint(self, revision: int, checkpoint: int) -> None:
        """The owner writes the global checkpoint: a compare-and-set fenced
        by its revision (a deposed owner's write fails)."""
        owner = self.leases.get_owner()
        if owner is None or owner.revision != revision:
            return
        if checkpoint < self.global_checkpoint:
            self.fail(f"global checkpoint regresses: {checkpoint} < {self.global_checkpoint}")
        for span in self.tables:
            if checkpoint > self.shards[span].upper:
                self.fail(
                    f"checkpoint {checkpoint} passes {span}'s upper {self.shards[span].upper}"
                )
        self.global_checkpoint = checkpoint

    def owner(self) -> _OwnerProc | None:
        current = self.leases.get_owner()
        for proc in self.owners:
            if (
                current is not None
                and proc.lease is not None
                and proc.lease.revision == current.revision
                and proc.scheduler is not None
            ):
                return proc
        return None

    # -- running -------------------------------------------------------------

    def run(self) -> SimStats:
        cfg = self.config
        for _ in range(cfg.chaos_steps):
            self._step(chaos=True)
        self._quiesce()
        self._settle()
        return self.stats

    def _step(self, chaos: bool) -> None:
        self.step_no += 1
        self.stats.steps += 1
        self.clock.advance(self.config.tick_ms)
        if chaos:
            self._inject_faults()
        for name, until in list(self._partition_until.items()):
            if self.step_no >= until:
                del self._partition_until[name]
                self.partitioned.discard(name)
                self.event(f"{name} reconnected")
        inbox = self.network.deliver()
        procs: list[_CaptureProc | _OwnerProc] = [*self.captures, *self.owners]
        self.rng.shuffle(procs)
        for proc in procs:
            name = proc.capture_id if isinstance(proc, _CaptureProc) else proc.owner_id
            proc.step(inbox.get(name, []))
        self._check_one_writer()
        self._track()

    def _check_one_writer(self) -> None:
        """No two live incarnations run a writer for one task."""
        for span, sessions in self.active_sessions.items():
            if len(sessions) > 1:
                live = [
                    f"{s.capture_id}@{s.epoch}"
                    for s in sessions
                    if not s.fenced and self.leases.is_live(s.capture_id, s.epoch)
                ]
                if len(live) > 1:
                    self.fail(f"{span}: live writers on {live}")

    def _inject_faults(self) -> None:
        rng, cfg = self.rng, self.config
        for proc in self.captures:
            if not proc.running or self.step_no < proc.paused_until:
                continue
            r = rng.random()
            if r < cfg.capture_crash:
                self.event(f"crash capture {proc.capture_id}")
                proc.stop(graceful=False)
                proc.down_until = self.step_no + rng.randint(1, 3 * cfg.capture_ttl_ticks)
            elif r < cfg.capture_crash + cfg.capture_pause:
                longest = cfg.capture_pause_ticks or 3 * cfg.capture_ttl_ticks
                proc.paused_until = self.step_no + rng.randint(1, longest)
                self.event(f"pause capture {proc.capture_id} until {proc.paused_until}")
            elif r < cfg.capture_crash + cfg.capture_pause + cfg.capture_partition:
                self._partition(proc.capture_id)
        for owner in self.owners:
            if self.step_no < owner.down_until or self.step_no < owner.paused_until:
                continue
            r = rng.random()
            crash = cfg.owner_crash
            if owner.scheduler is not None and any(
                rep.state == ReplicationSetState.COMMIT
                for rep in owner.scheduler.replication_sets.values()
            ):
                crash += cfg.owner_crash_mid_move
            if r < crash:
                self.event(f"crash owner {owner.owner_id}")
                owner.crash()
                owner.down_until = self.step_no + rng.randint(1, 3 * cfg.owner_ttl_ticks)
            elif r < crash + cfg.owner_pause:
                owner.paused_until = self.step_no + rng.randint(1, 3 * cfg.owner_ttl_ticks)
                self.event(f"pause owner {owner.owner_id} until {owner.paused_until}")
        if rng.random() < cfg.task_churn:
            if self.tables and rng.random() < 0.4:
                span = self.tables.pop(rng.randrange(len(self.tables)))
                self.event(f"drop {span}")
            else:
                self._create_table()
        if rng.random() < cfg.api_call:
            self._random_api_call()

    def _partition(self, name: str) -> None:
        self.partitioned.add(name)
        self._partition_until[name] = self.step_no + self.rng.randint(
            1, 3 * self.config.capture_ttl_ticks
        )
        self.event(f"partition {name} until {self._partition_until[name]}")

    def _random_api_call(self) -> None:
        owner = self.owner()
        if owner is None or owner.scheduler is None:
            return
        rng = self.rng
        r = rng.random()
        capture = rng.choice(self.captures).capture_id
        if r < 0.4 and self.tables:
            span = rng.choice(self.tables)
            known = span in owner.scheduler.replication_sets
            taken = owner.scheduler.move_table(span, capture)
            self.event(f"move_table({span}, {capture}) -> {taken}")
            epoch = self._epoch_of(capture)
            if taken and known and epoch is not None and owner.lease is not None:
                self.pending.moves.append(
                    _Move(span, capture, epoch, owner.lease.revision, self.step_no)
                )
        elif r < 0.7:
            self.event(f"rebalance() -> {owner.scheduler.rebalance()}")
        else:
            remaining = owner.scheduler.drain_capture(capture)
            self.event(f"drain_capture({capture}) -> {remaining}")
            epoch = self._epoch_of(capture)
            target = owner.scheduler.scheduler_manager.drain_capture.target
            tracked = any(d.target == capture for d in self.pending.drains)
            if target == capture and epoch is not None and owner.lease and not tracked:
                self.pending.drains.append(
                    _Drain(capture, epoch, owner.lease.revision, self.step_no)
                )

    def _draining(self, capture_id: CaptureId) -> bool:
        """The capture knows it is being drained (any owner will go on)."""
        for proc in self.captures:
            if proc.capture_id == capture_id and proc.agent is not None:
                return proc.agent.liveness == Liveness.STOPPING
        return False

    def _epoch_of(self, capture_id: CaptureId) -> int | None:
        for proc in self.captures:
            if proc.capture_id == capture_id and proc.lease is not None:
                return proc.lease.epoch
        return None

    def _track(self) -> None:
        """Resolve the moves and drains requested during the faults: each
        lands or is abandoned for a reason; what remains is still pending."""
        if not self.pending.moves and not self.pending.drains:
            return
        owner = self.owner()
        scheduler = owner.scheduler if owner is not None else None
        revision = owner.lease.revision if owner is not None and owner.lease else None
        reps = scheduler.replication_sets if scheduler is not None else {}
        stopping = set()
        if scheduler is not None:
            stopping = {
                c
                for c, st in scheduler.capture_manager.captures.items()
                if st.state == CaptureState.STOPPING
            }
        moves = []
        for move in self.pending.moves:
            rep = reps.get(move.span)
            if revision == move.revision and rep is not None and rep.primary == move.dest:
                self.stats.chaos_moves_done += 1
                self.event(f"chaos move of {move.span} to {move.dest} landed")
            elif (
                (revision is not None and revision != move.revision)
                or move.span not in self.tables
                or self._epoch_of(move.dest) != move.dest_epoch
                or move.dest in stopping
            ):
                self.stats.chaos_abandoned += 1
            else:
                moves.append(move)
        self.pending.moves = moves
        drains = []
        for drain in self.pending.drains:
            nowhere = scheduler is not None and not any(
                st.state == CaptureState.INITIALIZED
                for c, st in scheduler.capture_manager.captures.items()
                if c != drain.target
            )
            if (
                self._epoch_of(drain.target) != drain.target_epoch
                or (
                    revision is not None
                    and revision != drain.revision
                    and not self._draining(drain.target)
                )
                or nowhere
            ):
                # A new incarnation is not drained; a drain its owner took
                # but never told the capture is lost with that owner (an
                # operator asks again until it reports 0); with every other
                # capture stopping too there is nowhere to drain to.
                self.stats.chaos_abandoned += 1
            elif (
                scheduler is not None
                and scheduler.is_initialized()
                and not any(rep.primary == drain.target for rep in reps.values())
            ):
                self.stats.chaos_drains_done += 1
                self.event(f"chaos drain of {drain.target} done")
            else:
                drains.append(drain)
        self.pending.drains = drains

    def _quiesce(self) -> None:
        """Faults stop: everything heals and comes back."""
        self.event("quiesce")
        self.network.faulty = False
        self.partitioned.clear()
        self._partition_until.clear()
        for proc in self.captures:
            proc.paused_until = -1
            proc.down_until = min(proc.down_until, self.step_no + 1)
        for owner in self.owners:
            owner.paused_until = -1
            owner.down_until = -1

    # -- settling ------------------------------------------------------------

    def _settle(self) -> None:
        quiet_from_ms = self.clock.now_ms()
        # Moves and drains requested during the faults finish (before the
        # drained captures are restarted, which would abandon their drains).
        self._run_until(
            lambda: not self.pending.moves and not self.pending.drains,
            "requests made during the faults did not finish",
        )
        self._run_until(self._restart_drained_then_converged, "tasks did not settle")
        self._run_until(lambda: self.global_checkpoint > quiet_from_ms, "checkpoint stuck")

        # Drain a capture, then stop and restart it (what an operator does).
        if len(self.captures) >= 2:
            target = self.rng.choice(self.captures)
            self._run_until(lambda: self._drain(target.capture_id) == 0, "drain stuck")
            self.stats.drains_done += 1
            self._restart(target)
            self._run_until(self._converged, "tasks did not settle after the drain")

        # Move some tasks, each to a capture other than its primary.
        scheduler = self._scheduler_or_fail()
        moves = []
        for span in self.rng.sample(self.tables, min(3, len(self.tables))):
            primary = scheduler.replication_sets[span].primary
            others = [c.capture_id for c in self.captures if c.capture_id != primary]
            if others:
                moves.append((span, self.rng.choice(others)))
        for span, dest in moves:
            self._run_until(lambda s=span, d=dest: self._move(s, d), f"move {span} stuck")
            self.stats.moves_done += 1

        # Rebalance and wait until it is done.
        self._run_until(lambda: self._scheduler_or_fail().rebalance(), "no rebalance")
        self._run_until(self._rebalanced, "rebalance stuck")
        self._run_until(self._converged, "tasks did not settle after rebalance")

    def _restart_drained_then_converged(self) -> bool:
        """Workers drained during the faults are stopped and started again
        (what an operator does; if every worker were left draining, new
        tasks would have nowhere to go)."""
        for proc in self.captures:
            if proc.agent is not None and proc.agent.liveness == Liveness.STOPPING:
                self._restart(proc)
        return self._converged()

    def _restart(self, proc: _CaptureProc) -> None:
        self.event(f"stop and restart {proc.capture_id}")
        if proc.running:  # (it may have just lost its lease and be down)
            proc.stop(graceful=True)
        proc.down_until = self.step_no + 1

    def _scheduler_or_fail(self) -> Scheduler:
        """The current owner's scheduler; the run fails if there is none."""
        owner = self.owner()
        if owner is None or owner.scheduler is None:
            self.fail("no owner")
        assert owner is not None and owner.scheduler is not None
        return owner.scheduler

    def _run_until(self, condition, what: str) -> None:
        bound = self.step_no + self.config.settle_bound
        while not condition():
            if self.step_no >= bound:
                self.fail(what + self._describe())
            self._step(chaos=False)

    def _drain(self, target: CaptureId) -> int:
        owner = self.owner()
        if owner is None or owner.scheduler is None:
            return 1
        return owner.scheduler.drain_capture(target)

    def _move(self, span: Span, dest: CaptureId) -> bool:
        owner = self.owner()
        if owner is None or owner.scheduler is None:
            return False
        rep = owner.scheduler.replication_sets.get(span)
        if rep is not None and rep.state == ReplicationSetState.REPLICATING and rep.primary == dest:
            return True
        pending = owner.scheduler.scheduler_manager.move_table.tasks
        if span not in pending and (rep is None or rep.state == ReplicationSetState.REPLICATING):
            owner.scheduler.move_table(span, dest)
        return False

    def _rebalanced(self) -> bool:
        owner = self.owner()
        if owner is None or owner.scheduler is None:
            return False
        return not owner.scheduler.scheduler_manager.rebalance.rebalance

    def _converged(self) -> bool:
        owner = self.owner()
        if owner is None or owner.scheduler is None or not owner.scheduler.is_initialized():
            return False
        if not all(c.running for c in self.captures):
            return False
        known = owner.scheduler.capture_manager.captures
        if len(known) != len(self.captures):
            return False
        reps = owner.scheduler.replication_sets
        live = self.captures
        current = set(self.tables)
        for span in self.tables:
            rep = reps.get(span)
            if (
                rep is None
                or rep.state != ReplicationSetState.REPLICATING
                or len(rep.captures) != 1
            ):
                return False
            holders = [
                (c.capture_id, c.executor.state_of(span))
                for c in live
                if c.executor is not None and c.executor.state_of(span) != TableState.ABSENT
            ]
            if holders != [(rep.primary, TableState.REPLICATING)]:
                return False
        for span in reps:
            if span not in current:
                return False
        for c in live:
            assert c.executor is not None
            for span in c.executor.tables:
                if span not in current:
                    return False
        return True

    def _describe(self) -> str:
        owner = self.owner()
        lines = [f"\ntables: {self.tables}, global checkpoint {self.global_checkpoint}"]
        if owner is not None and owner.scheduler is not None:
            lines.append(f"owner {owner.owner_id} rev {owner.scheduler.owner_revision}")
            for rep in owner.scheduler.replication_sets.values():
                lines.append(f"  {rep!r}")
            for c, s in owner.scheduler.capture_manager.captures.items():
                lines.append(f"  capture {c}@{s.epoch} {s.state.name}")
        for proc in self.captures:
            if proc.executor is not None and proc.lease is not None:
                states = {s: t.state.name for s, t in proc.executor.tables.items()}
                lines.append(f"  {proc.capture_id}@{proc.lease.epoch}: {states}")
        return "\n".join(lines)


def run_simulation(seed: int, config: SimConfig | None = None) -> SimStats:
    """Run one seed (with `random_config(seed)` unless a config is given);
    raises SimulationError if a property fails."""
    return Simulation(seed, config or random_config(seed)).run()
