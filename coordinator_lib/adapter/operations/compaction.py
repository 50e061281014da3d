"""The compaction sensor's pass: the one the server runs
(`compaction_pass`), no Spark, no dataflow steps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from coordinator_lib.adapter.coordinator import Coordinator, compaction_pass
from coordinator_lib.adapter.operations.frontiers import (
    Frontiers,
    user_collections,
)
from coordinator_lib.repr.global_id import GlobalId


@dataclass(frozen=True)
class CompactionReport:
    compacted_batches: int
    collected_blobs: int
    finalized_shards: int
    frontiers: Mapping[GlobalId, Frontiers]


def compact(coordinator: Coordinator) -> CompactionReport:
    """The compaction pass the server runs (`compaction_pass`): read policies
    (applied when the coordinator reconciled) move each since, shards are
    compacted, garbage is collected. No Spark, no dataflow steps."""
    coordinator.refresh_catalog()
    report = compaction_pass(coordinator.storage)
    frontiers = {}
    for id in user_collections(coordinator):
        since, upper = coordinator.storage.collection_frontiers(id)
        frontiers[id] = Frontiers(since.time, upper.time)
    return CompactionReport(
        report.compacted_batches, report.collected_blobs, report.finalized_shards, frontiers
    )
