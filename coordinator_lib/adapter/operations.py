"""What an orchestrator does to an environment, one object at a time.

The Dagster code location (and anything else that drives Tidemark from the
outside) works through these functions over a `Coordinator` it opened with
`Config(background=False)`: no maintenance thread, nothing stepped unless a
function here says so.

- `apply_sql` applies a project's CREATE statements idempotently;
  `catalog_objects` describes every source, table, materialized view and
  index: storage-level inputs (plain views inlined), columns, column lineage,
  the SQL, the refresh period.
- `observe` reads frontiers and never steps; `update_spans` says where a
  collection's updates are from batch metadata (no data read);
  `assign_timestamps` only writes
  (advances tables, webhook sources and load generators): both are safe in a
  sensor tick, where Spark must never start.
- `materialize` does one object's work: a source seals at a timestamp, a
  materialized view takes one incremental step to its inputs' least upper, an
  index hydrates or catches up its arrangement. Every write is a
  compare_and_append; nothing moves a frontier back.
- `check_frontiers`, `check_schema`, `check_consistency` are the asset
  checks' questions; `compact` is the compaction sensor's pass.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pandera.pandas as pa
from pandera.errors import SchemaError, SchemaErrors
from sqlglot.tokens import TokenType

from coordinator_lib.adapter.client import Client
from coordinator_lib.adapter.coordinator import Coordinator, compaction_pass
from coordinator_lib.adapter.errors import AdapterError, InvalidTimestamp
from coordinator_lib.adapter.maintainer import Maintainer, current_maintainer
from coordinator_lib.adapter.oracle import wall_clock_ms
from coordinator_lib.adapter.verify import pandera_schema
from coordinator_lib.compute.dataflow import input_upper
from coordinator_lib.compute.error_collection import errors_at
from coordinator_lib.compute.explain import explain_view
from coordinator_lib.expr import relation as rel
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.repr.update import Row, Update, consolidate
from coordinator_lib.sql.catalog import CatalogItem, ItemKind
from coordinator_lib.sql.dialect import Tidemark
from coordinator_lib.sql.plan import parse_statements, plan_statement
from coordinator_lib.sql.plans import CreateSourcePlan, CreateViewPlan
from coordinator_lib.storage import StorageError
from coordinator_lib.storage.collection import DataSourceKind
from coordinator_lib.storage.controller import AppendCommand
from coordinator_lib.storage.errors import InvalidUppers
from coordinator_lib.storage.ingestion import generator_for, ingestion_step

# Kinds of catalog items an orchestrator sees (plain views are inlined).
ASSET_KINDS = (ItemKind.SOURCE, ItemKind.TABLE, ItemKind.MATERIALIZED_VIEW, ItemKind.INDEX)
# Who writes a source's collection.
INGESTION, WEBHOOK, SUBSOURCES = "load-generator", "webhook", "subsources"


# ---------------------------------------------------------------- project SQL
@dataclass(frozen=True)
class Defined:
    """Where a project SQL statement defined an object (for code references)."""

    name: str  # fully qualified, as catalog items print
    path: str
    line: int
    created: bool  # False: it existed already and was left as it is
    comment: str = ""  # the `--` comment lines right above the statement


def leading_comment(text: str, line: int) -> str:
    """The `--` comment block that ends right above `line` (1-based)."""
    lines = text.splitlines()
    out: list[str] = []
    index = line - 2
    while index >= 0 and lines[index].strip().startswith("--"):
        out.append(lines[index].strip()[2:].strip())
        index -= 1
    return " ".join(reversed(out)).strip()


def split_statements(text: str) -> list[tuple[str, int]]:
    """The `;`-separated statements of `text` with their first line (1-based)."""
    tokens = Tidemark().tokenize(text)
    out: list[tuple[str, int]] = []
    first = None
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if first is not None:
                out.append((text[first.start : token.start].strip(), first.line))
            first = None
        elif first is None:
            first = token
    if first is not None:
        out.append((text[first.start :].strip(), first.line))
    return out


def apply_sql(
    coordinator: Coordinator, text: str, path: str = "<sql>", user: str = "materialize"
) -> list[Defined]:
    """Apply `text`'s CREATE statements; objects that exist are left alone
    (each statement runs as CREATE ... IF NOT EXISTS), so applying a project
    twice changes nothing. Anything but CREATE is refused: a project file
    declares objects, it does not write data on every load."""
    session = Client(coordinator).startup(user, internal=True)
    defined: list[Defined] = []
    try:
        for sql, line in split_statements(text):
            (statement,) = parse_statements(sql)
            creates = type(statement).__name__.startswith("Create")
            if not (creates and "exists" in type(statement).arg_types):
                raise ValueError(f"{path}:{line}: project SQL holds CREATE statements only")
            if statement.args.get("replace"):
                raise ValueError(f"{path}:{line}: CREATE OR REPLACE is not idempotent; drop it")
            statement.set("exists", True)
            idempotent = statement.sql(dialect=Tidemark)
            catalog = coordinator.catalog.session_catalog(
                session.session.database, session.session.search_path
            )
            plan = plan_statement(idempotent, catalog)
            names = _created_names(plan)
            existed = all(coordinator.catalog.index.lookup(n) is not None for n in names)
            list(session.execute(idempotent))
            created = bool(names) and not existed
            comment = leading_comment(text, line)
            defined += [Defined(str(n), path, line, created, comment) for n in names]
    finally:
        session.terminate()
    return defined


def _created_names(plan: Any) -> list[Any]:
    if isinstance(plan, CreateSourcePlan):
        return [plan.name, *(n for n in plan.subsources.values() if n != plan.name)]
    name = getattr(plan, "name", None)
    return [name] if name is not None and hasattr(name, "schema") else []


# ----------------------------------------------------------- catalog objects
@dataclass(frozen=True)
class ColumnInfo:
    name: str
    type: str
    nullable: bool


@dataclass(frozen=True)
class CatalogObject:
    """A source, table, materialized view or index as an orchestrator shows it.

    `inputs` are the storage collections it reads (plain views inlined; a
    subsource reads its parent source); `lineage` maps each output column to
    the (input, column) pairs it is computed from."""

    id: GlobalId
    kind: ItemKind
    database: str
    schema: str
    name: str
    inputs: tuple[GlobalId, ...]
    columns: tuple[ColumnInfo, ...]
    lineage: Mapping[str, tuple[tuple[GlobalId, str], ...]]
    create_sql: str
    refresh_every_ms: int | None = None
    source_type: str | None = None  # INGESTION, WEBHOOK, SUBSOURCES; None for non-sources
    index_key: tuple[str, ...] = ()

    @property
    def has_collection(self) -> bool:
        return self.kind is not ItemKind.INDEX and self.source_type != SUBSOURCES


def catalog_objects(coordinator: Coordinator) -> list[CatalogObject]:
    """Every user source, table, materialized view and index, in id order
    (so every object comes after its inputs)."""
    coordinator.refresh_catalog()
    catalog = coordinator.catalog
    out = []
    for item in catalog.items():
        if item.kind not in ASSET_KINDS:
            continue
        expr = _defining_expr(coordinator, item)
        inputs: tuple[GlobalId, ...] = ()
        if expr is not None:
            inputs = tuple(sorted(i for i in expr.depends_on() if i.kind == "u"))
        elif item.kind is ItemKind.SOURCE:
            inputs = tuple(sorted(i for i in item.depends_on if i.kind == "u"))
        lineage: dict[str, tuple[tuple[GlobalId, str], ...]] = {}
        if expr is not None:
            for name, sources in zip(item.desc.names, column_lineage(expr), strict=True):
                lineage[name] = tuple(
                    sorted((id, catalog.get(id).desc.names[c]) for id, c in sources)
                )
        plan = catalog.index.plans.get(catalog.entry(item.id).ids[0])
        out.append(
            CatalogObject(
                id=item.id,
                kind=item.kind,
                database=item.name.database,
                schema=item.name.schema,
                name=item.name.item,
                inputs=inputs,
                columns=tuple(
                    ColumnInfo(n, t.scalar_type.value, t.nullable)
                    for n, t in zip(item.desc.names, item.desc.types, strict=True)
                ),
                lineage=lineage,
                create_sql=catalog.entry(item.id).create_sql,
                refresh_every_ms=plan.refresh_every_ms
                if isinstance(plan, CreateViewPlan)
                else None,
                source_type=_source_type(coordinator, item),
                index_key=tuple(item.desc.names[i] for i in item.key or ()),
            )
        )
    return out


def find(coordinator: Coordinator, database: str, schema: str, name: str) -> GlobalId | None:
    """The id of the object named database.schema.name now (ids change when
    an object is dropped and created again), or None."""
    from coordinator_lib.sql.catalog import QualifiedName

    coordinator.refresh_catalog()
    item = coordinator.catalog.index.lookup(QualifiedName(database, schema, name))
    return None if item is None else item.id


def _defining_expr(coordinator: Coordinator, item: CatalogItem) -> rel.RelationExpr | None:
    """What a view or index computes (an index of a collection: a Get of it)."""
    if item.kind is ItemKind.MATERIALIZED_VIEW:
        return item.expr
    if item.kind is ItemKind.INDEX and item.on is not None:
        on = coordinator.catalog.get(item.on)
        if on.kind is ItemKind.VIEW and on.expr is not None:
            return on.expr
        return rel.Get(on.id, on.desc)
    return None


def _source_type(coordinator: Coordinator, item: CatalogItem) -> str | None:
    if item.kind is not ItemKind.SOURCE:
        return None
    try:
        kind = coordinator.storage.collection(item.id).description.data_source.kind
    except StorageError:
        return SUBSOURCES  # a source whose rows live in its subsources
    return {DataSourceKind.INGESTION: INGESTION, DataSourceKind.WEBHOOK: WEBHOOK}.get(
        kind, str(kind)
    )


def column_lineage(expr: rel.RelationExpr) -> list[frozenset[tuple[GlobalId, int]]]:
    """For each output column of `expr`, the (collection, column) pairs its
    values are computed from (filters and join conditions are not counted)."""
    if isinstance(expr, rel.Get):
        return [frozenset({(expr.id, i)}) for i in range(expr.desc.arity)]
    if isinstance(expr, rel.Constant):
        return [frozenset() for _ in range(expr.desc.arity)]
    if isinstance(expr, rel.Project):
        below = column_lineage(expr.input)
        return [below[i] for i in expr.outputs]
    if isinstance(expr, rel.Map):
        columns = column_lineage(expr.input)
        for scalar in expr.scalars:  # a scalar may read earlier scalars
            columns.append(frozenset().union(*(columns[c] for c in scalar.columns())))
        return columns
    if isinstance(expr, rel.Join):
        return [c for child in expr.inputs_ for c in column_lineage(child)]
    if isinstance(expr, rel.Reduce):
        below = column_lineage(expr.input)
        scalars = [*expr.group_key, *(a.expr for a in expr.aggregates)]
        return [frozenset().union(*(below[c] for c in s.columns())) for s in scalars]
    if isinstance(expr, rel.Window):  # a function's value: its arguments, partition and order
        below = column_lineage(expr.input)
        spec = [*expr.partition_key, *(k.column for k in expr.order_key)]
        return below + [
            frozenset().union(*(below[c] for c in [*spec, *f.args])) for f in expr.functions
        ]
    if isinstance(expr, rel.Union):
        parts = [column_lineage(child) for child in expr.inputs_]
        return [frozenset().union(*column) for column in zip(*parts, strict=True)]
    inputs = expr.inputs()
    if len(inputs) == 1 and inputs[0].desc.arity == expr.desc.arity:  # Filter, Distinct, ...
        return column_lineage(inputs[0])
    every = frozenset().union(*(c for child in inputs for c in column_lineage(child)))
    return [every for _ in range(expr.desc.arity)]


# ------------------------------------------------------------------ frontiers
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


def _writer_kind(coordinator: Coordinator, id: GlobalId) -> DataSourceKind | None:
    try:
        return coordinator.storage.collection(id).description.data_source.kind
    except StorageError:
        return None


def _user_collections(coordinator: Coordinator) -> list[GlobalId]:
    return sorted(id for id, _ in coordinator.storage.collections() if id.kind == "u")


def _advance_empty(coordinator: Coordinator, id: GlobalId, target: int) -> None:
    """Move a table's or webhook's upper to `target` with an empty
    compare_and_append (a lost race means someone else advanced it)."""
    _, upper = coordinator.storage.collection_frontiers(id)
    if upper.time is None or upper.time >= target:
        return
    with contextlib.suppress(InvalidUppers):
        coordinator.storage.append([AppendCommand(id, [], target, upper)])


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
    time up to `timestamp`: its upper becomes at least `timestamp + 1`."""
    kind = _writer_kind(coordinator, id)
    if kind is DataSourceKind.INGESTION:
        _ingest(coordinator, id, timestamp)
    elif kind in (DataSourceKind.TABLE, DataSourceKind.WEBHOOK):
        _advance_empty(coordinator, id, timestamp + 1)


