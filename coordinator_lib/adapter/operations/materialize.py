"""Materializing one object: a source or table seals at a timestamp
(`timestamps.seal`), a materialized view takes one incremental step to its
inputs' least upper, an index hydrates or catches up its arrangement. Every
write is a compare_and_append; nothing moves a frontier back."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from coordinator_lib.adapter.coordinator import Coordinator
from coordinator_lib.adapter.errors import InvalidTimestamp
from coordinator_lib.adapter.operations.describe import (
    defining_expr,
)
from coordinator_lib.adapter.operations.frontiers import (
    Frontiers,
    observe,
)
from coordinator_lib.adapter.operations.reading import changes, held, total_rows
from coordinator_lib.adapter.operations.timestamps import (
    seal,
    seal_timestamp,
    writer_kind,
)
from coordinator_lib.compute.arranged import StepReads, state_sizes
from coordinator_lib.compute.dataflow import input_upper
from coordinator_lib.compute.explain import explain_view
from coordinator_lib.expr import relation as rel
from coordinator_lib.persist.arrangement_store import ArrangementStats
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.update import Row, Update, consolidate
from coordinator_lib.sql.catalog import CatalogItem, ItemKind
from coordinator_lib.storage import StorageError
from coordinator_lib.storage.collection import DataSourceKind


@dataclass(frozen=True)
class Materialization:
    """What one materialization did. `rows_inserted` / `rows_retracted` are
    the changes (multiplicities) since `previous_upper` (the last recorded
    materialization; the whole contents the first time); `rows_read` counts
    the input updates a view's or index's step consumed; `total_rows` is the
    row count at `upper - 1`."""

    id: GlobalId
    since: int | None
    upper: int | None
    previous_upper: int | None
    lag_ms: int
    rows_inserted: int
    rows_retracted: int
    rows_read: int
    total_rows: int
    seconds: float
    spark_seconds: float
    engine: str  # "local", "spark", "ingestion", "group-commit", "none"
    plan: str
    step_lower: int | None = None
    step_upper: int | None = None
    hydrated: bool = False
    changes_from: int | None = None  # inserted/retracted count from here (compaction)
    updates: int = 0  # update records in [changes_from, upper)
    # What an in-process step read (compute/arranged.py StepReads): its
    # inputs' updates, rows of inputs' old contents, rows of arranged state.
    # None on Spark (which does not count) or without a step.
    reads: StepReads | None = None
    # The view's arranged state after the step (mz_internal.mz_arrangement_sizes
    # summed over its operators); None for an object that keeps none.
    state: ArrangementStats | None = None


def view_state(coordinator: Coordinator, id: GlobalId) -> ArrangementStats:
    """A view's arranged state on this host, all operators together."""
    sizes = state_sizes(coordinator.storage.shard(id)).values()
    return ArrangementStats(
        sum(s.rows for s in sizes), sum(s.updates for s in sizes), sum(s.bytes for s in sizes)
    )


def materialize(
    coordinator: Coordinator,
    id: GlobalId,
    timestamp: int | None = None,
    previous_upper: int | None = None,
    until: int | None = None,
) -> Materialization:
    """Do `id`'s work: seal a source or table at `timestamp` (fresh if None),
    step a materialized view once, hydrate or catch up an index. A view or
    index steps to its inputs' least upper, or to `until` if that is less
    (the upper an orchestrator planned for it)."""
    started = time.perf_counter()
    item = coordinator.catalog.get(id)
    if item.kind is ItemKind.MATERIALIZED_VIEW:
        return _materialize_view(coordinator, item, previous_upper, started, until)
    if item.kind is ItemKind.INDEX:
        return _materialize_index(coordinator, item, started, until)
    if timestamp is None:
        timestamp = seal_timestamp(coordinator)
    parts = [id] if coordinator.frontiers_of(id) is not None else _subsources(coordinator, id)
    inserted = retracted = total = updates = 0
    with _holding_changes(coordinator, parts, previous_upper) as lowers:
        for part in parts:
            seal(coordinator, part, timestamp)
        for part in parts:
            frontiers = observe(coordinator, part)
            assert frontiers is not None
            ins, ret, count = changes(coordinator, part, lowers[part], frontiers.upper)
            inserted, retracted, updates = inserted + ins, retracted + ret, updates + count
            total += total_rows(coordinator, part, frontiers)
    frontiers = observe(coordinator, id)
    assert frontiers is not None
    engine = (
        "ingestion"
        if writer_kind(coordinator, parts[0]) is DataSourceKind.INGESTION
        else ("group-commit")
    )
    return Materialization(
        id,
        frontiers.since,
        frontiers.upper,
        previous_upper,
        frontiers.lag_ms(),
        inserted,
        retracted,
        0,
        total,
        time.perf_counter() - started,
        0.0,
        engine,
        _source_plan(coordinator, item, parts),
        changes_from=_least(lowers.values()),
        updates=updates,
    )


