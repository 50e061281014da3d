"""Timestamp assignment: sealing tables, webhook sources and load
generators at a time, so views can step to it. Only writes: nothing here
steps a dataflow or starts Spark, so a sensor tick may run it.

Tables and webhook sources are written only by group commit
(`adapter/group_commit.py`): a seal of one is an empty group commit, which
takes its time from the timestamp oracle and moves every table together,
so no table's upper ever runs ahead of the oracle (a later INSERT would
then have no time to land at).
"""

from __future__ import annotations

from coordinator_lib.adapter.coordinator import Coordinator
from coordinator_lib.adapter.operations.frontiers import (
    Frontiers,
    user_collections,
)
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.storage import StorageError
from coordinator_lib.storage.collection import DataSourceKind
from coordinator_lib.storage.ingestion import generator_for, ingestion_step


def writer_kind(coordinator: Coordinator, id: GlobalId) -> DataSourceKind | None:
    """Who writes collection `id` (None: it has no collection of its own)."""
    try:
        return coordinator.storage.collection(id).description.data_source.kind
    except StorageError:
        return None


def _ingest(coordinator: Coordinator, id: GlobalId, now_ms: int) -> None:
    """Run a load generator's ticks due by `now_ms` into its collection."""
    storage = coordinator.storage
    ingestion = storage.collection(id).description.data_source.ingestion
    assert ingestion is not None
    upper = ingestion_step(storage.shard(id), generator_for(ingestion), ingestion, now_ms)
    storage.update_write_frontiers([(id, upper)])


def seal_timestamp(coordinator: Coordinator) -> int:
    """A fresh timestamp every table is sealed at: one empty group commit
    (tables are at `ts + 1` after it, and `ts` is readable)."""
    return coordinator.group_commit.advance()


def seal(coordinator: Coordinator, id: GlobalId, timestamp: int) -> None:
    """Close `id` (a table, webhook or load generator collection) for every
    time up to `timestamp`, a time the oracle handed out (`seal_timestamp`):
    its upper becomes at least `timestamp + 1`. A table or webhook source
    still behind it gets an empty group commit at a fresh oracle time."""
    kind = writer_kind(coordinator, id)
    if kind is DataSourceKind.INGESTION:
        _ingest(coordinator, id, timestamp)
    elif kind in (DataSourceKind.TABLE, DataSourceKind.WEBHOOK):
        _, upper = coordinator.storage.collection_frontiers(id)
        if upper.time is not None and upper.time <= timestamp:
            coordinator.group_commit.advance()


def assign_timestamps(coordinator: Coordinator) -> dict[GlobalId, Frontiers]:
    """The timestamp-assignment pass: seal every table, webhook source and
    load generator at a fresh timestamp. Only writes; never steps a dataflow
    or starts Spark. Returns every user collection's frontiers afterwards."""
    coordinator.refresh_catalog()
    timestamp = seal_timestamp(coordinator)
    for id in user_collections(coordinator):
        seal(coordinator, id, timestamp)
    out = {}
    for id in user_collections(coordinator):
        since, upper = coordinator.storage.collection_frontiers(id)
        out[id] = Frontiers(since.time, upper.time)
    return out
