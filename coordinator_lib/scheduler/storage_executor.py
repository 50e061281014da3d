"""The `TableExecutor` of a worker's storage tasks: source ingestions and
sinks, each a thread of its own (TiCDC's tables, whose checkpoint is what
the sink has durably written).

- prepare: build the task from its description (nothing runs, nothing is
  written); its checkpoint is its durable upper already.
- commit: start its thread. The task's own writes decide exactness: an
  ingestion moves its progress record and its data in one compare-and-set
  and resumes from the record; a sink resumes from the upper recorded in
  its table's last commit. So a move (or a new worker after a SIGKILL)
  resumes from the checkpoint: nothing twice, nothing missed.
- remove: stop the thread and wait for it, so STOPPED is reported only when
  this worker writes no more.

A task's checkpoint is its durable upper (`StorageTask.upper()`), never
below the owner's checkpoint it was added at.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from coordinator_lib.scheduler.capture import SteppingExecutor
from coordinator_lib.scheduler.dataflow_executor import TaskUnavailable
from coordinator_lib.scheduler.messages import Checkpoint, Span, TableState, TableStatus

log = logging.getLogger(__name__)


class StorageTask(Protocol):
    def start(self) -> None: ...

    def stop(self) -> None: ...

    def upper(self) -> int | None:
        """The durable upper (everything before it is written); None: unknown yet."""
        ...


@dataclass(slots=True)
class _Entry:
    task: StorageTask
    state: TableState
    checkpoint: Checkpoint


class StorageExecutor:
    """Source ingestions and sinks as scheduler tasks; see the module docstring.

    `describe(span)` builds the (not started) task or raises `TaskUnavailable`."""

    def __init__(self, describe: Callable[[Span], StorageTask]) -> None:
        self.describe = describe
        self.tasks: dict[Span, _Entry] = {}

    def add_table_span(self, span: Span, checkpoint: Checkpoint, is_prepare: bool) -> bool:
        entry = self.tasks.get(span)
        if entry is None:
            try:
                task = self.describe(span)
            except TaskUnavailable as error:
                log.warning("cannot start %s: %s", span, error)
                return False
            entry = self.tasks[span] = _Entry(task, TableState.PREPARED, checkpoint)
        if not is_prepare and entry.state == TableState.PREPARED:
            entry.task.start()
            entry.state = TableState.REPLICATING
            log.info("started %s at %s", span, entry.checkpoint)
        self._refresh(entry)
        return True

    def is_add_table_span_finished(self, span: Span, is_prepare: bool) -> bool:
        entry = self.tasks.get(span)
        if entry is None:
            return False
        return entry.state == TableState.REPLICATING or (
            is_prepare and entry.state == TableState.PREPARED
        )

    def remove_table_span(self, span: Span) -> bool:
        entry = self.tasks.get(span)
        if entry is not None and entry.state in (TableState.PREPARED, TableState.REPLICATING):
            entry.state = TableState.STOPPING
            entry.task.stop()  # joins the thread: nothing of it writes after this
            self._refresh(entry)
            entry.state = TableState.STOPPED
            log.info("stopped %s at %s", span, entry.checkpoint)
        return True

    def is_remove_table_span_finished(self, span: Span) -> tuple[int, bool]:
        entry = self.tasks.get(span)
        if entry is None:
            return 0, True
        if entry.state != TableState.STOPPED:
            return entry.checkpoint.checkpoint_ts, False
        del self.tasks[span]
        return entry.checkpoint.checkpoint_ts, True

    def get_table_span_status(self, span: Span, collect_stat: bool) -> TableStatus:
        entry = self.tasks.get(span)
        if entry is None:
            return TableStatus(span, TableState.ABSENT)
        self._refresh(entry)
        return TableStatus(span, entry.state, entry.checkpoint)

    def advance(self, budget_s: float = 0.2) -> int:
        """The tasks run on their own threads: nothing to step here."""
        return 0

    def _refresh(self, entry: _Entry) -> None:
        try:
            upper = entry.task.upper()
        except Exception as error:  # storage briefly unreadable: keep the last one
            log.debug("no upper: %s", error)
            return
        cp = entry.checkpoint
        if upper is not None and (upper > cp.checkpoint_ts or upper > cp.resolved_ts):
            entry.checkpoint = Checkpoint(max(upper, cp.checkpoint_ts), max(upper, cp.resolved_ts))

    def close(self) -> None:
        """The incarnation is over: every task stops."""
        for entry in self.tasks.values():
            if entry.state in (TableState.PREPARED, TableState.REPLICATING):
                entry.task.stop()
        self.tasks.clear()


class RoutedExecutor:
    """One capture's executor over two kinds of task: `is_storage(span)`
    picks the storage executor, else the views' dataflow executor."""

    def __init__(
        self, views: SteppingExecutor, storage: StorageExecutor, is_storage: Callable[[Span], bool]
    ) -> None:
        self.views = views
        self.storage = storage
        self.is_storage = is_storage
        self._routes: dict[Span, bool] = {}

    def _for(self, span: Span) -> SteppingExecutor:
        route = self._routes.get(span)
        if route is None:
            try:
                route = self._routes[span] = self.is_storage(span)
            except TaskUnavailable:  # not in the catalog here yet: the views'
                return self.views  # executor says so (and the agent retries)
        return self.storage if route else self.views

    def add_table_span(self, span: Span, checkpoint: Checkpoint, is_prepare: bool) -> bool:
        return self._for(span).add_table_span(span, checkpoint, is_prepare)

    def is_add_table_span_finished(self, span: Span, is_prepare: bool) -> bool:
        return self._for(span).is_add_table_span_finished(span, is_prepare)

    def remove_table_span(self, span: Span) -> bool:
        return self._for(span).remove_table_span(span)

    def is_remove_table_span_finished(self, span: Span) -> tuple[int, bool]:
        return self._for(span).is_remove_table_span_finished(span)

    def get_table_span_status(self, span: Span, collect_stat: bool) -> TableStatus:
        return self._for(span).get_table_span_status(span, collect_stat)

    def advance(self, budget_s: float = 0.2) -> int:
        return self.views.advance(budget_s)

    def close(self) -> None:
        self.storage.close()
        self.views.close()
