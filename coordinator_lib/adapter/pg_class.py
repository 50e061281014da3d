"""`pg_catalog.pg_namespace`, `pg_catalog.pg_class` and
`pg_table_is_visible(oid)`: what SQLAlchemy's `has_table` (and so pandas'
`DataFrame.to_sql`) asks before it creates or appends to a table:

    SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class
    JOIN pg_catalog.pg_namespace ON pg_namespace.oid = pg_class.relnamespace
    WHERE pg_class.relname IN ($1::VARCHAR) AND pg_class.relkind = ANY (ARRAY[...])
      AND pg_catalog.pg_table_is_visible(pg_class.oid) AND pg_namespace.nspname != $7

OIDs are derived from ids, stable while an item exists: a user item `u<n>`
is 20000 + n (PostgreSQL's user OIDs start at 16384), a schema is 16384 +
its position in the catalog's schema list; `pg_catalog` is 11.
`pg_table_is_visible` is replaced before planning by a membership test
against the relations of the session's database on its search path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlglot import exp

from coordinator_lib.adapter import privileges
from coordinator_lib.adapter.acl import owner_of
from coordinator_lib.adapter.pg_catalog import PG_CATALOG_NAMESPACE
from coordinator_lib.sql.catalog import CatalogItem, ItemKind

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator
    from coordinator_lib.adapter.session import Session

Row = tuple[Any, ...]

PG_NAMESPACE_COLUMNS = (("oid", "integer", False), ("nspname", "text", False))
# The columns psql's describe commands read (\\d name asks a 9.5 server for
# all of them); Tidemark has no rules, triggers, row security, inheritance,
# TOAST or tablespaces, so those are constant.
PG_CLASS_COLUMNS = (
    ("oid", "integer", False),
    ("relname", "text", False),
    ("relnamespace", "integer", False),
    ("relkind", "text", False),
    ("relowner", "integer", False),
    ("relchecks", "smallint", False),
    ("relhasindex", "boolean", False),
    ("relhasrules", "boolean", False),
    ("relhastriggers", "boolean", False),
    ("relrowsecurity", "boolean", False),
    ("relforcerowsecurity", "boolean", False),
    ("relhasoids", "boolean", False),
    ("relispartition", "boolean", False),
    ("reltablespace", "integer", False),
    ("reloftype", "integer", False),
    ("relpersistence", "text", False),
    ("relreplident", "text", False),
    ("reltoastrelid", "integer", False),
    ("relam", "integer", False),
    ("relnatts", "smallint", False),
)
_USER_OID_BASE = 20000
_SCHEMA_OID_BASE = 16384
_RELKIND = {
    ItemKind.TABLE: "r",
    ItemKind.SOURCE: "r",
    ItemKind.VIEW: "v",
    ItemKind.MATERIALIZED_VIEW: "m",
    ItemKind.INDEX: "i",
}


def _schema_oids(coord: Coordinator) -> dict[tuple[str, str], int]:
    return {key: _SCHEMA_OID_BASE + n for n, key in enumerate(coord.catalog.schemas())}


def _relations(coord: Coordinator) -> list[CatalogItem]:
    return [i for i in coord.catalog.items() if i.kind in _RELKIND]


def relation_oid(item: CatalogItem) -> int:
    return _USER_OID_BASE + item.id.value


def user_relations(coord: Coordinator) -> list[tuple[int, CatalogItem]]:
    """(OID, item) of every user relation (what pg_class lists)."""
    return [(relation_oid(item), item) for item in _relations(coord)]


def pg_namespace_rows(coord: Coordinator) -> list[Row]:
    rows: list[Row] = [(PG_CATALOG_NAMESPACE, "pg_catalog")]
    rows += [(oid, schema) for (_, schema), oid in _schema_oids(coord).items()]
    return rows


def pg_class_rows(coord: Coordinator) -> list[Row]:
    schemas = _schema_oids(coord)
    roles = privileges.role_oids(coord)
    state = coord.catalog.state
    return [
        (
            relation_oid(item),
            item.name.item,
            schemas.get((item.name.database, item.name.schema), 0),
            _RELKIND[item.kind],
            roles.get(owner_of(state, f"item:{item.id}") or "", 0),
            0,
            False,
            False,
            False,
            False,
            False,
            False,
            False,
            0,
            0,
            "p",
            "d",
            0,
            0,
            0 if item.kind is ItemKind.INDEX else item.desc.arity,
        )
        for item in _relations(coord)
    ]


def _is_visibility_call(node: exp.Expr) -> bool:
    if isinstance(node, exp.Dot) and str(node.this).lower() == "pg_catalog":
        node = node.expression
    return isinstance(node, exp.Anonymous) and str(node.this).lower() == "pg_table_is_visible"


def substitute_table_visibility(
    statement: exp.Expr, coord: Coordinator, session: Session
) -> exp.Expr:
    """`pg_table_is_visible(x)` -> `x IN (<oids of the relations of the session's
    database in its search path>)` (FALSE when there are none)."""
    if not any(_is_visibility_call(n) for n in statement.find_all(exp.Anonymous, exp.Dot)):
        return statement
    path = set(session.search_path)
    oids = [
        exp.Literal.number(relation_oid(item))
        for item in _relations(coord)
        if item.name.database == session.database and item.name.schema in path
    ]

    def replace(node: exp.Expr) -> exp.Expr:
        if not _is_visibility_call(node):
            return node
        call = node.expression if isinstance(node, exp.Dot) else node
        if not oids:
            return exp.false()
        return exp.In(this=call.expressions[0].copy(), expressions=[o.copy() for o in oids])

    return statement.transform(replace, copy=True)