def assign_timestamps(coordinator: Coordinator) -> dict[GlobalId, Frontiers]:
    """The timestamp-assignment pass: seal every table, webhook source and
    load generator at a fresh timestamp. Only writes; never steps a dataflow
    or starts Spark. Returns every user collection's frontiers afterwards."""
    coordinator.refresh_catalog()
    timestamp = seal_timestamp(coordinator)
    for id in _user_collections(coordinator):
        seal(coordinator, id, timestamp)
    out = {}
    for id in _user_collections(coordinator):
        since, upper = coordinator.storage.collection_frontiers(id)
        out[id] = Frontiers(since.time, upper.time)
    return out


# ------------------------------------------------------------- materializing
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
        if _writer_kind(coordinator, parts[0]) is DataSourceKind.INGESTION
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


@contextlib.contextmanager
def _held(coordinator: Coordinator, ids: Sequence[GlobalId], at: int) -> Iterator[None]:
    holds = coordinator.hold(set(ids), at)
    try:
        yield
    finally:
        for hold in holds:
            hold.release()


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
    lower, upper = _step_bounds(coordinator, item.id, inputs, until)
    read = 0
    result = None
    with _holding_changes(coordinator, [item.id], previous_upper) as lowers:
        if lower is not None and upper is not None:
            hold_at = as_of if lower == as_of else lower
            try:
                with _held(coordinator, sorted(inputs), hold_at):
                    read = _rows_read(coordinator, inputs, lower, upper, as_of)
                    result = coordinator.compute.step_dataflow(item.id, until=upper)
            except InvalidTimestamp:
                # Another process (`tidemark serve`, another run) stepped the
                # view past where this process's dataflow stands, and its
                # inputs were compacted behind it: the view is already there,
                # so this run has no step to take.
                durable = observe(coordinator, item.id)
                if durable is None or durable.upper is None or durable.upper <= lower:
                    raise
        frontiers = observe(coordinator, item.id)
        assert frontiers is not None
        inserted, retracted, updates = changes(
            coordinator, item.id, lowers[item.id], frontiers.upper
        )
    seconds = time.perf_counter() - started
    engine = result.engine if result is not None else "none"
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
        step_lower=lower if result is not None else None,
        step_upper=upper if result is not None else None,
        hydrated=result is not None and lower == as_of,
        changes_from=lowers[item.id],
        updates=updates,
    )


