"""The durable catalog: databases, schemas, items and their ids, in consensus.

What is stored is what Materialize stores: for each item its GlobalId(s) and
its `create_sql` (fully qualified, so it re-plans under any search path), plus
the settings that ALTER changes (retain history). On open, and whenever
another process changed the record, the items are rebuilt by planning every
`create_sql` again in creation order. Every change is one compare-and-set of
the whole record (`commit`), so two coordinators (a server and a Dagster run)
serialize their DDL through consensus.

Planning sees the catalog through a `SessionCatalog`: the session's database
and search path, then the system schemas (`mz_catalog`, `mz_internal`,
`pg_catalog`) whose relations the adapter fills in at read time.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from coordinator_lib.adapter.durable import Record, read_record
from coordinator_lib.persist.consensus import Consensus, VersionedData
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.sql.catalog import (
    DEFAULT_DATABASE,
    DEFAULT_SCHEMA,
    CatalogItem,
    ItemKind,
    QualifiedName,
    quote_ident,
)
from coordinator_lib.sql.errors import UnknownObject
from coordinator_lib.sql.memory_catalog import InMemoryCatalog
from coordinator_lib.sql.plan import plan_statement

CATALOG_KEY = "catalog"
SYSTEM_DATABASE = DEFAULT_DATABASE  # where system items are filed (any database sees them)
SYSTEM_SCHEMAS = ("mz_catalog", "mz_internal", "pg_catalog", "information_schema")
DEFAULT_CLUSTER = "quickstart"


def empty_state() -> Record:
    return {
        "next_id": 1,
        "databases": [DEFAULT_DATABASE],
        "schemas": [[DEFAULT_DATABASE, DEFAULT_SCHEMA]],
        "items": [],
        "clusters": {DEFAULT_CLUSTER: {"replication_factor": 1}},
    }


@dataclass(frozen=True)
class CatalogEntry:
    """One stored statement: the ids it created (a source may create
    subsources too), its SQL, and ALTERable settings."""

    ids: tuple[GlobalId, ...]
    create_sql: str
    retain_history_ms: int | None = None
    created_at: int | None = None  # ms; a load generator's first tick

    def to_json(self) -> Record:
        return {
            "ids": [str(i) for i in self.ids],
            "create_sql": self.create_sql,
            "retain_history_ms": self.retain_history_ms,
            "created_at": self.created_at,
        }

    @staticmethod
    def from_json(data: Record) -> CatalogEntry:
        return CatalogEntry(
            tuple(GlobalId.parse(i) for i in data["ids"]),
            data["create_sql"],
            data.get("retain_history_ms"),
            data.get("created_at"),
        )


class CatalogIndex(InMemoryCatalog):
    """Items by name and id, rebuilt from the stored entries; `plans` keeps
    each entry's plan by its first id (a source's generator settings)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plans: dict[GlobalId, Any] = {}

    def lookup(self, name: QualifiedName) -> CatalogItem | None:
        return self._by_name.get(name)

    def apply_with_ids(self, plan: Any, ids: tuple[GlobalId, ...]) -> list[CatalogItem]:
        """Apply a DDL plan giving its items the stored ids (allocated
        consecutively when the statement first ran)."""
        self._next_id = ids[0].value
        items = self.apply(plan)
        self.plans[ids[0]] = plan
        got = tuple(item.id for item in items)
        if got != ids:
            raise RuntimeError(f"catalog replay gave ids {got}, stored {ids}")
        return items


