"""`pg_catalog.pg_attribute` (one row per column of a user relation) and the
catalogs psql's `\\d name` joins it with that are empty in Tidemark: column
defaults (`pg_attrdef`), collations, comments (`pg_description`), indexes'
catalog rows (`pg_index`), inheritance, rewrite rules, access methods and
row-level security policies. psql queries each of them while describing a
relation, so they must exist and plan; their rows are what Tidemark has,
which is none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator_lib.adapter.pg_catalog import column_pg_type
from coordinator_lib.adapter.pg_class import user_relations
from coordinator_lib.sql.catalog import ItemKind

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator

Row = tuple[Any, ...]

PG_ATTRIBUTE_COLUMNS = (
    ("attrelid", "integer", False),
    ("attname", "text", False),
    ("atttypid", "integer", False),
    ("atttypmod", "integer", False),
    ("attnum", "smallint", False),
    ("attlen", "smallint", False),
    ("attnotnull", "boolean", False),
    ("atthasdef", "boolean", False),
    ("attisdropped", "boolean", False),
    ("attcollation", "integer", False),
    ("attidentity", "text", False),
    ("attgenerated", "text", False),
    ("attstorage", "text", False),
    ("attstattarget", "integer", False),
    ("attndims", "integer", False),
)

# name -> columns of the catalogs that are always empty here.
EMPTY_CATALOGS: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "pg_attrdef": (
        ("oid", "integer", False),
        ("adrelid", "integer", False),
        ("adnum", "smallint", False),
        ("adbin", "text", False),
    ),
    "pg_collation": (
        ("oid", "integer", False),
        ("collname", "text", False),
        ("collnamespace", "integer", False),
    ),
    "pg_description": (
        ("objoid", "integer", False),
        ("classoid", "integer", False),
        ("objsubid", "integer", False),
        ("description", "text", False),
    ),
    "pg_index": (
        ("indexrelid", "integer", False),
        ("indrelid", "integer", False),
        ("indnatts", "smallint", False),
        ("indisunique", "boolean", False),
        ("indisprimary", "boolean", False),
        ("indisclustered", "boolean", False),
        ("indisvalid", "boolean", False),
        ("indisreplident", "boolean", False),
        ("indkey", "text", False),
    ),
    "pg_inherits": (
        ("inhrelid", "integer", False),
        ("inhparent", "integer", False),
        ("inhseqno", "integer", False),
        ("inhdetachpending", "boolean", False),
    ),
    "pg_rewrite": (
        ("oid", "integer", False),
        ("rulename", "text", False),
        ("ev_class", "integer", False),
    ),
    "pg_am": (("oid", "integer", False), ("amname", "text", False)),
    "pg_policy": (
        ("oid", "integer", False),
        ("polname", "text", False),
        ("polrelid", "integer", False),
        ("polcmd", "text", False),
        ("polpermissive", "boolean", False),
        ("polroles", "integer[]", False),
        ("polqual", "text", True),
        ("polwithcheck", "text", True),
    ),
}

# PostgreSQL's storage strategy: 'p'lain for fixed-width types, e'x'tended otherwise.
_VARLENA = -1


def pg_attribute_rows(coord: Coordinator) -> list[Row]:
    rows: list[Row] = []
    for oid, item in user_relations(coord):
        if item.kind is ItemKind.INDEX:
            continue
        for n, (name, column) in enumerate(zip(item.desc.names, item.desc.types, strict=True)):
            pg_type, typmod = column_pg_type(column)
            rows.append(
                (
                    oid,
                    name,
                    pg_type.oid,
                    typmod,
                    n + 1,
                    pg_type.typlen,
                    not column.nullable,
                    False,
                    False,
                    0,
                    "",
                    "",
                    "x" if pg_type.typlen == _VARLENA else "p",
                    -1,
                    1 if pg_type.typelem else 0,
                )
            )
    return rows