def _materialize_index(
    coordinator: Coordinator, item: CatalogItem, started: float, until: int | None = None
) -> Materialization:
    """Hydrate or catch up the index's arrangement in this process. The
    arrangement holds exactly what it indexes, so for an index of a
    collection the counts come from the collection (no extra Spark jobs);
    for an index of a plain view they come from peeks of the arrangement."""
    expr = _defining_expr(coordinator, item)
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
        with _held(coordinator, sorted(inputs), as_of if lower == as_of else lower):
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
        result.seconds if result is not None else 0.0,
        "spark" if result is not None else "none",
        explain_view(expr, coordinator.catalog.index.names()),
        step_lower=lower if result is not None else None,
        step_upper=upper if result is not None else None,
        hydrated=hydrated,
    )


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
    with _held(coordinator, [id], lower):
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
            with _held(coordinator, [id], at):
                return coordinator.storage.snapshot(id, at)
        except (StorageError, AdapterError):  # compacted past `at` meanwhile: look again
            frontiers = None
    raise StorageError(f"could not read {id}: its since kept moving")


# --------------------------------------------------------------------- checks
@dataclass(frozen=True)
class CheckOutcome:
    """An asset check's verdict: `passed`, what was wrong, and numbers to show."""

    passed: bool
    problems: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)


