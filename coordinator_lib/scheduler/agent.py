"""The capture side of the table scheduler: TiCDC's `agent` and its per-table
state machine (cdc/scheduler/internal/v3/agent/{agent,table}.go).

An `Agent` lives in every capture (`tidemark worker`). Each `tick` it takes
the owner's messages, fences stale ones, turns dispatch requests into tasks
on its `TableExecutor`, polls those tasks, and returns the messages to send
back: heartbeat responses (the state of every task it holds) and dispatch
responses (how an add or remove went). It is transport-agnostic: the caller
moves the messages.

Fencing (see `messages`): a message stamped with another capture epoch
than ours was meant for another incarnation and is dropped; a message from
an older owner revision is dropped; a newer revision makes that owner ours;
a message whose `seq` is not above the last accepted from the current
owner is a duplicate or overtaken, and is dropped.

A remove is reported STOPPED only after `is_remove_table_span_finished`
says so, i.e. after the executor's writer for the task has really stopped;
until then the agent reports STOPPING, and the owner promotes no one.

Deviations from TiCDC: the epoch is the capture's lease incarnation, which
the owner knows from the lease, so every message is fenced by it (TiCDC
answers heartbeats of any epoch to let the owner learn a random epoch that
it regenerates when a new owner appears); the barrier from
the last heartbeat is kept in `barrier` for the worker to read (TiCDC
returns it from Tick); a remove request supersedes an unfinished add (TiCDC
drops the remove until the add is done, and the owner has to ask again).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from coordinator_lib.scheduler.messages import (
    AddTableRequest,
    AddTableResponse,
    Barrier,
    CaptureId,
    Checkpoint,
    DispatchTableRequest,
    DispatchTableResponse,
    Heartbeat,
    HeartbeatResponse,
    Liveness,
    Message,
    RemoveTableRequest,
    RemoveTableResponse,
    Span,
    TableState,
    TableStatus,
    stamp,
)

log = logging.getLogger(__name__)


class TableExecutor(Protocol):
    """What a capture runs tasks on (TiCDC's TableExecutor, "an abstraction
    for Processor"). In a worker it drives dataflows: prepare hydrates one
    from persist at the checkpoint without writing; commit starts
    maintaining it (writes still go through compare_and_append)."""

    def add_table_span(self, span: Span, checkpoint: Checkpoint, is_prepare: bool) -> bool:
        """Start adding `span` at `checkpoint`: `is_prepare` is the first phase
        of the two-phase protocol (prepare), otherwise the second (commit).
        False if it could not start now (the agent retries)."""
        ...

    def is_add_table_span_finished(self, span: Span, is_prepare: bool) -> bool:
        """Whether `span` reached the state the add asked for."""
        ...

    def remove_table_span(self, span: Span) -> bool:
        """Start stopping `span`; True once stopping is under way (or done)."""
        ...

    def is_remove_table_span_finished(self, span: Span) -> tuple[int, bool]:
        """(checkpoint_ts, True) once `span` has fully stopped (its writer
        too) and was released; (_, False) before."""
        ...

    def get_table_span_status(self, span: Span, collect_stat: bool) -> TableStatus:
        """The state and checkpoint of `span` (ABSENT if not held)."""
        ...


@dataclass(slots=True)
class _DispatchTableTask:
    span: Span
    checkpoint: Checkpoint
    is_remove: bool
    is_prepare: bool
    epoch: int
    processed: bool = False
    """For a commit of a prepared table: add_table_span already accepted."""


def _add_response(status: TableStatus) -> DispatchTableResponse:
    return DispatchTableResponse(response=AddTableResponse(status, status.checkpoint))


def _remove_response(status: TableStatus) -> DispatchTableResponse:
    return DispatchTableResponse(response=RemoveTableResponse(status, status.checkpoint))


class _Table:
    """One task's state machine on this capture (TiCDC agent's `tableSpan`)."""

    __slots__ = ("executor", "span", "state", "task")

    def __init__(self, span: Span, executor: TableExecutor) -> None:
        self.span = span
        self.executor = executor
        self.state = TableState.ABSENT
        self.task: _DispatchTableTask | None = None

    def refresh_state(self) -> tuple[TableState, bool]:
        """The executor's state for this task, and whether it changed."""
        old = self.state
        self.state = self.executor.get_table_span_status(self.span, False).state
        return self.state, self.state != old

    def status(self, collect_stat: bool = False) -> TableStatus:
        return self.executor.get_table_span_status(self.span, collect_stat)

    def inject_task(self, task: _DispatchTableTask) -> None:
        if self.task is None or (task.is_remove and not self.task.is_remove):
            # (Deviation: a remove supersedes an unfinished add; the owner
            # sent it later, so it is the owner's latest wish.)
            self.task = task
        else:
            log.debug("%s: task %s ignored, %s not finished", self.span, task, self.task)

    def poll(self) -> DispatchTableResponse | None:
        if self.task is None:
            return None
        if self.task.is_remove:
            return self._handle_remove_task()
        return self._handle_add_task()

    def _handle_remove_task(self) -> DispatchTableResponse | None:
        assert self.task is not None
        state, _ = self.refresh_state()
        changed = True
        while changed:
            if state == TableState.ABSENT:
                self.task = None
                return _remove_response(self.status())
            if state in (TableState.STOPPING, TableState.STOPPED):
                checkpoint_ts, done = self.executor.is_remove_table_span_finished(self.span)
                status = self.status()
                if not done:
                    return _remove_response(dataclasses.replace(status, state=TableState.STOPPING))
                self.task = None
                checkpoint = Checkpoint(checkpoint_ts, status.checkpoint.resolved_ts)
                stopped = TableStatus(self.span, TableState.STOPPED, checkpoint)
                return _remove_response(stopped)
            # PREPARING, PREPARED, REPLICATING
            if not self.executor.remove_table_span(self.span):
                status = self.status()
                return _remove_response(dataclasses.replace(status, state=TableState.STOPPING))
            state, changed = self.refresh_state()
        return None

    def _handle_add_task(self) -> DispatchTableResponse | None:
        task = self.task
        assert task is not None
        state, _ = self.refresh_state()
        changed = True
        while changed:
            if state == TableState.ABSENT:
                if not self.executor.add_table_span(self.span, task.checkpoint, task.is_prepare):
                    return _add_response(self.status())
                state, changed = self.refresh_state()
            elif state == TableState.REPLICATING:
                self.task = None
                return _add_response(self.status())
            elif state == TableState.PREPARED:
                if task.is_prepare:
                    # PREPARED is stable when the task was to prepare.
                    self.task = None
                    return _add_response(self.status())
                if not task.processed:
                    if not self.executor.add_table_span(self.span, task.checkpoint, False):
                        return _add_response(self.status())
                    task.processed = True
                if not self.executor.is_add_table_span_finished(self.span, False):
                    return _add_response(self.status())
                state, changed = self.refresh_state()
            elif state == TableState.PREPARING:
                # Not worth reporting: it may last long.
                if not self.executor.is_add_table_span_finished(self.span, task.is_prepare):
                    return None
                state, changed = self.refresh_state()
            else:  # STOPPING, STOPPED: the add comes too late
                self.task = None
                return _add_response(self.status())
        return None


