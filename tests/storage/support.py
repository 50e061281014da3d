"""Helpers shared by the storage controller suites: the test schema, an
environment handle that opens controllers on the parametrized consensus
backend, model answers and looks at durable state below the controller."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator_lib.persist.machine import Machine
from coordinator_lib.persist.state import ShardState
from coordinator_lib.repr import Frontier, GlobalId, RelationDesc, Row, Update
from coordinator_lib.repr.update import consolidate_rows, row_sort_key
from coordinator_lib.storage import (
    CollectionDescription,
    DataSource,
    IngestionDescription,
    StorageController,
    StorageParameters,
    table_description,
)

# `k` NOT NULL bigint, `v` nullable text.
DESC = RelationDesc.of(("k", "bigint", False), ("v", "text"))
COUNTER_DESC = RelationDesc.of(("counter", "bigint", False))
START_MS = 1_700_000_000_000
TICK_MS = 1_000


@dataclass
class Env:
    """One environment (consensus + blob root); every controller opened
    through it is closed when the test ends."""

    consensus_url: str
    blob_root: Path
    opened: list[StorageController] = field(default_factory=list)

    def open(self, parameters: StorageParameters | None = None) -> StorageController:
        controller = StorageController.open(
            consensus_url=self.consensus_url, blob_root=str(self.blob_root), parameters=parameters
        )
        self.opened.append(controller)
        return controller

    def close_all(self) -> None:
        for controller in self.opened:
            controller.close()


def uid(n: int) -> GlobalId:
    return GlobalId.user(n)


def create_table(
    controller: StorageController, id: GlobalId, since: int | None = None
) -> CollectionDescription:
    """Create a table `id` with DESC; returns its description."""
    description = table_description(DESC, since)
    controller.create_collections([(id, description)])
    return description


def counter_description(
    start_ms: int = START_MS, instance_id: str | None = None, **options: object
) -> CollectionDescription:
    """A COUNTER load generator collection ticking every TICK_MS from start_ms."""
    ingestion = IngestionDescription(
        "counter",
        "counter",
        start_ms,
        TICK_MS,
        tuple(options.items()),
        instance_id,
    )
    return CollectionDescription(COUNTER_DESC, DataSource.ingestion_of(ingestion))


def rows(*pairs: tuple[int, str | None], time: int, diff: int = 1) -> list[Update]:
    """Updates inserting (or with diff -1 retracting) rows (k, v) at `time`."""
    return [Update(pair, time, diff) for pair in pairs]


def model_snapshot(updates: Iterable[Update], as_of: int) -> list[tuple[Row, int]]:
    """The consolidated contents at `as_of` of a plain list of updates."""
    return consolidate_rows((u.row, u.diff) for u in updates if u.time <= as_of)


def canonical(pairs: Iterable[tuple[Row, int]]) -> list[tuple[Row, int]]:
    """Sort (row, diff) pairs without merging them, so an unconsolidated
    answer (a duplicate row or a zero diff) still differs from the model."""
    return sorted(((tuple(r), d) for r, d in pairs), key=lambda rd: (row_sort_key(rd[0]), rd[1]))


def shard_state(controller: StorageController, shard_id: str) -> ShardState:
    """The durable state record of a shard, read straight from consensus."""
    state = Machine(controller.persist.consensus, shard_id).fetch()
    assert state is not None, f"shard {shard_id} has no state"
    return state


def blob_batches(blob_root: Path, shard_id: str) -> list[str]:
    """The batch directories a shard has in blob storage."""
    base = blob_root / shard_id
    return sorted(p.name for p in base.iterdir()) if base.exists() else []


def fingerprint(controller: StorageController, id: GlobalId, blob_root: Path) -> tuple:
    """Everything an append could have changed: frontiers, contents at the
    last readable time, stored rows/batches and the blob directories."""
    since, upper = controller.collection_frontiers(id)
    contents = None
    if upper.time is not None and upper.time > 0 and since.less_equal(upper.time - 1):
        contents = canonical(controller.snapshot(id, upper.time - 1))
    stats = controller.collection_statistics(id)
    shard_id = controller.collection(id).shard_id
    return since, upper, contents, stats, blob_batches(blob_root, shard_id)


def frontier(t: int | None) -> Frontier:
    return Frontier(t)


@dataclass
class Holder:
    """Another OS process holding a read hold on a collection of `env`."""

    process: Any
    ready: Any
    release_event: Any
    time: int

    def release(self) -> None:
        """Ask the process to release its hold; wait until it has."""
        self.release_event.set()
        assert self.ready.get(timeout=60) == "released"
        self.process.join(30)
        assert self.process.exitcode == 0

    def kill(self) -> None:
        """SIGKILL: the hold is neither released nor heart-beaten any more."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.join(30)


def start_holder(env: Env, id: GlobalId, at: int | None, lease_ms: int) -> Holder:
    """Spawn a process that opens `env` and holds `id` at `at` (its since if
    None) with a reader lease of `lease_ms`; returns once the hold is taken."""
    from tests.storage.workers import hold_worker

    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Queue(), ctx.Event()
    args = (env.consensus_url, str(env.blob_root), id.value, at, lease_ms, ready, release)
    process = ctx.Process(target=hold_worker, args=args, daemon=True)
    process.start()
    try:
        held = ready.get(timeout=120)
    except BaseException:
        process.kill()
        raise
    return Holder(process, ready, release, held)


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.05) -> bool:
    """Poll `condition` until it holds or `timeout_s` passes; its last value."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval_s)
