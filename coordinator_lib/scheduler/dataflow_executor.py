"""The `TableExecutor` of a `tidemark worker`: tasks are materialized views,
run as dataflows on this process's `ComputeController`.

- prepare (`add_table_span(..., is_prepare=True)`): build the dataflow from
  its description (the durable catalog's definition) with `as_of` at the
  view's durable upper - 1, holding its inputs there; nothing is written
  (the dataflow is not stepped). Steps are stateless beyond persist (a view's
  output and any accumulation state are shards), so there is no in-memory
  state to hydrate: a prepared dataflow is ready to step the moment it is
  committed, wherever the previous primary left the output.
- commit (`add_table_span(..., is_prepare=False)`): `advance()` steps it from
  then on. Every step lands with compare_and_append on the output's upper,
  so a stale primary still stepping (a paused old incarnation) cannot write
  anything the CaS does not decide (invariant 9). With a `LeaseFence`
  (scheduler/lease.py) no step starts once the incarnation's lease has
  expired, and a step that loses the CaS makes it check its lease: a stale
  primary stops (the fence is lost, the capture ends the incarnation).
- remove: the dataflow is dropped between steps (`advance` and the agent
  run on one thread), so its writer has really stopped when the task is
  reported STOPPED. This process's leased holds on the inputs are released;
  the view's durable dependency holds (shared by every process that runs
  it) stay where the view is, for whoever runs it next.

A task's checkpoint is the view's durable upper: everything before it is
written (`checkpoint_ts`); steps land whole up to the inputs' upper, so the
same time is also its `resolved_ts`. A view closed for ever (the empty
upper) reports `CHECKPOINT_CLOSED`, so it never pins the watermark. The
owner's checkpoint passed to `add_table_span` is not where the dataflow
starts (TiCDC starts a table's sink there): the view's durable upper is,
which is never below it (the
owner's checkpoint is an upper some capture reported, and uppers never go
back), and starting lower would only recompute times already written (the
CaS would refuse them). It is the floor the task's reported checkpoint
starts from, so a report never goes below what the owner knows; a durable
upper below it is logged as an error (the environment is not the one the
owner saw).

Deviation: prepare does not read the inputs. A prepared dataflow holds
them at its as_of (so they stay readable there) but keeps no state to
hydrate: a step reads what it needs from persist, so reading the inputs at
prepare would only be read again by the first step after commit (for a
large view, one more full Spark scan per move).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from coordinator_lib.compute import ComputeController, DataflowDescription
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.scheduler.lease import LeaseFence
from coordinator_lib.scheduler.messages import (
    CHECKPOINT_CLOSED,
    Checkpoint,
    Span,
    TableState,
    TableStatus,
)

log = logging.getLogger(__name__)

DEFAULT_INSTANCE = "capture"
_ERROR_BACKOFF_S = 1.0


class TaskUnavailable(Exception):
    """The task cannot be built here now (e.g. the catalog or its collection
    is not there yet); the agent retries."""


@dataclass(slots=True)
class _Task:
    span: Span
    id: GlobalId
    state: TableState
    checkpoint: Checkpoint
    retry_at: float = 0.0  # monotonic: after a failed step, not before this
    steps: int = 0
    landed: int = 0


class DataflowExecutor:
    """Materialized views on a ComputeController; see the module docstring.

    `describe(span)` returns the view's DataflowDescription (its storage
    collections registered in the controller's storage) or raises
    `TaskUnavailable`."""

    def __init__(
        self,
        compute: ComputeController,
        describe: Callable[[Span], DataflowDescription],
        *,
        instance: str = DEFAULT_INSTANCE,
        fence: LeaseFence | None = None,
    ) -> None:
        self.compute = compute
        self.describe = describe
        self.instance = instance
        self.fence = fence
        if instance not in compute.instance_ids():
            compute.create_instance(instance)  # no replicas: only `advance` steps
        self.tasks: dict[Span, _Task] = {}
        self._cursor = 0
        self.steps = 0
        self.step_errors = 0
        self.lost_races = 0

    # -- TableExecutor ---------------------------------------------------------

    def add_table_span(self, span: Span, checkpoint: Checkpoint, is_prepare: bool) -> bool:
        task = self.tasks.get(span)
        if task is None:
            try:
                description = self.describe(span)
                self.compute.create_dataflow(self.instance, description)
            except Exception as error:  # the agent retries; the owner may move it
                log.warning("cannot start %s: %s", span, error)
                return False
            state = TableState.PREPARED if is_prepare else TableState.REPLICATING
            task = _Task(span, description.id, state, checkpoint)
            self.tasks[span] = task
            self._refresh_checkpoint(task)
            if description.as_of + 1 < checkpoint.checkpoint_ts < CHECKPOINT_CLOSED:
                log.error(
                    "%s: durable upper %d is below the owner's checkpoint %d",
                    span,
                    description.as_of + 1,
                    checkpoint.checkpoint_ts,
                )
            log.info("%s %s at %s", "prepared" if is_prepare else "started", span, task.checkpoint)
        elif task.state == TableState.PREPARED and not is_prepare:
            task.state = TableState.REPLICATING
            self._refresh_checkpoint(task)
            log.info("committed %s at %s", span, task.checkpoint)
        return True

    def is_add_table_span_finished(self, span: Span, is_prepare: bool) -> bool:
        task = self.tasks.get(span)
        if task is None:
            return False
        return task.state == TableState.REPLICATING or (
            is_prepare and task.state == TableState.PREPARED
        )

    def remove_table_span(self, span: Span) -> bool:
        task = self.tasks.get(span)
        if task is not None and task.state in (
            TableState.PREPARING,
            TableState.PREPARED,
            TableState.REPLICATING,
        ):
            task.state = TableState.STOPPING
            self._refresh_checkpoint(task)
            self._drop(task)
            task.state = TableState.STOPPED
            log.info("stopped %s at %s", span, task.checkpoint)
        return True

    def is_remove_table_span_finished(self, span: Span) -> tuple[int, bool]:
        task = self.tasks.get(span)
        if task is None:
            return 0, True
        if task.state != TableState.STOPPED:
            return task.checkpoint.checkpoint_ts, False
        del self.tasks[span]
        return task.checkpoint.checkpoint_ts, True

    def get_table_span_status(self, span: Span, collect_stat: bool) -> TableStatus:
        task = self.tasks.get(span)
        if task is None:
            return TableStatus(span, TableState.ABSENT)
        return TableStatus(span, task.state, task.checkpoint)

    # -- driving ---------------------------------------------------------------

    def advance(self, budget_s: float = 0.2) -> int:
        """Step replicating dataflows round-robin for about `budget_s`
        (each at most once); refresh prepared ones' checkpoints. Returns
        how many steps ran."""
        tasks = [t for t in self.tasks.values() if t.state == TableState.REPLICATING]
        if tasks and self.fence is not None and not self.fence.may_write():
            return 0  # fenced: the capture ends this incarnation
        if not tasks:
            for task in self.tasks.values():
                if task.state == TableState.PREPARED:
                    self._refresh_checkpoint(task)
            return 0
        started = time.monotonic()
        ran = 0
        for i in range(len(tasks)):
            task = tasks[(self._cursor + i) % len(tasks)]
            if i > 0 and time.monotonic() - started > budget_s:
                self._cursor = (self._cursor + i) % len(tasks)
                break
            if time.monotonic() < task.retry_at:
                continue
            if i > 0 and self.fence is not None and not self.fence.may_write():
                return ran
            landed = self._step(task)
            ran += 1
            if landed is False:
                self.lost_races += 1
                if self.fence is not None and not self.fence.after_lost_race():
                    log.warning("%s: lost the write race and the lease: stopping", task.span)
                    return ran
        else:
            self._cursor = 0
            for task in self.tasks.values():
                if task.state == TableState.PREPARED:
                    self._refresh_checkpoint(task)
        return ran

    def _step(self, task: _Task) -> bool | None:
        """One step; whether it landed (None: nothing to do, or it failed)."""
        try:
            result = self.compute.step_dataflow(task.id)
        except Exception:
            self.step_errors += 1
            task.retry_at = time.monotonic() + _ERROR_BACKOFF_S
            log.exception("step of %s failed", task.span)
            return None
        self.steps += 1
        task.steps += 1
        if result is not None and result.landed:
            task.landed += 1
        self._refresh_checkpoint(task)
        return None if result is None else result.landed

    def _refresh_checkpoint(self, task: _Task) -> None:
        try:
            upper = self.compute.dataflow(self.instance, task.id).write_frontier.time
        except Exception as error:
            log.debug("no upper for %s: %s", task.span, error)
            return
        if upper is None:  # closed for ever: the view holds back no watermark
            upper = CHECKPOINT_CLOSED
        cp = task.checkpoint
        if upper > cp.checkpoint_ts or upper > cp.resolved_ts:
            task.checkpoint = Checkpoint(max(upper, cp.checkpoint_ts), max(upper, cp.resolved_ts))

    def _drop(self, task: _Task) -> None:
        try:
            # Not a drop of the view: its durable input holds stay for the
            # capture that runs it next.
            self.compute.forget_dataflows(self.instance, [task.id])
        except Exception as error:
            log.warning("dropping %s: %s", task.span, error)

    def close(self) -> None:
        """The incarnation is over: every dataflow stops (nothing steps after)."""
        for task in list(self.tasks.values()):
            if task.state not in (TableState.STOPPED, TableState.ABSENT):
                self._drop(task)
        self.tasks.clear()
