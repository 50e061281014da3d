"""`information_schema.tables` and `information_schema.columns`: the SQL
standard's catalog views that ORMs and BI tools read to list relations and
their columns. Rows are those of the user relations (indexes excluded) in
every database; `data_type` is PostgreSQL's SQL name of the column's type
(`ARRAY` for arrays, as PostgreSQL reports them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from coordinator_lib.adapter.pg_catalog import column_pg_type
from coordinator_lib.sql.catalog import ItemKind

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator

Row = tuple[Any, ...]

INFORMATION_SCHEMA_TABLES = (
    ("table_catalog", "text", False),
    ("table_schema", "text", False),
    ("table_name", "text", False),
    ("table_type", "text", False),
)
INFORMATION_SCHEMA_COLUMNS = (
    ("table_catalog", "text", False),
    ("table_schema", "text", False),
    ("table_name", "text", False),
    ("column_name", "text", False),
    ("ordinal_position", "integer", False),
    ("column_default", "text"),
    ("is_nullable", "text", False),
    ("data_type", "text", False),
    ("character_maximum_length", "integer"),
    ("numeric_precision", "integer"),
    ("numeric_scale", "integer"),
)
_TABLE_TYPES = {
    ItemKind.TABLE: "BASE TABLE",
    ItemKind.SOURCE: "BASE TABLE",
    ItemKind.VIEW: "VIEW",
    ItemKind.MATERIALIZED_VIEW: "MATERIALIZED VIEW",
}


def tables_rows(coord: Coordinator) -> list[Row]:
    return [
        (i.name.database, i.name.schema, i.name.item, _TABLE_TYPES[i.kind])
        for i in coord.catalog.items()
        if i.kind in _TABLE_TYPES
    ]


def columns_rows(coord: Coordinator) -> list[Row]:
    rows: list[Row] = []
    for item in coord.catalog.items():
        if item.kind not in _TABLE_TYPES:
            continue
        for n, (name, column) in enumerate(zip(item.desc.names, item.desc.types, strict=True)):
            pg_type, _ = column_pg_type(column)
            data_type = "ARRAY" if pg_type.typelem else pg_type.regtype
            nullable = "YES" if column.nullable else "NO"
            length = column.length
            rows.append(
                (*item.name.parts, name, n + 1, None, nullable, data_type, length, None, None)
            )
    return rows