def check_frontiers(
    coordinator: Coordinator,
    id: GlobalId,
    freshness_ms: int,
    recorded: Frontiers | None = None,
) -> CheckOutcome:
    """since <= upper; lag (wall clock - upper) within `freshness_ms`; and
    neither frontier behind `recorded` (the last materialization's)."""
    frontiers = observe(coordinator, id)
    if frontiers is None:
        return CheckOutcome(False, (f"{id} has no frontiers",))
    problems = []
    since, upper = Frontier(frontiers.since), Frontier(frontiers.upper)
    if not (since.is_empty and upper.is_empty) and upper < since:
        problems.append(f"since {frontiers.since} is after upper {frontiers.upper}")
    lag = frontiers.lag_ms()
    if lag > freshness_ms:
        problems.append(f"lag {lag} ms exceeds the declared freshness of {freshness_ms} ms")
    if recorded is not None:
        if Frontier(frontiers.upper) < Frontier(recorded.upper):
            problems.append(f"upper {frontiers.upper} went back from {recorded.upper}")
        if Frontier(frontiers.since) < Frontier(recorded.since):
            problems.append(f"since {frontiers.since} went back from {recorded.since}")
    metadata = {
        "since": frontiers.since,
        "upper": frontiers.upper,
        "lag_ms": lag,
        "freshness_ms": freshness_ms,
    }
    return CheckOutcome(not problems, tuple(problems), metadata)


