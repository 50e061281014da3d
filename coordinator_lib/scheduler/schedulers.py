"""What to do next: TiCDC's schedulers and their manager
(cdc/scheduler/internal/v3/scheduler/). Each looks at the captures and the
replication sets and proposes schedule tasks; the manager asks them in
priority order (basic, drain capture, balance, move table, rebalance) and
takes the first non-empty proposal. Only the basic scheduler may run while
`max_task_concurrency` tasks are in flight: a task without any replica
holds the global checkpoint back, so adding it is never postponed (it is
bounded by `add_table_batch_size` per tick instead).

Deviations from TiCDC:

- New tasks go to the least loaded capture (TiCDC: round robin from the
  first capture every tick), never to the capture being drained.
- A requested move waits while its task is not REPLICATING (TiCDC drops
  the request), so a move asked for during a reschedule still happens.
- A manual rebalance honours `max_task_concurrency` and stays requested
  until the captures are balanced (TiCDC moves everything in one burst).
- Periodic balancing counts owner ticks (`check_balance_interval`), not
  wall time, so a run is reproducible.
"""

from __future__ import annotations

import heapq
import logging
import math
import random
from collections.abc import Mapping, Sequence
from typing import Protocol

from coordinator_lib.scheduler.capture_manager import CaptureState, CaptureStatus
from coordinator_lib.scheduler.messages import CaptureId, Span
from coordinator_lib.scheduler.replication_manager import (
    AddTable,
    BurstBalance,
    MoveTable,
    RemoveTable,
    ScheduleTask,
)
from coordinator_lib.scheduler.replication_set import ReplicationSet, ReplicationSetState

log = logging.getLogger(__name__)

Captures = Mapping[CaptureId, CaptureStatus]
Replications = Mapping[Span, ReplicationSet]


class SubScheduler(Protocol):
    """One scheduling policy (TiCDC's internal `scheduler` interface)."""

    name: str

    def schedule(
        self,
        checkpoint_ts: int,
        current_tables: Sequence[Span],
        captures: Captures,
        replications: Replications,
        running_tasks: Mapping[Span, object],
    ) -> list[ScheduleTask]: ...


class BasicScheduler:
    """Adds tasks without a replica and removes tasks no longer wanted."""

    name = "basic-scheduler"

    def __init__(self, add_table_batch_size: int, draining_target: DrainCaptureScheduler) -> None:
        self.add_table_batch_size = add_table_batch_size
        self._drain = draining_target

    def schedule(self, checkpoint_ts, current_tables, captures, replications, running_tasks):
        tasks: list[ScheduleTask] = []
        all_found = True
        new_tables = []
        for span in current_tables:
            rep = replications.get(span)
            if rep is None:
                new_tables.append(span)
                all_found = False
            elif rep.state == ReplicationSetState.ABSENT:
                new_tables.append(span)
        if new_tables:
            target = self._drain.target
            candidates = [
                c for c, s in captures.items() if s.state != CaptureState.STOPPING and c != target
            ]
            if not candidates:
                log.warning("no capture can take new tasks")
                return tasks
            new_tables = new_tables[: self.add_table_batch_size]
            tasks.append(
                ScheduleTask(
                    BurstBalance(
                        add_tables=tuple(
                            _least_loaded(checkpoint_ts, new_tables, candidates, replications)
                        )
                    )
                )
            )
            if len(new_tables) == len(current_tables):
                return tasks  # the initial placement
        if len(current_tables) != len(replications) or not all_found:
            current = set(current_tables)
            removes = []
            for span, rep in replications.items():
                if span not in current:
                    removes.append(RemoveTable(span, next(iter(rep.captures), "")))
            if removes:
                tasks.append(ScheduleTask(BurstBalance(remove_tables=tuple(removes))))
        return tasks


def _least_loaded(
    checkpoint_ts: int,
    new_tables: Sequence[Span],
    candidates: Sequence[CaptureId],
    replications: Replications,
) -> list[AddTable]:
    load = dict.fromkeys(candidates, 0)
    for rep in replications.values():
        for capture_id in rep.captures:
            if capture_id in load:
                load[capture_id] += 1
    heap = [(n, i, c) for i, (c, n) in enumerate(load.items())]
    heapq.heapify(heap)
    adds = []
    for span in new_tables:
        n, i, capture_id = heapq.heappop(heap)
        adds.append(AddTable(span, capture_id, checkpoint_ts))
        heapq.heappush(heap, (n + 1, i, capture_id))
    return adds


