"""What planning needs from a catalog, and an in-memory one.

The planner only reads: it resolves names written in a statement to catalog
items (`SqlCatalog.resolve`), asks where a new name would go
(`SqlCatalog.qualify`) and, for CREATE/DROP SCHEMA and SHOW, which databases
and schemas exist and which are the session's (`database`, `search_path`).
The adapter's durable catalog implements the same protocol; `DictCatalog`
(`memory_catalog.InMemoryCatalog` applies DDL plans to one) is for tests
and for layers that need a catalog without the adapter (compute tests).

Names resolve like PostgreSQL/Materialize: `item` is looked up in each schema
of the search path (default `public`) of the current database (default
`materialize`), `schema.item` in the current database, `db.schema.item`
exactly. Tables, views, materialized views, sources and indexes share one
namespace per schema.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from coordinator_lib.expr.relation import RelationExpr
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.sql.errors import (
    DependentObjects,
    DuplicateObject,
    UnknownDatabase,
    UnknownObject,
    UnknownSchema,
)

if TYPE_CHECKING:
    from coordinator_lib.sql.constraints import UniqueConstraint

DEFAULT_DATABASE = "materialize"
DEFAULT_SCHEMA = "public"

_PLAIN_IDENT = re.compile(r"^[a-z_][a-z0-9_$]*$")


def quote_ident(name: str) -> str:
    """An identifier as PostgreSQL prints it: bare when it reads back the same,
    else double-quoted."""
    if _PLAIN_IDENT.match(name):
        return name
    return '"' + name.replace('"', '""') + '"'


class ItemKind(StrEnum):
    TABLE = "table"
    SOURCE = "source"
    VIEW = "view"
    MATERIALIZED_VIEW = "materialized-view"
    INDEX = "index"
    SECRET = "secret"
    CONNECTION = "connection"
    SINK = "sink"
    CONTINUAL_TASK = "continual-task"

    @property
    def sql_name(self) -> str:
        """How SQL (and error messages) spell the kind: "materialized view"."""
        return self.value.replace("-", " ")


@dataclass(frozen=True, order=True)
class QualifiedName:
    database: str
    schema: str
    item: str

    @property
    def parts(self) -> tuple[str, str, str]:
        return (self.database, self.schema, self.item)

    def __str__(self) -> str:
        return ".".join(quote_ident(p) for p in self.parts)


@dataclass(frozen=True)
class CatalogItem:
    """One named object. `expr` is a plain view's plan (inlined where the view
    is used, as Materialize does) or a materialized view's defining plan (for
    EXPLAIN; readers use `Get`). Indexes have `on` and `key` (column indexes of
    `on`'s desc); their `desc` is that of the indexed relation. `depends_on`
    lists the items the definition names (views included, although they are
    inlined), so DROP can find dependents."""

    id: GlobalId
    name: QualifiedName
    kind: ItemKind
    desc: RelationDesc
    expr: RelationExpr | None = None
    on: GlobalId | None = None
    key: tuple[int, ...] | None = None
    depends_on: frozenset[GlobalId] = field(default_factory=frozenset)
    # A table's UNIQUE / PRIMARY KEY constraints, enforced by group commit.
    unique: tuple[UniqueConstraint, ...] = ()


@runtime_checkable
class SqlCatalog(Protocol):
    """What the planner reads. `database` and `search_path` are the session's
    (CREATE SCHEMA, SHOW ... FROM and unqualified names go there)."""

    database: str
    search_path: tuple[str, ...]

    def schema_exists(self, database: str, schema: str) -> bool: ...

    def database_exists(self, database: str) -> bool: ...

    def resolve(self, name: tuple[str, ...]) -> CatalogItem:
        """The item a 1-3 part name refers to; raises UnknownObject naming it."""
        ...

    def qualify(self, name: tuple[str, ...]) -> QualifiedName:
        """Where an object created under `name` goes (the first schema of the
        search path for an unqualified name). Does not check existence."""
        ...


def _display(name: tuple[str, ...]) -> str:
    return ".".join(quote_ident(p) for p in name)


class DictCatalog:
    """A dict-backed SqlCatalog. Ids are allocated `u1`, `u2`, ... in order.
    (`memory_catalog.InMemoryCatalog` also applies DDL plans to it.)"""

    def __init__(
        self,
        database: str = DEFAULT_DATABASE,
        search_path: tuple[str, ...] = (DEFAULT_SCHEMA,),
        schemas: tuple[str, ...] = (),
    ) -> None:
        self.database = database
        self.search_path = tuple(search_path)
        self.schemas = {(database, s) for s in (*search_path, *schemas)}
        self.databases = {database}
        self._by_name: dict[QualifiedName, CatalogItem] = {}
        self._by_id: dict[GlobalId, CatalogItem] = {}
        self._next_id = 1

    # --- SqlCatalog ----------------------------------------------------------

    def resolve(self, name: tuple[str, ...]) -> CatalogItem:
        if not 1 <= len(name) <= 3:
            raise UnknownObject(
                f"improper qualified name (too many dotted names): {_display(name)}"
            )
        if len(name) == 1:
            for schema in self.search_path:
                item = self._by_name.get(QualifiedName(self.database, schema, name[0]))
                if item is not None:
                    return item
        else:
            item = self._by_name.get(self._qualified(name))
            if item is not None:
                return item
        raise UnknownObject(f"unknown catalog item '{_display(name)}'")

    def qualify(self, name: tuple[str, ...]) -> QualifiedName:
        if not 1 <= len(name) <= 3:
            raise UnknownObject(
                f"improper qualified name (too many dotted names): {_display(name)}"
            )
        if len(name) == 1:
            return QualifiedName(self.database, self.search_path[0], name[0])
        qualified = self._qualified(name)
        if not self.database_exists(qualified.database):
            raise UnknownDatabase(f"unknown database '{qualified.database}'")
        if not self.schema_exists(qualified.database, qualified.schema):
            raise UnknownSchema(f"unknown schema '{qualified.database}.{qualified.schema}'")
        return qualified

    def schema_exists(self, database: str, schema: str) -> bool:
        return (database, schema) in self.schemas

    def database_exists(self, database: str) -> bool:
        return database in self.databases or any(d == database for d, _ in self.schemas)

    def _qualified(self, name: tuple[str, ...]) -> QualifiedName:
        if len(name) == 2:
            return QualifiedName(self.database, name[0], name[1])
        return QualifiedName(*name)

    # --- building --------------------------------------------------------------

    def allocate_id(self) -> GlobalId:
        gid = GlobalId.user(self._next_id)
        self._next_id += 1
        return gid

    def add(self, item: CatalogItem) -> CatalogItem:
        """Add an item; names and ids must be new."""
        if item.name in self._by_name:
            raise DuplicateObject(f"catalog item '{item.name}' already exists")
        if item.id in self._by_id:
            raise DuplicateObject(f"catalog id {item.id} already exists")
        if item.id.kind == "u" and item.id.value >= self._next_id:
            self._next_id = item.id.value + 1
        self._by_name[item.name] = item
        self._by_id[item.id] = item
        return item

    def _new(
        self,
        name: str | tuple[str, ...] | QualifiedName,
        kind: ItemKind,
        desc: RelationDesc,
        **extra: object,
    ) -> CatalogItem:
        if isinstance(name, str):
            name = tuple(name.split("."))
        if isinstance(name, QualifiedName):
            qualified = name
        elif len(name) == 1:
            qualified = self.qualify(name)
        else:  # the builders create schemas as needed
            qualified = self._qualified(name)
        self.schemas.add((qualified.database, qualified.schema))
        item = CatalogItem(self.allocate_id(), qualified, kind, desc, **extra)  # type: ignore[arg-type]
        return self.add(item)

    def add_table(self, name: str | tuple[str, ...], desc: RelationDesc) -> CatalogItem:
        return self._new(name, ItemKind.TABLE, desc)

    def add_source(self, name: str | tuple[str, ...], desc: RelationDesc) -> CatalogItem:
        return self._new(name, ItemKind.SOURCE, desc)

    def add_view(
        self,
        name: str | tuple[str, ...],
        expr: RelationExpr,
        *,
        materialized: bool = False,
        depends_on: frozenset[GlobalId] | None = None,
    ) -> CatalogItem:
        kind = ItemKind.MATERIALIZED_VIEW if materialized else ItemKind.VIEW
        deps = depends_on if depends_on is not None else frozenset(expr.depends_on())
        return self._new(name, kind, expr.desc, expr=expr, depends_on=deps)

    def add_index(
        self, name: str | tuple[str, ...], on: GlobalId, key: tuple[int, ...]
    ) -> CatalogItem:
        target = self.get(on)
        if isinstance(name, str) and "." not in name:
            qualified: tuple[str, ...] = (target.name.database, target.name.schema, name)
        else:
            qualified = tuple(name.split(".")) if isinstance(name, str) else name
        return self._new(
            qualified, ItemKind.INDEX, target.desc, on=on, key=key, depends_on=frozenset({on})
        )

    def get(self, gid: GlobalId) -> CatalogItem:
        try:
            return self._by_id[gid]
        except KeyError:
            raise UnknownObject(f"unknown catalog item id {gid}") from None

    def items(self) -> list[CatalogItem]:
        return sorted(self._by_id.values(), key=lambda item: item.id)

    def names(self) -> dict[GlobalId, str]:
        """id -> qualified name text, for `explain(..., names=...)`."""
        return {gid: str(item.name) for gid, item in self._by_id.items()}

    # --- dependencies and DROP ------------------------------------------------

    def dependents(self, gid: GlobalId) -> list[CatalogItem]:
        """Items that name `gid` directly."""
        return [item for item in self.items() if gid in item.depends_on]

    def doomed(self, ids: tuple[GlobalId, ...] | list[GlobalId], cascade: bool) -> list[GlobalId]:
        """What DROP of `ids` removes: them, their tables' indexes, and with
        `cascade` everything depending on them; without it, DependentObjects
        names a dependent."""
        doomed: list[GlobalId] = []
        pending = list(ids)
        while pending:
            gid = pending.pop()
            if gid in doomed:
                continue
            self.get(gid)
            doomed.append(gid)
            for dependent in self.dependents(gid):
                if dependent.id in doomed or dependent.id in ids:
                    continue
                # An index is part of its table: PostgreSQL's DROP TABLE
                # drops it without CASCADE (Materialize's asks for CASCADE).
                is_part = dependent.kind is ItemKind.INDEX and dependent.on == gid
                if not cascade and not (is_part and self.get(gid).kind is ItemKind.TABLE):
                    raise DependentObjects(
                        f"cannot drop {self.get(gid).kind.sql_name} '{self.get(gid).name}': "
                        f"still depended upon by {dependent.kind.sql_name} '{dependent.name}'",
                        hint="Use DROP ... CASCADE to drop the dependent objects too.",
                    )
                pending.append(dependent.id)
        return doomed

    def drop(self, ids: tuple[GlobalId, ...] | list[GlobalId], cascade: bool) -> list[GlobalId]:
        """Drop `doomed(ids, cascade)`."""
        doomed = self.doomed(ids, cascade)
        for gid in doomed:
            item = self._by_id.pop(gid)
            del self._by_name[item.name]
        return doomed

    def rename(self, gid: GlobalId, new_name: QualifiedName) -> CatalogItem:
        """Give an item another name (its id, and so every plan that reads it, stay)."""
        item = self.get(gid)
        if new_name in self._by_name:
            raise DuplicateObject(f"catalog item '{new_name}' already exists")
        renamed = replace(item, name=new_name)
        del self._by_name[item.name]
        self._by_name[new_name] = renamed
        self._by_id[gid] = renamed
        return renamed

    def drop_schema(self, database: str, schema: str | None, cascade: bool) -> list[GlobalId]:
        """Drop a schema (or with `schema` None a database) and, with `cascade`,
        the items in it; without, refuse if it holds any."""
        inside = [
            item.id
            for item in self.items()
            if item.name.database == database and schema in (None, item.name.schema)
        ]
        what = f"schema '{database}.{schema}'" if schema is not None else f"database '{database}'"
        if inside and not cascade:
            raise DependentObjects(
                f"{what} cannot be dropped without CASCADE while it contains objects"
            )
        dropped = self.drop(inside, cascade=True) if inside else []
        self.schemas = {
            (d, s) for d, s in self.schemas if not (d == database and schema in (None, s))
        }
        if schema is None:
            self.databases.discard(database)
        return dropped
