"""`StorageExecutor`, the TableExecutor of a worker's ingestions and sinks,
over tasks that record what was done to them: prepare starts nothing,
commit starts the task once, remove stops it before the task reads as
removed, the checkpoint is the task's durable upper (never below the
owner's); `RoutedExecutor` sends a task it cannot place yet to the views."""

from __future__ import annotations

from coordinator_lib.scheduler.dataflow_executor import TaskUnavailable
from coordinator_lib.scheduler.messages import Checkpoint, TableState, TableStatus
from coordinator_lib.scheduler.storage_executor import RoutedExecutor, StorageExecutor


class Task:
    def __init__(self) -> None:
        self.started = self.stopped = 0
        self.durable: int | None = None

    def start(self) -> None:
        self.started += 1

    def stop(self) -> None:
        self.stopped += 1

    def upper(self) -> int | None:
        return self.durable


def test_prepare_commit_remove_and_checkpoints() -> None:
    tasks: dict[str, Task] = {}

    def describe(span: str) -> Task:
        if span == "u9":
            raise TaskUnavailable("not in the catalog yet")
        return tasks.setdefault(span, Task())

    executor = StorageExecutor(describe)
    assert not executor.add_table_span("u9", Checkpoint(5, 5), is_prepare=True)
    assert executor.add_table_span("u1", Checkpoint(5, 5), is_prepare=True)
    task = tasks["u1"]
    assert task.started == 0 and executor.is_add_table_span_finished("u1", is_prepare=True)
    assert executor.get_table_span_status("u1", False) == TableStatus(
        "u1", TableState.PREPARED, Checkpoint(5, 5)
    )
    task.durable = 3  # below the owner's checkpoint: reported from the owner's
    assert executor.get_table_span_status("u1", False).checkpoint == Checkpoint(5, 5)
    executor.add_table_span("u1", Checkpoint(5, 5), is_prepare=False)
    executor.add_table_span("u1", Checkpoint(5, 5), is_prepare=False)
    assert task.started == 1 and executor.is_add_table_span_finished("u1", is_prepare=False)
    task.durable = 12
    assert executor.get_table_span_status("u1", False) == TableStatus(
        "u1", TableState.REPLICATING, Checkpoint(12, 12)
    )
    assert executor.remove_table_span("u1")
    assert task.stopped == 1
    assert executor.is_remove_table_span_finished("u1") == (12, True)
    assert executor.get_table_span_status("u1", False).state == TableState.ABSENT

    executor.add_table_span("u2", Checkpoint(), is_prepare=False)
    executor.close()  # the incarnation ends: every running task stops
    assert tasks["u2"].started == tasks["u2"].stopped == 1


class Views:
    def __init__(self) -> None:
        self.added: list[str] = []

    def add_table_span(self, span: str, checkpoint: Checkpoint, is_prepare: bool) -> bool:
        self.added.append(span)
        return False

    def advance(self, budget_s: float = 0.2) -> int:
        return 0


def test_routing_sends_what_it_cannot_place_to_the_views() -> None:
    views = Views()
    storage = StorageExecutor(lambda span: Task())

    def is_storage(span: str) -> bool:
        if span == "u3":
            raise TaskUnavailable("not in the catalog yet")
        return span == "u1"

    routed = RoutedExecutor(views, storage, is_storage)  # type: ignore[arg-type]
    assert routed.add_table_span("u1", Checkpoint(), is_prepare=True)
    assert not routed.add_table_span("u2", Checkpoint(), is_prepare=True)
    assert not routed.add_table_span("u3", Checkpoint(), is_prepare=True)
    assert views.added == ["u2", "u3"]
    assert set(storage.tasks) == {"u1"}