class DrainCaptureScheduler:
    """Moves every task off one capture, `max_task_concurrency` at a time."""

    name = "drain-capture-scheduler"

    def __init__(self, max_task_concurrency: int) -> None:
        self.max_task_concurrency = max_task_concurrency
        self.target: CaptureId = ""

    def set_target(self, target: CaptureId) -> bool:
        if self.target:
            return False
        self.target = target
        return True

    def schedule(self, checkpoint_ts, current_tables, captures, replications, running_tasks):
        if not self.target:
            # A capture may be stopping on its own (shutting down), or was
            # drained before: take one that still runs tasks (one already
            # drained would be taken, found empty and dropped every tick,
            # starving any other stopping capture).
            primaries = {rep.primary for rep in replications.values()}
            for capture_id, status in captures.items():
                if status.state == CaptureState.STOPPING and capture_id in primaries:
                    self.target = capture_id
                    log.info("drain stopping capture %s", capture_id)
                    break
            if not self.target:
                return []
        # Never onto another stopping capture (two drained captures would
        # pass their tasks back and forth).
        workload = {
            c: 0
            for c, status in captures.items()
            if c != self.target and status.state != CaptureState.STOPPING
        }
        if not workload:
            log.warning("drain of %s: no other capture", self.target)
            self.target = ""
            return []
        victims = []
        for span, rep in replications.items():
            if rep.state != ReplicationSetState.REPLICATING:
                return []  # drain only when everything replicates
            if rep.primary == self.target:
                if len(victims) < self.max_task_concurrency:
                    victims.append(span)
            elif rep.primary in workload:
                workload[rep.primary] += 1
        if not victims:
            log.info("drain of %s finished", self.target)
            self.target = ""
            return []
        tasks = []
        for span in victims:
            dest = min(workload, key=workload.__getitem__)
            tasks.append(ScheduleTask(MoveTable(span, dest)))
            workload[dest] += 1
        return tasks


def new_balance_move_tables(
    rng: random.Random | None,
    captures: Captures,
    replications: Replications,
    max_task_limit: int,
) -> list[MoveTable]:
    """Moves that bring every capture to at most ceil(tasks / captures)."""
    per_capture: dict[CaptureId, list[Span]] = {c: [] for c in captures}
    for span, rep in replications.items():
        if rep.state == ReplicationSetState.REPLICATING and rep.primary in per_capture:
            per_capture[rep.primary].append(span)
    if not per_capture:
        return []
    upper_limit = math.ceil(len(replications) / len(per_capture))
    victims = []
    for spans in per_capture.values():
        excess = len(spans) - upper_limit
        if excess <= 0:
            continue
        if rng is not None:
            rng.shuffle(spans)
        victims.extend(spans[:excess])
        del spans[:excess]
    if not victims:
        return []
    workload = {c: _randomize(rng, len(spans)) for c, spans in per_capture.items()}
    moves = []
    for span in victims[:max_task_limit]:
        dest = min(workload, key=workload.__getitem__)
        moves.append(MoveTable(span, dest))
        per_capture[dest].append(span)
        workload[dest] = _randomize(rng, len(per_capture[dest]))
    return moves


def _randomize(rng: random.Random | None, load: int) -> int:
    """Break ties between equally loaded captures at random."""
    return (load << 8) | (rng.getrandbits(8) if rng is not None else 0)


class BalanceScheduler:
    """Every `check_balance_interval` ticks, evens out tasks per capture."""

    name = "balance-scheduler"

    def __init__(self, check_balance_interval: int, max_task_concurrency: int, rng: random.Random):
        self.check_balance_interval = check_balance_interval
        self.max_task_concurrency = max_task_concurrency
        self.rng = rng
        self._ticks = 0
        self._force = False

    def schedule(self, checkpoint_ts, current_tables, captures, replications, running_tasks):
        self._ticks += 1
        if not self._force and self._ticks < self.check_balance_interval:
            return []
        self._ticks = 0
        if any(s.state == CaptureState.STOPPING for s in captures.values()):
            return []  # premature while a capture drains
        limit = self.max_task_concurrency - len(running_tasks)
        moves = new_balance_move_tables(self.rng, captures, replications, limit)
        self._force = bool(moves)
        return [ScheduleTask(m) for m in moves]