class Catalog:
    """The durable catalog of one environment (thread-safe)."""

    def __init__(self, consensus: Consensus, system_items: Iterable[CatalogItem] = ()) -> None:
        self.consensus = consensus
        self._system_items = list(system_items)
        self._lock = threading.RLock()
        self.seqno: int | None = None
        self.state: Record = empty_state()
        self.index = self._build(self.state)
        self.refresh()

    # ------------------------------------------------------------- loading
    def refresh(self) -> bool:
        """Reload if another process changed the catalog; True if it did."""
        # Every statement asks: the seqno alone, not the catalog's record.
        seqno = self.consensus.seqno(CATALOG_KEY)
        with self._lock:
            if seqno is None or seqno == self.seqno:
                return False
            seqno, state = read_record(self.consensus, CATALOG_KEY)
            assert state is not None
            self.index = self._build(state)
            self.state, self.seqno = state, seqno
            return True

    def _build(self, state: Record) -> CatalogIndex:
        index = CatalogIndex(database=DEFAULT_DATABASE, search_path=(DEFAULT_SCHEMA,))
        index.schemas = {(d, s) for d, s in state["schemas"]}
        index.schemas |= {(SYSTEM_DATABASE, s) for s in SYSTEM_SCHEMAS}
        for item in self._system_items:
            index.add(item)
        for raw in state["items"]:
            entry = CatalogEntry.from_json(raw)
            view = SessionCatalog(index, state, DEFAULT_DATABASE, (DEFAULT_SCHEMA,))
            plan = plan_statement(entry.create_sql, view)
            index.apply_with_ids(plan, entry.ids)
        return index

    # ------------------------------------------------------------ changing
    def commit(self, expected_seqno: int | None, new_state: Record) -> bool:
        """Store `new_state` iff the catalog is still at `expected_seqno`
        (else change nothing: the caller refreshes and plans again)."""
        import json

        index = self._build(new_state)  # a state that does not re-plan is never stored
        data = json.dumps(new_state, sort_keys=True).encode()
        new_seqno = (expected_seqno or 0) + 1
        with self._lock:
            if not self.consensus.compare_and_set(
                CATALOG_KEY, expected_seqno, VersionedData(new_seqno, data)
            ):
                return False
            self.state, self.seqno, self.index = new_state, new_seqno, index
            return True

    def snapshot(self) -> tuple[int | None, Record]:
        """A copy of the state to change and `commit`, with its seqno."""
        with self._lock:
            return self.seqno, copy.deepcopy(self.state)

    # ------------------------------------------------------------- reading
    def session_catalog(self, database: str, search_path: tuple[str, ...]) -> SessionCatalog:
        with self._lock:
            return SessionCatalog(self.index, self.state, database, search_path)

    def entries(self) -> list[CatalogEntry]:
        with self._lock:
            return [CatalogEntry.from_json(raw) for raw in self.state["items"]]

    def entry(self, id: GlobalId) -> CatalogEntry:
        for entry in self.entries():
            if id in entry.ids:
                return entry
        raise UnknownObject(f"unknown catalog item id {id}")

    def get(self, id: GlobalId) -> CatalogItem:
        with self._lock:
            return self.index.get(id)

    def items(self) -> list[CatalogItem]:
        """User items in id order."""
        with self._lock:
            return [item for item in self.index.items() if item.id.kind == "u"]

    def system_items(self) -> list[CatalogItem]:
        return list(self._system_items)

    def databases(self) -> list[str]:
        with self._lock:
            return list(self.state["databases"])

    def schemas(self) -> list[tuple[str, str]]:
        with self._lock:
            return [(d, s) for d, s in self.state["schemas"]]

    def clusters(self) -> dict[str, Record]:
        with self._lock:
            return dict(self.state["clusters"])

    def dependents(self, id: GlobalId) -> list[CatalogItem]:
        with self._lock:
            return self.index.dependents(id)


class SessionCatalog:
    """The catalog as one session's planning sees it (a SqlCatalog)."""

    def __init__(
        self,
        index: CatalogIndex,
        state: Record,
        database: str,
        search_path: tuple[str, ...],
    ) -> None:
        self.index = index
        self.state = state
        self.database = database
        self.search_path = tuple(search_path) or (DEFAULT_SCHEMA,)
        # Every item a name resolved to while planning (adapter/privileges.py checks them).
        self.resolved: set[GlobalId] = set()

    def schema_exists(self, database: str, schema: str) -> bool:
        if schema in SYSTEM_SCHEMAS:
            return True
        return [database, schema] in self.state["schemas"]

    def database_exists(self, database: str) -> bool:
        return database in self.state["databases"]

    def resolve(self, name: tuple[str, ...]) -> CatalogItem:
        if not 1 <= len(name) <= 3:
            raise UnknownObject(
                f"improper qualified name (too many dotted names): {_display(name)}"
            )
        candidates: list[QualifiedName] = []
        if len(name) == 1:
            candidates += [QualifiedName(self.database, s, name[0]) for s in self.search_path]
            candidates += [QualifiedName(SYSTEM_DATABASE, s, name[0]) for s in SYSTEM_SCHEMAS]
        elif name[-2] in SYSTEM_SCHEMAS:
            candidates.append(QualifiedName(SYSTEM_DATABASE, name[-2], name[-1]))
        elif len(name) == 2:
            candidates.append(QualifiedName(self.database, name[0], name[1]))
        else:
            candidates.append(QualifiedName(*name))
        for candidate in candidates:
            item = self.index.lookup(candidate)
            if item is not None:
                self.resolved.add(item.id)
                return item
        raise UnknownObject(f"unknown catalog item '{_display(name)}'")

    def qualify(self, name: tuple[str, ...]) -> QualifiedName:
        if not 1 <= len(name) <= 3:
            raise UnknownObject(
                f"improper qualified name (too many dotted names): {_display(name)}"
            )
        if len(name) == 1:
            return QualifiedName(self.database, self.search_path[0], name[0])
        qualified = (
            QualifiedName(self.database, name[0], name[1])
            if len(name) == 2
            else QualifiedName(*name)
        )
        if qualified.schema in SYSTEM_SCHEMAS:
            raise UnknownObject(f"system schema '{qualified.schema}' cannot be modified")
        if not self.schema_exists(qualified.database, qualified.schema):
            raise UnknownObject(f"unknown schema '{qualified.database}.{qualified.schema}'")
        return qualified

    def get(self, id: GlobalId) -> CatalogItem:
        return self.index.get(id)

    def items(self) -> list[CatalogItem]:
        return self.index.items()

    def names(self) -> dict[GlobalId, str]:
        return self.index.names()


def _display(name: tuple[str, ...]) -> str:
    return ".".join(quote_ident(p) for p in name)


def system_item(id: int, schema: str, name: str, desc: RelationDesc) -> CatalogItem:
    """A system relation: a table-like item whose rows the adapter computes."""
    return CatalogItem(
        GlobalId.system(id), QualifiedName(SYSTEM_DATABASE, schema, name), ItemKind.TABLE, desc
    )