def _least(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


@contextlib.contextmanager
def _holding_changes(
    coordinator: Coordinator, ids: Sequence[GlobalId], previous_upper: int | None
) -> Iterator[dict[GlobalId, int | None]]:
    """Hold each collection at max(previous_upper, its since) while it is
    worked on, so its changes since the last materialization stay readable
    (read policies compact history a second behind the upper by default).
    Yields where each one's changes can be counted from (None: from empty)."""
    storage = coordinator.storage
    holds = []
    lowers: dict[GlobalId, int | None] = {}
    try:
        for id in ids:
            lowers[id] = None
            if previous_upper is None:
                continue
            for _ in range(5):
                since = storage.collection_frontiers(id)[0].time
                at = max(previous_upper, since or 0)
                try:
                    holds.append(storage.acquire_read_hold(id, at))
                except StorageError:
                    continue  # compacted meanwhile: hold at the new since
                lowers[id] = at
                break
        yield lowers
    finally:
        for hold in holds:
            hold.release()


def _subsources(coordinator: Coordinator, id: GlobalId) -> list[GlobalId]:
    return [d.id for d in coordinator.catalog.dependents(id) if d.kind is ItemKind.SOURCE]


def _source_plan(coordinator: Coordinator, item: CatalogItem, parts: list[GlobalId]) -> str:
    if item.kind is ItemKind.TABLE:
        return f"table {item.name}: written by group commit"
    lines = []
    for part in parts:
        source = coordinator.storage.collection(part).description.data_source
        name = coordinator.catalog.get(part).name
        if source.ingestion is not None:
            ingestion = source.ingestion
            lines.append(
                f"load generator {ingestion.generator} output {ingestion.output} -> {name} "
                f"(tick {ingestion.tick_interval_ms} ms)"
            )
        else:
            lines.append(f"{source.kind.value} -> {name}")
    return "\n".join(lines)


def _step_bounds(
    coordinator: Coordinator, id: GlobalId, inputs: set[GlobalId], until: int | None = None
) -> tuple[int | None, int | None]:
    """(lower, upper) of the step `id` can take now: from its write frontier
    to the inputs' least upper (at most `until`)."""
    found = coordinator.compute.find_dataflow(id)
    if found is None:
        raise StorageError(f"{id} is not maintained by any dataflow in this process")
    lower = found[1].write_frontier.time
    shards = {i: coordinator.storage.shard(i) for i in inputs}
    upper = input_upper(shards).time
    if until is not None and (upper is None or until < upper):
        upper = until
    if lower is None or upper is None or upper <= lower:
        return lower, None
    return lower, upper


def _rows_read(
    coordinator: Coordinator, inputs: set[GlobalId], lower: int, upper: int, as_of: int
) -> int:
    """Input updates a step over [lower, upper) consumes (a hydration reads
    each input's snapshot at the as_of, then its updates after it)."""
    count = 0
    for id in sorted(inputs):
        shard = coordinator.storage.shard(id)
        if lower == as_of:
            count += shard.snapshot_table(as_of).num_rows
            count += len(shard.updates_between(as_of + 1, Frontier.at(upper)))
        else:
            count += len(shard.updates_between(lower, Frontier.at(upper)))
    return count


# How often a view's step starts again from the view's durable upper when
# another process stepped the view past it meanwhile (each retry needs the
# other process to step the view again within the run's few reads).
RESUME_ATTEMPTS = 5


def _materialize_view(
    coordinator: Coordinator,
    item: CatalogItem,
    previous_upper: int | None,
    started: float,
    until: int | None = None,
) -> Materialization:
    assert item.expr is not None
    inputs = coordinator.storage_inputs(item.expr)
    found = coordinator.compute.find_dataflow(item.id)
    assert found is not None
    as_of = found[1].description.as_of
    read = 0
    result = None
    with _holding_changes(coordinator, [item.id], previous_upper) as lowers:
        for attempt in range(RESUME_ATTEMPTS):
            # The step starts at the view's durable upper, read again on each
            # attempt: another process (`tidemark serve`, another run) may
            # have stepped the view since, and compacted its inputs behind it.
            lower, upper = _step_bounds(coordinator, item.id, inputs, until)
            if lower is None or upper is None:
                break
            try:
                with held(coordinator, sorted(inputs), as_of if lower == as_of else lower):
                    read = _rows_read(coordinator, inputs, lower, upper, as_of)
                    result = coordinator.compute.step_dataflow(item.id, until=upper)
                break
            except InvalidTimestamp:
                durable = observe(coordinator, item.id)
                moved = durable is not None and Frontier(durable.upper) > Frontier.at(lower)
                if not moved or attempt == RESUME_ATTEMPTS - 1:
                    raise  # not a view that moved on under this run: a real error
        frontiers = observe(coordinator, item.id)
        assert frontiers is not None
        inserted, retracted, updates = changes(
            coordinator, item.id, lowers[item.id], frontiers.upper
        )
    seconds = time.perf_counter() - started
    # The engine's name as plain text (a StrEnum is no text to Dagster's serializer).
    engine = str(result.engine) if result is not None else "none"
    return Materialization(
        item.id,
        frontiers.since,
        frontiers.upper,
        previous_upper,
        frontiers.lag_ms(),
        inserted,
        retracted,
        read,
        total_rows(coordinator, item.id, frontiers),
        seconds,
        result.seconds if result is not None and engine == "spark" else 0.0,
        engine,
        explain_view(item.expr, coordinator.catalog.index.names()),
        step_lower=result.lower if result is not None else None,
        step_upper=result.upper if result is not None else None,
        hydrated=result is not None and result.lower == as_of,
        changes_from=lowers[item.id],
        updates=updates,
        reads=result.reads if result is not None else None,
        state=view_state(coordinator, item.id),
    )


def _materialize_index(
    coordinator: Coordinator, item: CatalogItem, started: float, until: int | None = None
) -> Materialization:
    """Hydrate or catch up the index's arrangement in this process (on the
    engine its inputs' size picks). The arrangement holds exactly what it
    indexes, so for an index of a collection the counts come from the
    collection (no extra Spark jobs);
    for an index of a plain view they come from peeks of the arrangement."""
    expr = defining_expr(coordinator, item)
    assert expr is not None
    inputs = coordinator.storage_inputs(expr)
    found = coordinator.compute.find_dataflow(item.id)
    assert found is not None
    instance_id, dataflow = found
    as_of = dataflow.description.as_of
    lower, upper = _step_bounds(coordinator, item.id, inputs, until)
    of_collection = isinstance(expr, rel.Get)
    before: list[tuple[Row, int]] = []
    read = 0
    result = None
    if lower is not None and upper is not None:
        if lower > as_of and not of_collection:
            before = coordinator.compute.peek(instance_id, item.id, lower - 1)
        with held(coordinator, sorted(inputs), as_of if lower == as_of else lower):
            read = _rows_read(coordinator, inputs, lower, upper, as_of)
            result = coordinator.compute.step_dataflow(item.id, until=upper)
    frontiers = observe(coordinator, item.id)
    assert frontiers is not None
    hydrated = result is not None and lower == as_of
    if of_collection:
        assert isinstance(expr, rel.Get)
        since_step = None if hydrated or result is None else lower
        inserted, retracted, _ = (
            changes(coordinator, expr.id, since_step, upper) if result is not None else (0, 0, 0)
        )
        total = total_rows(coordinator, expr.id, Frontiers(frontiers.since, frontiers.upper))
    else:
        after: list[tuple[Row, int]] = []
        if frontiers.upper is not None and frontiers.upper > as_of:
            after = coordinator.compute.peek(instance_id, item.id, frontiers.upper - 1)
        net = consolidate(
            [Update(r, 0, d) for r, d in after] + [Update(r, 0, -d) for r, d in before]
        )
        inserted = sum(u.diff for u in net if u.diff > 0)
        retracted = -sum(u.diff for u in net if u.diff < 0)
        total = sum(d for _, d in after)
    return Materialization(
        item.id,
        frontiers.since,
        frontiers.upper,
        None,
        frontiers.lag_ms(),
        inserted,
        retracted,
        read,
        total,
        time.perf_counter() - started,
        result.seconds if result is not None and result.engine == "spark" else 0.0,
        str(result.engine) if result is not None else "none",
        explain_view(expr, coordinator.catalog.index.names()),
        step_lower=lower if result is not None else None,
        step_upper=upper if result is not None else None,
        hydrated=hydrated,
    )