class MoveTableScheduler:
    """Moves requested by hand (`Scheduler.move_table`)."""

    name = "move-table-scheduler"

    def __init__(self) -> None:
        self.tasks: dict[Span, CaptureId] = {}

    def add_task(self, span: Span, target: CaptureId) -> bool:
        if span in self.tasks:
            return False  # the last request for it is not taken on yet
        self.tasks[span] = target
        return True

    def schedule(self, checkpoint_ts, current_tables, captures, replications, running_tasks):
        if not self.tasks or not captures:
            return []
        current = set(current_tables)
        result = []
        for span, dest in list(self.tasks.items()):
            status = captures.get(dest)
            rep = replications.get(span)
            if (
                span not in current
                or status is None
                or status.state != CaptureState.INITIALIZED
                or rep is None
            ):
                log.info("move of %s to %s dropped", span, dest)
                del self.tasks[span]
                continue
            if rep.state != ReplicationSetState.REPLICATING:
                continue  # wait for it
            result.append(ScheduleTask(MoveTable(span, dest), self._accept(span, dest)))
        return result

    def _accept(self, span: Span, dest: CaptureId):
        def accept() -> None:
            if self.tasks.get(span) == dest:
                del self.tasks[span]

        return accept


class RebalanceScheduler:
    """A rebalance requested by hand (`Scheduler.rebalance`)."""

    name = "rebalance-scheduler"

    def __init__(self, max_task_concurrency: int, rng: random.Random) -> None:
        self.max_task_concurrency = max_task_concurrency
        self.rng = rng
        self.rebalance = False

    def schedule(self, checkpoint_ts, current_tables, captures, replications, running_tasks):
        if not self.rebalance or not captures:
            return []
        if any(s.state == CaptureState.STOPPING for s in captures.values()):
            log.warning("a capture is stopping: rebalance dropped")
            self.rebalance = False
            return []
        for span in current_tables:
            rep = replications.get(span)
            if rep is None or rep.state != ReplicationSetState.REPLICATING:
                return []  # only when everything replicates
        limit = self.max_task_concurrency - len(running_tasks)
        moves = new_balance_move_tables(self.rng, captures, replications, limit)
        if not moves:
            self.rebalance = False
            log.info("rebalance finished")
        return [ScheduleTask(m) for m in moves]


class SchedulerManager:
    def __init__(
        self,
        *,
        max_task_concurrency: int,
        add_table_batch_size: int,
        check_balance_interval: int,
        rng: random.Random,
    ) -> None:
        self.max_task_concurrency = max_task_concurrency
        self.drain_capture = DrainCaptureScheduler(max_task_concurrency)
        self.move_table = MoveTableScheduler()
        self.rebalance = RebalanceScheduler(max_task_concurrency, rng)
        self.schedulers: list[SubScheduler] = [
            BasicScheduler(add_table_batch_size, self.drain_capture),
            self.drain_capture,
            BalanceScheduler(check_balance_interval, max_task_concurrency, rng),
            self.move_table,
            self.rebalance,
        ]

    def schedule(
        self,
        checkpoint_ts: int,
        current_tables: Sequence[Span],
        captures: Captures,
        replications: Replications,
        running_tasks: Mapping[Span, object],
    ) -> list[ScheduleTask]:
        for i, scheduler in enumerate(self.schedulers):
            if i > 0 and len(running_tasks) >= self.max_task_concurrency:
                return []
            tasks = scheduler.schedule(
                checkpoint_ts, current_tables, captures, replications, running_tasks
            )
            if tasks:
                log.debug("%s: %d tasks", scheduler.name, len(tasks))
                return tasks
        return []

    def draining_target(self) -> CaptureId:
        return self.drain_capture.target