def schema_of(desc: RelationDesc) -> pa.DataFrameSchema:
    """verify.py's pandera schema of `desc`, plus its unique keys."""
    schema = pandera_schema(desc)
    keys = [k for k in desc.keys if k]
    if keys:
        schema = pa.DataFrameSchema(
            schema.columns,
            strict=True,
            coerce=False,
            unique=[desc.names[i] for i in keys[0]],
        )
    return schema


def check_schema(coordinator: Coordinator, id: GlobalId, max_rows: int = 100_000) -> CheckOutcome:
    """The contents at the latest readable time against the pandera schema
    derived from the RelationDesc (types, nullability, unique keys), and no
    negative multiplicities. Checks at most `max_rows` distinct rows."""
    desc = coordinator.catalog.get(id).desc
    rows = contents(coordinator, id)
    if rows is None:
        return CheckOutcome(True, (), {"rows_checked": 0})
    problems = [f"row {row!r} has multiplicity {diff}" for row, diff in rows if diff < 0][:10]
    expanded = [row for row, diff in rows[:max_rows] for _ in range(min(max(diff, 0), 2))]
    frame = pd.DataFrame(expanded, columns=list(desc.names), dtype=object)
    try:
        schema_of(desc).validate(frame, lazy=True)
    except SchemaErrors as errors:
        cases = errors.failure_cases
        for _, case in cases.head(10).iterrows():
            problems.append(
                f"column {case['column']}: {case['check']} failed on {case['failure_case']!r}"
            )
    except SchemaError as error:  # pragma: no cover - lazy validation collects instead
        problems.append(str(error))
    metadata = {"rows_checked": len(frame), "distinct_rows": len(rows)}
    return CheckOutcome(not problems, tuple(problems), metadata)


def check_consistency(coordinator: Coordinator, id: GlobalId) -> CheckOutcome:
    """The materialized view at its latest readable time has no errors (its
    error collection, compute/error_collection.py) and equals its query
    recomputed from its inputs at that time (invariant 6)."""
    item = coordinator.catalog.get(id)
    assert item.expr is not None
    frontiers = observe(coordinator, id)
    if frontiers is None or frontiers.upper is None or frontiers.since is None:
        return CheckOutcome(True, (), {"time": None})
    inputs = sorted(coordinator.storage_inputs(item.expr))
    shards = {i: coordinator.storage.shard(i) for i in inputs}
    # The latest time both the view and its inputs are complete at.
    at = Frontier(frontiers.upper).meet(input_upper(shards)).step_back()
    if at is None or at < frontiers.since:
        return CheckOutcome(True, (), {"time": None, "note": "nothing readable yet"})
    with _held(coordinator, [id, *inputs], at):
        errors = errors_at(coordinator.storage.shard(id), at)
        if errors:  # the recompute would raise the first of them
            problems = [f"{message} (SQLSTATE {code}) x{n}" for code, message, n in errors]
            return CheckOutcome(False, tuple(problems), {"time": at, "errors": len(problems)})
        stored = coordinator.storage.snapshot(id, at)
        expected = coordinator.compute.peek_expr(coordinator.with_system_relations(item.expr), at)
    difference = consolidate(
        [Update(r, 0, d) for r, d in stored] + [Update(r, 0, -d) for r, d in expected]
    )
    extra = [f"extra {u.row!r} x{u.diff}" for u in difference if u.diff > 0]
    missing = [f"missing {u.row!r} x{-u.diff}" for u in difference if u.diff < 0]
    metadata = {
        "time": at,
        "view_rows": sum(d for _, d in stored),
        "recomputed_rows": sum(d for _, d in expected),
        "differences": len(difference),
    }
    return CheckOutcome(not difference, tuple((extra + missing)[:10]), metadata)


# ----------------------------------------------------------------- compaction
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
    for id in _user_collections(coordinator):
        since, upper = coordinator.storage.collection_frontiers(id)
        frontiers[id] = Frontiers(since.time, upper.time)
    return CompactionReport(
        report.compacted_batches, report.collected_blobs, report.finalized_shards, frontiers
    )


__all__ = [
    "CatalogObject",
    "CheckOutcome",
    "ColumnInfo",
    "CompactionReport",
    "Defined",
    "Frontiers",
    "Maintainer",
    "Materialization",
    "UpdateSpan",
    "apply_sql",
    "assign_timestamps",
    "catalog_objects",
    "changes",
    "check_consistency",
    "check_frontiers",
    "check_schema",
    "column_lineage",
    "compact",
    "contents",
    "find",
    "leading_comment",
    "maintainer",
    "materialize",
    "observe",
    "seal",
    "seal_timestamp",
    "split_statements",
    "total_rows",
    "update_spans",
    "updates_in",
]
