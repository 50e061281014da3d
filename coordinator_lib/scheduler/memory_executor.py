"""An in-memory `TableExecutor` over fake dataflows, for tests, the
deterministic simulation and the benchmark.

State changes take a configurable number of `advance()` calls (ticks):
prepare (ABSENT -> PREPARING -> PREPARED), commit (PREPARED -> REPLICATING)
and stop (-> STOPPING -> STOPPED). Zero delays make every step synchronous.
A `TaskWriter`, if given, stands for the dataflow's output: it is started
when a task starts replicating, asked to write on every tick while the task
replicates or is still stopping (an old writer may flush until it has
really stopped), and stopped before the task is reported STOPPED.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from coordinator_lib.scheduler.lease import Clock
from coordinator_lib.scheduler.messages import Checkpoint, Span, TableState, TableStatus

Delay = int | Callable[[Span], int]


class TaskWriter(Protocol):
    """The output side of a running dataflow (compare_and_append in a worker)."""

    def start(self, span: Span, checkpoint: Checkpoint) -> object:
        """A new writer session for `span`, resuming from `checkpoint`."""
        ...

    def write(self, session: object) -> Checkpoint | None:
        """Try to land the next batch; the progress now durable, or None if
        this session was fenced (its writes can never land again)."""
        ...

    def stop(self, session: object) -> None:
        """The session writes nothing after this returns."""
        ...


class ClockWriter:
    """A `TaskWriter` whose every write lands: a task's progress is the clock
    (the benchmark and the scheduler tests, where only scheduling matters)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def start(self, span: Span, checkpoint: Checkpoint) -> object:
        return span

    def write(self, session: object) -> Checkpoint:
        now = self.clock.now_ms()
        return Checkpoint(now, now)

    def stop(self, session: object) -> None:
        pass


@dataclass(slots=True)
class _FakeTable:
    state: TableState
    checkpoint: Checkpoint
    target: TableState | None = None
    remaining: int = 0
    committing: bool = False
    session: object | None = None


class InMemoryTableExecutor:
    """Fake dataflows with delays; see the module docstring."""

    def __init__(
        self,
        *,
        prepare_ticks: Delay = 0,
        commit_ticks: Delay = 0,
        stop_ticks: Delay = 0,
        refuse: Callable[[Span], bool] | None = None,
        writer: TaskWriter | None = None,
    ) -> None:
        self.prepare_ticks = prepare_ticks
        self.commit_ticks = commit_ticks
        self.stop_ticks = stop_ticks
        self.refuse = refuse
        self.writer = writer
        self.tables: dict[Span, _FakeTable] = {}
        self.calls: list[tuple[str, Span]] = []
        """Every TableExecutor call that changes something, for tests."""

    def _delay(self, delay: Delay, span: Span) -> int:
        return delay(span) if callable(delay) else delay

    def _begin(self, span: Span, table: _FakeTable, target: TableState, ticks: int) -> None:
        table.target = target
        table.remaining = ticks
        if ticks <= 0:
            self._complete(span, table)

    def _complete(self, span: Span, table: _FakeTable) -> None:
        target, table.target, table.remaining = table.target, None, 0
        if target == TableState.REPLICATING:
            table.committing = False
            if self.writer is not None:
                table.session = self.writer.start(span, table.checkpoint)
        elif target == TableState.STOPPED and table.session is not None:
            assert self.writer is not None
            self.writer.stop(table.session)
            table.session = None
        assert target is not None
        table.state = target

    # -- TableExecutor -------------------------------------------------------

    def add_table_span(self, span: Span, checkpoint: Checkpoint, is_prepare: bool) -> bool:
        if self.refuse is not None and self.refuse(span):
            return False
        table = self.tables.get(span)
        if table is None:
            self.calls.append(("prepare" if is_prepare else "add", span))
            table = self.tables[span] = _FakeTable(TableState.PREPARING, checkpoint)
            ticks = self._delay(self.prepare_ticks, span)
            if is_prepare:
                self._begin(span, table, TableState.PREPARED, ticks)
            else:
                ticks += self._delay(self.commit_ticks, span)
                self._begin(span, table, TableState.REPLICATING, ticks)
        elif table.state == TableState.PREPARED and not is_prepare and not table.committing:
            self.calls.append(("commit", span))
            table.committing = True
            self._begin(span, table, TableState.REPLICATING, self._delay(self.commit_ticks, span))
        return True

    def is_add_table_span_finished(self, span: Span, is_prepare: bool) -> bool:
        table = self.tables.get(span)
        if table is None:
            return False
        return table.state == TableState.REPLICATING or (
            is_prepare and table.state == TableState.PREPARED
        )

    def remove_table_span(self, span: Span) -> bool:
        table = self.tables.get(span)
        if table is not None and table.state in (
            TableState.PREPARING,
            TableState.PREPARED,
            TableState.REPLICATING,
        ):
            self.calls.append(("remove", span))
            table.state = TableState.STOPPING
            table.committing = False
            self._begin(span, table, TableState.STOPPED, self._delay(self.stop_ticks, span))
        return True

    def is_remove_table_span_finished(self, span: Span) -> tuple[int, bool]:
        table = self.tables.get(span)
        if table is None:
            return 0, True
        if table.state != TableState.STOPPED:
            return table.checkpoint.checkpoint_ts, False
        del self.tables[span]
        self.calls.append(("released", span))
        return table.checkpoint.checkpoint_ts, True

    def get_table_span_status(self, span: Span, collect_stat: bool) -> TableStatus:
        table = self.tables.get(span)
        if table is None:
            return TableStatus(span, TableState.ABSENT)
        return TableStatus(span, table.state, table.checkpoint)

    # -- driving -------------------------------------------------------------

    def advance(self) -> None:
        """One tick: pending state changes count down, writers write."""
        for span, table in self.tables.items():
            if table.remaining > 0:
                table.remaining -= 1
                if table.remaining == 0:
                    self._complete(span, table)
            if table.session is not None:
                assert self.writer is not None
                progress = self.writer.write(table.session)
                if progress is not None:
                    self.set_checkpoint(span, progress)

    def set_checkpoint(self, span: Span, checkpoint: Checkpoint) -> None:
        """Record progress (never backwards)."""
        table = self.tables[span]
        table.checkpoint = Checkpoint(
            max(table.checkpoint.checkpoint_ts, checkpoint.checkpoint_ts),
            max(table.checkpoint.resolved_ts, checkpoint.resolved_ts),
        )

    def state_of(self, span: Span) -> TableState:
        table = self.tables.get(span)
        return TableState.ABSENT if table is None else table.state

    def close(self) -> None:
        """The process is going away: every writer stops."""
        for table in self.tables.values():
            if table.session is not None and self.writer is not None:
                self.writer.stop(table.session)
                table.session = None
        self.tables.clear()