class Agent:
    """One capture's end of the scheduler; not thread-safe (TiCDC's neither)."""

    def __init__(
        self,
        capture_id: CaptureId,
        epoch: int,
        executor: TableExecutor,
        *,
        owner_id: str = "",
        owner_revision: int = 0,
    ) -> None:
        self.capture_id = capture_id
        self.epoch = epoch
        self.executor = executor
        self.owner_id = owner_id
        self.owner_revision = owner_revision
        self.liveness = Liveness.ALIVE
        self.barrier: Barrier | None = None
        self.tables: dict[Span, _Table] = {}
        self._last_owner_seq = 0
        self._seq = 0

    def tick(self, inbound: Iterable[Message]) -> list[Message]:
        """Handle the owner's messages, poll tasks, return what to send."""
        outbound: list[Message] = []
        for message in inbound:
            if not self._accept(message):
                continue
            if isinstance(message, Heartbeat):
                outbound.append(self._handle_heartbeat(message))
            elif isinstance(message, DispatchTableRequest):
                self._handle_dispatch(message)
            else:
                log.warning("%s: unexpected message %r", self.capture_id, message)
        outbound.extend(self._poll_tables())
        if not self.owner_id:
            return []
        return [self._stamp(m) for m in outbound]

    def _accept(self, message: Message) -> bool:
        """Fence by capture epoch, owner revision, then sequence number."""
        if message.capture_epoch != self.epoch:
            return False  # meant for another incarnation of this capture
        revision = message.owner_revision
        if revision < self.owner_revision:
            return False
        if revision > self.owner_revision:
            log.info("%s: new owner %s at revision %d", self.capture_id, message.sender, revision)
            self.owner_revision = revision
            self.owner_id = message.sender
            self._last_owner_seq = 0
        elif message.sender != self.owner_id:
            # Two owners with one revision: the election is broken. Drop.
            log.error("%s: %s claims revision %d of %s", self.capture_id, message.sender,
                      revision, self.owner_id)  # fmt: skip
            return False
        if message.seq <= self._last_owner_seq:
            return False
        self._last_owner_seq = message.seq
        return True

    def _stamp(self, message: Message) -> Message:
        self._seq += 1
        return stamp(
            message,
            sender=self.capture_id,
            to=self.owner_id,
            owner_revision=self.owner_revision,
            capture_epoch=self.epoch,
            seq=self._seq,
        )

    def _handle_heartbeat(self, heartbeat: Heartbeat) -> HeartbeatResponse:
        statuses = []
        for table in self.tables.values():
            status = table.status(heartbeat.collect_stats)
            if table.task is not None and table.task.is_remove:
                status = dataclasses.replace(status, state=TableState.STOPPING)
            statuses.append(status)
        for span in heartbeat.spans:
            if span not in self.tables:
                statuses.append(self.executor.get_table_span_status(span, heartbeat.collect_stats))
        if heartbeat.is_stopping and self.liveness != Liveness.STOPPING:
            log.info("%s: asked to stop, draining", self.capture_id)
            self.liveness = Liveness.STOPPING
        self.barrier = heartbeat.barrier
        return HeartbeatResponse(tables=tuple(statuses), liveness=self.liveness)

    def _handle_dispatch(self, message: DispatchTableRequest) -> None:
        request = message.request
        if isinstance(request, AddTableRequest):
            task = _DispatchTableTask(
                request.span, request.checkpoint, False, request.is_secondary, self.epoch
            )
            table = self.tables.get(request.span)
            if table is None:
                table = self.tables[request.span] = _Table(request.span, self.executor)
        elif isinstance(request, RemoveTableRequest):
            table = self.tables.get(request.span)
            if table is None:
                log.debug("%s: remove of unknown %s ignored", self.capture_id, request.span)
                return
            task = _DispatchTableTask(request.span, Checkpoint(), True, False, self.epoch)
        else:
            return
        table.inject_task(task)

    def _poll_tables(self) -> list[DispatchTableResponse]:
        responses = []
        for span, table in list(self.tables.items()):
            response = table.poll()
            state, _ = table.refresh_state()
            if state == TableState.ABSENT:
                # Also drops a refused add: the owner re-sends it if still wanted.
                del self.tables[span]
            if response is not None:
                responses.append(response)
        return responses
