"""Reading a collection's contents and changes at its latest readable
time, each read under a read hold so compaction cannot pass it meanwhile."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from coordinator_lib.adapter.coordinator import Coordinator
from coordinator_lib.adapter.errors import AdapterError
from coordinator_lib.adapter.operations.frontiers import (
    Frontiers,
    observe,
)
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.update import Row
from coordinator_lib.storage import StorageError


@contextlib.contextmanager
def held(coordinator: Coordinator, ids: Sequence[GlobalId], at: int) -> Iterator[None]:
    holds = coordinator.hold(set(ids), at)
    try:
        yield
    finally:
        for hold in holds:
            hold.release()


def changes(
    coordinator: Coordinator, id: GlobalId, lower: int | None, upper: int | None
) -> tuple[int, int, int]:
    """(inserted, retracted, updates) of collection `id` in [lower, upper):
    the contents at `upper - 1` when `lower` is None, and from its since when
    compaction has already passed `lower`."""
    since = coordinator.storage.collection_frontiers(id)[0].time
    if upper is None or since is None or upper <= since:
        return 0, 0, 0
    if lower is None:
        rows = contents(coordinator, id, Frontiers(since, upper)) or []
        inserted = sum(d for _, d in rows if d > 0)
        return inserted, -sum(d for _, d in rows if d < 0), len(rows)
    lower = max(lower, since)
    if lower >= upper:
        return 0, 0, 0
    with held(coordinator, [id], lower):
        updates = coordinator.storage.shard(id).updates_between(lower, Frontier.at(upper))
    inserted = sum(u.diff for u in updates if u.diff > 0)
    return inserted, -sum(u.diff for u in updates if u.diff < 0), len(updates)


def total_rows(coordinator: Coordinator, id: GlobalId, frontiers: Frontiers) -> int:
    """Rows (with multiplicity) of collection `id` at `upper - 1`."""
    rows = contents(coordinator, id, frontiers)
    return 0 if rows is None else sum(d for _, d in rows)


def contents(
    coordinator: Coordinator, id: GlobalId, frontiers: Frontiers | None = None
) -> list[tuple[Row, int]] | None:
    """The consolidated contents of collection `id` at its latest readable
    time (`upper - 1`), read under a hold; None if nothing is readable."""
    for _ in range(5):
        frontiers = frontiers or observe(coordinator, id)
        if frontiers is None or frontiers.upper is None or frontiers.since is None:
            return None
        at = frontiers.upper - 1
        if at < frontiers.since:
            return None
        try:
            with held(coordinator, [id], at):
                return coordinator.storage.snapshot(id, at)
        except (StorageError, AdapterError):  # compacted past `at` meanwhile: look again
            frontiers = None
    raise StorageError(f"could not read {id}: its since kept moving")
