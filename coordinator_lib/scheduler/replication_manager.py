"""All replication sets, the schedule tasks running on them, and the global
watermark: TiCDC's replication `Manager`
(cdc/scheduler/internal/v3/replication/replication_manager.go).

Checkpoint: the least checkpoint over the current tasks, each counted at
its last known checkpoint whatever its state; CHECKPOINT_CANNOT_PROCEED if a
current task has no replication set yet. Tasks being removed (no longer
current) do not hold it back.

Deviations from TiCDC: a capture reporting a copy of a task that the
owner's set does not list (an orphan: an earlier owner ordered it just
before this one took over) is asked to remove it, where TiCDC ignores it
forever; tasks are keyed by name, not by key range, so no span holes to
look for; a running task also ends when its set falls back to
ABSENT (nothing is in flight then, and keeping it would block re-adding the
task); removing a task whose set is ABSENT drops the set at once (TiCDC
leaves it behind).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from coordinator_lib.scheduler.messages import (
    CHECKPOINT_CANNOT_PROCEED,
    Barrier,
    CaptureId,
    DispatchTableRequest,
    DispatchTableResponse,
    HeartbeatResponse,
    Message,
    RemoveTableRequest,
    Span,
    TableState,
    TableStatus,
    Watermark,
)
from coordinator_lib.scheduler.replication_set import ReplicationSet, ReplicationSetState

log = logging.getLogger(__name__)

_HELD = (TableState.PREPARING, TableState.PREPARED, TableState.REPLICATING)
_REPLICATING = TableState.REPLICATING
_SET_REPLICATING = ReplicationSetState.REPLICATING
_INFINITY = float("inf")


@dataclass(frozen=True, slots=True)
class AddTable:
    span: Span
    capture_id: CaptureId
    checkpoint_ts: int


@dataclass(frozen=True, slots=True)
class RemoveTable:
    span: Span
    capture_id: CaptureId


@dataclass(frozen=True, slots=True)
class MoveTable:
    span: Span
    dest_capture: CaptureId


@dataclass(frozen=True, slots=True)
class BurstBalance:
    """Many tasks at once, not limited by max_task_concurrency."""

    add_tables: tuple[AddTable, ...] = ()
    remove_tables: tuple[RemoveTable, ...] = ()
    move_tables: tuple[MoveTable, ...] = ()


@dataclass(frozen=True, slots=True)
class ScheduleTask:
    """One scheduling decision; `accept` is called once it is taken on."""

    task: AddTable | RemoveTable | MoveTable | BurstBalance
    accept: Callable[[], None] | None = None


class ReplicationManager:
    def __init__(self, max_task_concurrency: int) -> None:
        self.spans: dict[Span, ReplicationSet] = {}
        self.running_tasks: dict[Span, ScheduleTask | None] = {}
        self.max_task_concurrency = max_task_concurrency

    def handle_capture_changes(
        self,
        init: Mapping[CaptureId, Iterable[TableStatus]] | None,
        removed: Mapping[CaptureId, object] | None,
        checkpoint_ts: int,
    ) -> list[DispatchTableRequest]:
        """Build the sets from the captures' initial reports; treat the
        tasks of removed captures as stopped."""
        if init is not None:
            if self.spans:
                raise RuntimeError("replication sets initialized twice")
            by_span: dict[Span, dict[CaptureId, TableStatus]] = {}
            for capture_id, statuses in init.items():
                for status in statuses:
                    by_span.setdefault(status.span, {})[capture_id] = status
            for span, statuses_of in by_span.items():
                self.spans[span] = ReplicationSet(span, checkpoint_ts, statuses_of)
        sent: list[DispatchTableRequest] = []
        for capture_id in removed or ():
            for span, rep in list(self.spans.items()):
                msgs, affected = rep.handle_capture_shutdown(capture_id)
                sent.extend(msgs)
                if affected:
                    self.running_tasks.pop(span, None)
                    if rep.has_removed():
                        del self.spans[span]
        return sent

    def handle_message(self, messages: Sequence[Message]) -> list[DispatchTableRequest]:
        sent: list[DispatchTableRequest] = []
        spans_get = self.spans.get
        spans = self.spans
        for message in messages:
            if isinstance(message, HeartbeatResponse):
                statuses: Iterable[TableStatus] = message.tables
            elif isinstance(message, DispatchTableResponse):
                statuses = (message.response.status,)
            else:
                continue
            sender = message.sender
            for status in statuses:
                rep = spans_get(status.span)
                if (
                    rep is not None
                    and rep.primary == sender
                    and status.state is _REPLICATING
                    and rep.state is _SET_REPLICATING
                ):
                    # The steady state: the primary reports progress.
                    cp, current = status.checkpoint, rep.checkpoint
                    if (
                        cp.checkpoint_ts > current.checkpoint_ts
                        or cp.resolved_ts > current.resolved_ts
                    ):
                        rep.update_checkpoint(cp)
                    continue
                if rep is None or sender not in rep.captures:
                    if status.state in _HELD:
                        # An orphan: ordered by an earlier owner, unknown here.
                        sent.append(
                            DispatchTableRequest(to=sender, request=RemoveTableRequest(status.span))
                        )
                    continue
                msgs = rep.handle_table_status(sender, status)
                if msgs:
                    sent.extend(msgs)
                if rep.state == ReplicationSetState.REMOVING and rep.has_removed():
                    del spans[status.span]
        return sent

    def handle_tasks(self, tasks: Sequence[ScheduleTask]) -> list[DispatchTableRequest]:
        # Running tasks end when their set is back to REPLICATING (or ABSENT,
        # or gone).
        for span in [
            span
            for span in self.running_tasks
            if (rep := self.spans.get(span)) is None
            or rep.state in (ReplicationSetState.REPLICATING, ReplicationSetState.ABSENT)
            or rep.has_removed()
        ]:
            del self.running_tasks[span]

        sent: list[DispatchTableRequest] = []
        for scheduled in tasks:
            task = scheduled.task
            if isinstance(task, BurstBalance):
                sent.extend(self._handle_burst_balance(task))
                if scheduled.accept is not None:
                    scheduled.accept()
                continue
            if len(self.running_tasks) >= self.max_task_concurrency:
                continue
            if task.span in self.running_tasks:
                continue
            if task.span not in self.spans and not isinstance(task, AddTable):
                continue
            sent.extend(self._handle_one(task))
            self.running_tasks[task.span] = scheduled
            if scheduled.accept is not None:
                scheduled.accept()
        return sent

    def _handle_one(self, task: AddTable | RemoveTable | MoveTable) -> list[DispatchTableRequest]:
        if isinstance(task, AddTable):
            rep = self.spans.get(task.span)
            if rep is None:
                rep = self.spans[task.span] = ReplicationSet(task.span, task.checkpoint_ts)
            return rep.handle_add_table(task.capture_id)
        rep = self.spans[task.span]
        if isinstance(task, RemoveTable):
            if rep.has_removed() or (rep.state == ReplicationSetState.ABSENT and not rep.captures):
                del self.spans[task.span]
                return []
            return rep.handle_remove_table()
        return rep.handle_move_table(task.dest_capture)

    def _handle_burst_balance(self, burst: BurstBalance) -> list[DispatchTableRequest]:
        sent: list[DispatchTableRequest] = []
        for group in (burst.add_tables, burst.remove_tables, burst.move_tables):
            for task in group:
                if task.span in self.running_tasks:
                    continue
                if task.span not in self.spans and not isinstance(task, AddTable):
                    continue
                sent.extend(self._handle_one(task))
                self.running_tasks[task.span] = None  # a placeholder
        return sent

    def advance_checkpoint(
        self, current_tables: Iterable[Span], checkpoint_ts: int, barrier: Barrier | None
    ) -> Watermark:
        """The least checkpoint and resolved ts over the current tasks."""
        checkpoint = resolved = _INFINITY
        spans_get = self.spans.get
        for span in current_tables:
            rep = spans_get(span)
            if rep is None:
                return Watermark(CHECKPOINT_CANNOT_PROCEED, CHECKPOINT_CANNOT_PROCEED)
            cp = rep.checkpoint
            if cp.checkpoint_ts < checkpoint:
                checkpoint = cp.checkpoint_ts
            if cp.resolved_ts < resolved:
                resolved = cp.resolved_ts
        if checkpoint == _INFINITY or resolved == _INFINITY:
            # No current task: only the barrier (or the caller) says how far.
            if barrier is None:
                return Watermark(checkpoint_ts, checkpoint_ts)
            return Watermark(barrier.min_table_barrier_ts, barrier.global_barrier_ts)
        if barrier is not None:
            checkpoint = min(checkpoint, barrier.min_table_barrier_ts)
            resolved = min(resolved, barrier.global_barrier_ts)
        return Watermark(int(checkpoint), int(resolved))
