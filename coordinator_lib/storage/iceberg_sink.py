"""An Iceberg sink: a collection written to an Iceberg table through
pyiceberg's SQL catalog, exactly once.

Each commit is one Iceberg transaction that records, in its snapshot's
properties, the collection's upper it brings the table to
(`tidemark.upper`). The table's current snapshot is therefore the sink's
durable progress: a restarted sink reads it and continues from there, and a
commit that died before the catalog's compare-and-set left no snapshot, so
nothing is written twice or lost.

- MODE APPEND: every update becomes a row with its `mz_timestamp` and
  `mz_diff` (the first commit writes the contents at the start time as
  updates with their multiplicity).
- MODE UPSERT KEY (...): the table holds the collection at the committed
  upper: one commit deletes the rows of every key that changed and appends
  those keys' current rows. Two rows with one key at a time stop the sink
  with an error (the key is not a key of the collection).

The sink holds its input readable at its progress with a dependency hold,
so compaction never passes what it has not written yet.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from coordinator_lib.persist.shard import Shard
from coordinator_lib.repr.relation import RelationDesc

log = logging.getLogger(__name__)

UPPER_PROPERTY = "tidemark.upper"
STEP_INTERVAL_S = 0.2
RETRY_INTERVAL_S = 1.0


class SinkError(Exception):
    """The sink cannot go on (its message is the sink's status)."""


@dataclass(frozen=True)
class IcebergSinkSpec:
    name: str  # the sink's id, for logs and the hold
    catalog: dict[str, str]  # pyiceberg SqlCatalog properties: uri, warehouse
    namespace: str
    table: str
    desc: RelationDesc
    key: tuple[int, ...] | None  # upsert key columns; None: append mode


def open_catalog(properties: dict[str, str]) -> Any:
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("tidemark", **properties)


def arrow_schema(desc: RelationDesc, append: bool) -> pa.Schema:
    """The Iceberg table's columns: the collection's (Iceberg has no
    smallint: int32), every one optional; append mode adds time and diff."""
    fields = []
    for field in desc.arrow_schema():
        type_ = pa.int32() if field.type == pa.int16() else field.type
        fields.append(pa.field(field.name, type_, nullable=True))
    if append:
        fields += [pa.field("mz_timestamp", pa.int64()), pa.field("mz_diff", pa.int64())]
    return pa.schema(fields)


def committed_upper(table: Any) -> int | None:
    """The upper the table's current snapshot brought it to (None: none yet)."""
    snapshot = table.current_snapshot()
    if snapshot is None:
        return None
    value = snapshot.summary.additional_properties.get(UPPER_PROPERTY)
    return int(value) if value is not None else None


class IcebergSink:
    """Runs one sink in a thread until `stop()`."""

    def __init__(
        self,
        spec: IcebergSinkSpec,
        shard: Callable[[], Shard],
        start: Callable[[], int],
        hold: Callable[[int], None],
        closing: Callable[[], bool] = lambda: False,
    ) -> None:
        self.spec = spec
        self.shard = shard
        self.start_time = start  # where a new sink starts: its input's latest readable time, held
        self.hold = hold  # keep the input readable from this time on
        self.closing = closing
        self.error: str | None = None
        self.committed: int | None = None  # the table's upper, as last seen
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"iceberg-sink-{spec.name}")
        self._thread.daemon = True

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _stopping(self) -> bool:
        return self._stop.is_set() or self.closing()

    def upper(self) -> int | None:
        """The upper of the table's last commit this sink saw (its checkpoint
        as a scheduler task); None before it looked."""
        return self.committed

    def _run(self) -> None:
        table = None
        while not self._stopping():
            try:
                if table is None:
                    table = self._table()
                if not self.step(table):
                    self._stop.wait(STEP_INTERVAL_S)
            except SinkError as error:
                self.error = str(error)
                log.error("iceberg sink %s stopped: %s", self.spec.name, error)
                return
            except Exception as error:  # catalog unreachable, lost commit race: retry
                if self._stopping():
                    return
                log.warning("iceberg sink %s: %s (retrying)", self.spec.name, error)
                table = None
                self._stop.wait(RETRY_INTERVAL_S)

    def _table(self) -> Any:
        from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError

        catalog = open_catalog(self.spec.catalog)
        identifier = (self.spec.namespace, self.spec.table)
        try:
            return catalog.load_table(identifier)
        except NoSuchTableError:
            pass
        try:
            catalog.create_namespace(self.spec.namespace)
        except NamespaceAlreadyExistsError:
            pass
        except Exception:  # another sink creating it at the same moment
            if not catalog.namespace_exists(self.spec.namespace):
                raise
        schema = arrow_schema(self.spec.desc, self.spec.key is None)
        return catalog.create_table(identifier, schema=schema)

    def step(self, table: Any) -> bool:
        """Commit what the input has past the table's upper; False if nothing."""
        table.refresh()
        done = self.committed = committed_upper(table)
        shard = self.shard()
        upper = shard.upper()
        if upper.time is None:
            raise SinkError("the sink's input was dropped")
        if done is None:  # a new sink: its input's contents at its start
            as_of = self.start_time()
            if upper.time <= as_of:
                return False
            self.hold(as_of)
            rows = [(row, as_of, diff) for row, diff in shard.snapshot(as_of)]
            self._commit(table, rows, as_of + 1, shard, first=True)
            self.committed = as_of + 1
            return True
        self.hold(done - 1)  # readable at the table's time too (and after it)
        if upper.time <= done:
            return False
        updates = shard.updates_between(done, upper)
        if not updates:  # nothing to write: the table stays at `done`
            return False
        self._commit(table, [(u.row, u.time, u.diff) for u in updates], upper.time, shard)
        self.committed = upper.time
        self.hold(upper.time - 1)
        return True

    def _commit(
        self,
        table: Any,
        updates: Sequence[tuple[Any, int, int]],
        new_upper: int,
        shard: Shard,
        first: bool = False,
    ) -> None:
        properties = {UPPER_PROPERTY: str(new_upper)}
        schema = arrow_schema(self.spec.desc, self.spec.key is None)
        names = list(self.spec.desc.names)
        if self.spec.key is None:
            records = [(*row, time, diff) for row, time, diff in updates]
            frame = pa.Table.from_pylist(
                [dict(zip([*names, "mz_timestamp", "mz_diff"], r, strict=True)) for r in records],
                schema=schema,
            )
            with table.transaction() as tx:
                tx.append(frame, snapshot_properties=properties)
            return
        key = self.spec.key
        touched = {tuple(row[k] for k in key) for row, _, _ in updates}
        current: list[tuple[Any, ...]] = []
        seen: set[tuple[Any, ...]] = set()
        for row, diff in [] if not touched and not first else shard.snapshot(new_upper - 1):
            k = tuple(row[i] for i in key)
            if not first and k not in touched:
                continue
            if diff != 1 or k in seen:
                shown = ", ".join(f"{names[i]} = {v!r}" for i, v in zip(key, k, strict=True))
                raise SinkError(f"the upsert key ({shown}) is not unique in the sink's input")
            seen.add(k)
            current.append(row)
        frame = pa.Table.from_pylist(
            [dict(zip(names, row, strict=True)) for row in current], schema=schema
        )
        with table.transaction() as tx:
            if touched and not first:
                tx.delete(
                    _key_filter([names[i] for i in key], touched), snapshot_properties=properties
                )
            tx.append(frame, snapshot_properties=properties)


def _key_filter(columns: list[str], keys: set[tuple[Any, ...]]) -> Any:
    """Rows whose key is one of `keys` (NULL key parts match IS NULL)."""
    from pyiceberg import expressions

    ice: Any = expressions  # its constructors are pydantic models mypy misreads

    def matches(column: str, value: Any) -> Any:
        return ice.IsNull(column) if value is None else ice.EqualTo(column, value)

    if len(columns) == 1 and all(k[0] is not None for k in keys):
        return ice.In(columns[0], [k[0] for k in keys])
    clauses = []
    for k in keys:
        clause = matches(columns[0], k[0])
        for column, value in zip(columns[1:], k[1:], strict=True):
            clause = ice.And(clause, matches(column, value))
        clauses.append(clause)
    result = clauses[0]
    for clause in clauses[1:]:
        result = ice.Or(result, clause)
    return result


__all__ = [
    "UPPER_PROPERTY",
    "IcebergSink",
    "IcebergSinkSpec",
    "SinkError",
    "arrow_schema",
    "committed_upper",
    "open_catalog",
]
