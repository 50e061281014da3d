"""Observing collections without touching them: frontiers read from
durable state, where updates are from batch metadata (no data read), and
whether a server maintains the environment. Safe in a sensor tick."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from coordinator_lib.adapter.coordinator import Coordinator
from coordinator_lib.adapter.maintainer import Maintainer, current_maintainer
from coordinator_lib.adapter.oracle import wall_clock_ms
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.storage import StorageError


@dataclass(frozen=True)
class Frontiers:
    """A collection's or index's (since, upper); None is the empty frontier."""

    since: int | None
    upper: int | None

    def lag_ms(self, now_ms: int | None = None) -> int:
        """How far the upper is behind the wall clock (0 once closed)."""
        if self.upper is None:
            return 0
        return max(0, (wall_clock_ms() if now_ms is None else now_ms) - self.upper)


def maintainer(coordinator: Coordinator) -> Maintainer | None:
    """The server maintaining this environment's views, if one is live
    (adapter/maintainer.py): Dagster then observes its steps, runs none."""
    return current_maintainer(coordinator.storage.persist.consensus)


def observe(coordinator: Coordinator, id: GlobalId) -> Frontiers | None:
    """Current frontiers, read from durable state; never steps anything.
    A source holding its rows in subsources reports their least frontiers."""
    found = coordinator.frontiers_of(id)
    if found is not None:
        return Frontiers(found[0].time, found[1].time)
    parts = [observe(coordinator, sub.id) for sub in coordinator.catalog.dependents(id)]
    present = [p for p in parts if p is not None]
    if not present:
        return None
    since = Frontier.empty()
    upper = Frontier.empty()
    for p in present:
        since = since.meet(Frontier(p.since))
        upper = upper.meet(Frontier(p.upper))
    return Frontiers(since.time, upper.time)


@dataclass(frozen=True)
class UpdateSpan:
    """One batch of a collection's updates, as its shard state describes it:
    `updates` records at times in [lower, upper) (upper None: no end)."""

    lower: int
    upper: int | None
    updates: int


def update_spans(coordinator: Coordinator, id: GlobalId) -> tuple[UpdateSpan, ...]:
    """Where collection `id`'s updates are, from its shard state's batch
    metadata alone: no batch is read, no Spark. Empty appends (a seal, an
    idle group commit) write no batch, so they leave no span. Empty for an
    object without a collection of its own (a source whose rows live in
    subsources, an index)."""
    try:
        state = coordinator.storage.shard(id).state()
    except StorageError:
        return ()
    return tuple(UpdateSpan(b.lower, b.upper, b.rows) for b in state.batches if b.rows > 0)


def updates_in(spans: Iterable[UpdateSpan], lower: int | None, upper: int | None = None) -> int:
    """At most how many update records lie at times in [lower, upper) (None:
    no bound), counting every span that meets the range whole: 0 means
    certainly none. Exact when the range starts and ends on span boundaries
    (a collection's upper always is one, until compaction merges batches)."""
    count = 0
    for span in spans:
        ends_after = lower is None or span.upper is None or span.upper > lower
        starts_before = upper is None or span.lower < upper
        if ends_after and starts_before:
            count += span.updates
    return count


def user_collections(coordinator: Coordinator) -> list[GlobalId]:
    return sorted(id for id, _ in coordinator.storage.collections() if id.kind == "u")
