"""The owner side of the table scheduler: TiCDC's scheduler v3 `coordinator`
(cdc/scheduler/internal/v3/coordinator.go), behind the seed's `Scheduler`
interface.

The owner (inside `tidemark serve`) calls `tick` periodically with the
global checkpoint it last persisted, the tasks that should run, and the
captures whose liveness leases are alive; the Scheduler exchanges messages
with the captures' Agents over its transport, places and moves tasks, and
returns the global watermark: the least checkpoint over all current tasks,
or CHECKPOINT_CANNOT_PROCEED while some task has no known status. The
coordinator uses that checkpoint as the freshest time at which all
maintained views can be read together.

Contract: a task first listed in `current_tables` must be readable at the
`checkpoint_ts` passed with it (its upper is at least that), as TiCDC's
tables must exist at the checkpoint. If captures report something the
protocol rules out (two primaries of one task), `tick` raises
`ReplicationSetError`; the owner should then start a fresh Scheduler, which
rebuilds everything from the captures' reports (TiCDC restarts the
changefeed).

Deviations from TiCDC: the returned watermark never regresses (TiCDC leaves
that to its owner); incoming messages are fenced by owner revision, capture
epoch and sequence number (see `messages`); a capture's restart (new epoch,
same id) is handled as its removal before any message of the new
incarnation is looked at; `move_table` and `rebalance` say whether they
were taken; there is no owner-is-a-capture case (the owner runs no tasks).
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from coordinator_lib.scheduler.capture_manager import CaptureManager, CaptureState
from coordinator_lib.scheduler.messages import (
    CHECKPOINT_CANNOT_PROCEED,
    Barrier,
    CaptureId,
    CaptureInfo,
    HeartbeatResponse,
    Message,
    Span,
    Watermark,
    stamp,
)
from coordinator_lib.scheduler.replication_manager import ReplicationManager
from coordinator_lib.scheduler.replication_set import ReplicationSet, Role
from coordinator_lib.scheduler.schedulers import SchedulerManager
from coordinator_lib.scheduler.transport import Transport

log = logging.getLogger(__name__)


class TaskReport(NamedTuple):
    """One task on one capture, as `Scheduler.task_report` lists it."""

    task: Span
    state: str
    role: str
    checkpoint_ts: int


class Scheduler:
    """Schedules tasks on captures and reports the global watermark.

    `tick` is not meant to run concurrently with itself; `move_table`,
    `rebalance` and `drain_capture` may be called from other threads (the
    HTTP API)."""

    def __init__(
        self,
        owner_id: str,
        owner_revision: int,
        transport: Transport,
        *,
        max_task_concurrency: int = 10,
        add_table_batch_size: int = 50,
        heartbeat_tick: int = 2,
        collect_stats_tick: int = 200,
        check_balance_interval: int = 600,
        seed: int | None = None,
    ) -> None:
        self.owner_id = owner_id
        self.owner_revision = owner_revision
        self.transport = transport
        self.capture_manager = CaptureManager(
            heartbeat_tick=heartbeat_tick, collect_stats_tick=collect_stats_tick
        )
        self.replication_manager = ReplicationManager(max_task_concurrency)
        self.scheduler_manager = SchedulerManager(
            max_task_concurrency=max_task_concurrency,
            add_table_batch_size=add_table_batch_size,
            check_balance_interval=check_balance_interval,
            rng=random.Random(seed),
        )
        self.last_watermark = Watermark(CHECKPOINT_CANNOT_PROCEED, CHECKPOINT_CANNOT_PROCEED)
        self._seq = 0
        self._lock = threading.Lock()
        self._closed = False

    # -- the seed's Scheduler interface --------------------------------------

    def tick(
        self,
        checkpoint_ts: int,
        current_tables: Sequence[Span],
        alive_captures: Mapping[CaptureId, CaptureInfo],
        barrier: Barrier | None = None,
    ) -> Watermark:
        """One round: take messages, react, schedule, send, report progress."""
        with self._lock:
            if self._closed:
                raise RuntimeError("scheduler is closed")
            capture_m, replication_m = self.capture_manager, self.replication_manager
            out: list[Message] = []
            out.extend(capture_m.handle_alive_capture_update(alive_captures))
            # Removed (or restarted) captures first: their tasks have stopped.
            out.extend(self._apply_capture_changes(checkpoint_ts))

            inbound = [m for m in self.transport.recv() if self._accept(m)]
            for message in inbound:
                if isinstance(message, HeartbeatResponse):
                    capture_m.handle_heartbeat_response(message)
            if capture_m.maybe_initialize():
                out.extend(self._apply_capture_changes(checkpoint_ts))
            if capture_m.initialized:
                out.extend(replication_m.handle_message(inbound))

            if capture_m.check_all_capture_initialized():
                tasks = self.scheduler_manager.schedule(
                    checkpoint_ts,
                    current_tables,
                    capture_m.captures,
                    replication_m.spans,
                    replication_m.running_tasks,
                )
                out.extend(replication_m.handle_tasks(tasks))

            watermark = replication_m.advance_checkpoint(current_tables, checkpoint_ts, barrier)
            out.extend(
                capture_m.tick(
                    self._spans_by_capture,
                    self.scheduler_manager.draining_target(),
                    barrier,
                )
            )
            self._send(out)
            return self._monotone(watermark)

    def move_table(self, span: Span, target: CaptureId) -> bool:
        """Ask for `span` to be moved to `target`; False if not taken (not
        initialized yet, or a move of it is already pending)."""
        with self._lock:
            if not self.capture_manager.check_all_capture_initialized():
                log.info("move of %s to %s ignored: captures not initialized", span, target)
                return False
            return self.scheduler_manager.move_table.add_task(span, target)

    def rebalance(self) -> bool:
        """Ask for tasks to be spread evenly; False if not initialized yet."""
        with self._lock:
            if not self.capture_manager.check_all_capture_initialized():
                return False
            self.scheduler_manager.rebalance.rebalance = True
            return True

    def drain_capture(self, target: CaptureId) -> int:
        """Start moving every task off `target`; returns how many it still
        runs as primary (call again until 0)."""
        with self._lock:
            if not self.capture_manager.check_all_capture_initialized():
                return 1  # unknown yet: ask again
            count = sum(
                1 for rep in self.replication_manager.spans.values() if rep.primary == target
            )
            if count == 0:
                return 0
            if not any(
                status.state == CaptureState.INITIALIZED
                for capture_id, status in self.capture_manager.captures.items()
                if capture_id != target
            ):
                log.warning("drain of %s ignored: no other capture to take its tasks", target)
                return count
            if not self.scheduler_manager.drain_capture.set_target(target):
                log.info("drain of %s waits: another capture is draining", target)
            return count

    def close(self) -> None:
        with self._lock:
            self._closed = True

    # -- the seed's InfoProvider interface -----------------------------------

    def is_initialized(self) -> bool:
        with self._lock:
            return self.capture_manager.check_all_capture_initialized()

    def get_task_statuses(self) -> dict[CaptureId, dict[Span, Role]]:
        """Which capture holds which task in which role."""
        with self._lock:
            result: dict[CaptureId, dict[Span, Role]] = {
                c: {} for c in self.capture_manager.captures
            }
            for span, rep in self.replication_manager.spans.items():
                for capture_id, role in rep.captures.items():
                    result.setdefault(capture_id, {})[span] = role
            return result

    def task_report(self) -> dict[CaptureId, list[TaskReport]]:
        """Every live capture's tasks: role from the owner's set, state and
        checkpoint as the capture last reported them (the set's when it has
        not reported that task yet). For the HTTP API."""
        with self._lock:
            captures = self.capture_manager.captures
            report: dict[CaptureId, list[TaskReport]] = {c: [] for c in captures}
            reported = {c: {s.span: s for s in status.tables} for c, status in captures.items()}
            for span, rep in sorted(self.replication_manager.spans.items()):
                for capture_id, role in rep.captures.items():
                    if capture_id not in report:
                        continue
                    status = reported[capture_id].get(span)
                    if status is not None:
                        state = status.state.name.lower()
                        checkpoint = max(
                            status.checkpoint.checkpoint_ts, rep.checkpoint.checkpoint_ts
                        )
                    else:
                        state, checkpoint = rep.state.name.lower(), rep.checkpoint.checkpoint_ts
                    report[capture_id].append(
                        TaskReport(span, state, role.name.lower(), checkpoint)
                    )
            return report

    @property
    def replication_sets(self) -> Mapping[Span, ReplicationSet]:
        """The live sets, unlocked: for tests and single-threaded callers."""
        return self.replication_manager.spans

    # -- internals -----------------------------------------------------------

    def _apply_capture_changes(self, checkpoint_ts: int) -> list[Message]:
        changes = self.capture_manager.take_changes()
        if changes is None:
            return []
        drain = self.scheduler_manager.drain_capture
        if drain.target in changes.removed:
            # That incarnation is gone; a restarted one is not to be drained.
            drain.target = ""
        return list(
            self.replication_manager.handle_capture_changes(
                changes.init, changes.removed, checkpoint_ts
            )
        )

    def _accept(self, message: Message) -> bool:
        if message.owner_revision != self.owner_revision or message.to != self.owner_id:
            return False
        return self.capture_manager.accept(message.sender, message.capture_epoch, message.seq)

    def _spans_by_capture(self) -> dict[CaptureId, list[Span]]:
        spans: dict[CaptureId, list[Span]] = {}
        for span, rep in self.replication_manager.spans.items():
            for capture_id in rep.captures:
                spans.setdefault(capture_id, []).append(span)
        return spans

    def _send(self, messages: list[Message]) -> None:
        if not messages:
            return
        captures = self.capture_manager.captures
        stamped = []
        for message in messages:
            status = captures.get(message.to)
            if status is None:
                continue  # the capture is gone
            self._seq += 1
            stamped.append(
                stamp(
                    message,
                    sender=self.owner_id,
                    to=message.to,
                    owner_revision=self.owner_revision,
                    capture_epoch=status.epoch,
                    seq=self._seq,
                )
            )
        self.transport.send(stamped)

    def _monotone(self, watermark: Watermark) -> Watermark:
        if watermark.checkpoint_ts == CHECKPOINT_CANNOT_PROCEED:
            return watermark
        last = self.last_watermark
        if watermark.checkpoint_ts < last.checkpoint_ts or watermark.resolved_ts < last.resolved_ts:
            watermark = Watermark(
                max(watermark.checkpoint_ts, last.checkpoint_ts),
                max(watermark.resolved_ts, last.resolved_ts),
            )
        self.last_watermark = watermark
        return watermark
