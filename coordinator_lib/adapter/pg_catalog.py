"""The part of PostgreSQL's catalog client libraries query when they
connect: `pg_catalog.pg_type` (one row per type we speak, with the OIDs
pgwire sends) and the `regtype` conversions (`to_regtype('name')`,
`'name'::regtype`, `oid::regtype::text`).

psycopg's `TypeInfo.fetch` (SQLAlchemy's psycopg dialect looks up `hstore`
with it on connect) runs

    SELECT typname AS name, oid, typarray AS array_oid,
           oid::regtype::text AS regtype, typdelim AS delimiter
    FROM pg_type t WHERE t.oid = to_regtype(%(name)s) ORDER BY t.oid

There is no `regtype` type in the planner: the conversions are resolved
before planning (`adapter/session_functions.py`), a type name to its OID
(or NULL / 42704 for an unknown one) and an OID to its name by a CASE over
this table. OIDs are integers here (PostgreSQL's `oid` is unsigned 32-bit).
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator_lib.repr.relation import ColumnType, ScalarType

PG_CATALOG_NAMESPACE = 11  # pg_catalog's OID in PostgreSQL


@dataclass(frozen=True)
class PgTypeRow:
    oid: int
    typname: str
    regtype: str  # format_type / ::regtype::text
    typlen: int
    typarray: int
    typcategory: str
    scalar_type: ScalarType | None = None
    aliases: tuple[str, ...] = ()
    typelem: int = 0  # an array type's element type


PG_TYPE_ROWS: tuple[PgTypeRow, ...] = (
    PgTypeRow(16, "bool", "boolean", 1, 1000, "B", ScalarType.BOOLEAN),
    PgTypeRow(17, "bytea", "bytea", -1, 1001, "U", ScalarType.BYTEA),
    PgTypeRow(19, "name", "name", 64, 1003, "S"),
    PgTypeRow(20, "int8", "bigint", 8, 1016, "N", ScalarType.BIGINT),
    PgTypeRow(21, "int2", "smallint", 2, 1005, "N", ScalarType.SMALLINT),
    PgTypeRow(23, "int4", "integer", 4, 1007, "N", ScalarType.INTEGER, ("int",)),
    PgTypeRow(25, "text", "text", -1, 1009, "S", ScalarType.TEXT),
    PgTypeRow(26, "oid", "oid", 4, 1028, "N"),
    PgTypeRow(114, "json", "json", -1, 199, "U"),
    PgTypeRow(700, "float4", "real", 4, 1021, "N", ScalarType.REAL),
    PgTypeRow(701, "float8", "double precision", 8, 1022, "N", ScalarType.DOUBLE, ("float",)),
    PgTypeRow(1042, "bpchar", "character", -1, 1014, "S", ScalarType.BPCHAR),
    PgTypeRow(1043, "varchar", "character varying", -1, 1015, "S"),
    PgTypeRow(1082, "date", "date", 4, 1182, "D", ScalarType.DATE),
    PgTypeRow(1114, "timestamp", "timestamp without time zone", 8, 1115, "D", ScalarType.TIMESTAMP),
    PgTypeRow(
        1184, "timestamptz", "timestamp with time zone", 8, 1185, "D", ScalarType.TIMESTAMPTZ
    ),
    PgTypeRow(1083, "time", "time without time zone", 8, 1183, "D", ScalarType.TIME),
    PgTypeRow(1186, "interval", "interval", 16, 1187, "T", ScalarType.INTERVAL),
    PgTypeRow(1700, "numeric", "numeric", -1, 1231, "N", ScalarType.NUMERIC, ("decimal",)),
    PgTypeRow(3802, "jsonb", "jsonb", -1, 3807, "U", ScalarType.JSONB),
)

# The array types of the types above that have a ScalarType (array_agg's
# results): `_int4`, `integer[]`, ... with typelem the element's OID.
PG_TYPE_ROWS += tuple(
    PgTypeRow(
        row.typarray,
        f"_{row.typname}",
        f"{row.regtype}[]",
        -1,
        0,
        "A",
        row.scalar_type.array(),
        tuple(
            dict.fromkeys(
                f"{name}[]" for name in (row.typname, row.scalar_type.value, *row.aliases)
            )
        ),
        typelem=row.oid,
    )
    for row in PG_TYPE_ROWS
    if row.scalar_type is not None
)

_BY_OID = {row.oid: row for row in PG_TYPE_ROWS}
_BY_NAME: dict[str, PgTypeRow] = {}
for _row in PG_TYPE_ROWS:
    for _name in (_row.typname, _row.regtype, *_row.aliases):
        _BY_NAME[_name] = _row


def type_oid(name: str) -> int | None:
    """to_regtype: the OID of the type called `name` (its internal name, its
    SQL name or an alias, optionally `pg_catalog.`-qualified, any case), or
    None."""
    key = " ".join(name.strip().strip('"').lower().split())
    key = key.removeprefix("pg_catalog.")
    row = _BY_NAME.get(key)
    return row.oid if row is not None else None


VARCHAR_OID = 1043
BPCHAR_OID = 1042
_BY_SCALAR = {row.scalar_type: row for row in PG_TYPE_ROWS if row.scalar_type is not None}
# PostgreSQL's typmod of varchar(n) / char(n) is n plus its 4-byte header.
TYPMOD_HEADER = 4


INTERVAL_OID = 1186
# PostgreSQL's interval typmod: the qualifier's field bits << 16 | the seconds
# precision (INTERVAL_FULL_PRECISION: none given).
INTERVAL_FIELD_BITS = {"YEAR": 2, "MONTH": 1, "DAY": 3, "HOUR": 10, "MINUTE": 11, "SECOND": 12}
INTERVAL_FULL_RANGE = 0x7FFF
INTERVAL_FULL_PRECISION = 0xFFFF


def interval_range(fields: str) -> int:
    """The field mask of a qualifier (`DAY TO SECOND`: day, hour, minute and
    second bits), INTERVAL_FULL_RANGE for none."""
    if not fields:
        return INTERVAL_FULL_RANGE
    order = list(INTERVAL_FIELD_BITS)
    words = fields.split(" TO ")
    span = order[order.index(words[0]) : order.index(words[-1]) + 1]
    return sum(1 << INTERVAL_FIELD_BITS[word] for word in span)


def _interval_typmod(typmod: tuple[str, int]) -> int:
    fields, precision = typmod
    if not fields and precision >= 6:
        return -1
    digits = precision if precision < 6 else INTERVAL_FULL_PRECISION
    return interval_range(fields) << 16 | digits


def column_pg_type(column: ColumnType) -> tuple[PgTypeRow, int]:
    """The pg_type row and typmod (-1: none) of a column: text declared
    varchar or with a length is varchar[(n)], as it was declared; an
    interval keeps its qualifier and precision (`interval hour`)."""
    if column.interval_typmod is not None:
        return _BY_OID[INTERVAL_OID], _interval_typmod(column.interval_typmod)
    typmod = -1 if column.length is None else column.length + TYPMOD_HEADER
    if column.scalar_type is ScalarType.TEXT and (column.varchar or column.length is not None):
        return _BY_OID[VARCHAR_OID], typmod
    return _BY_SCALAR.get(column.scalar_type, _BY_SCALAR[ScalarType.TEXT]), typmod


def pg_type_rows() -> list[tuple]:
    """Rows of pg_catalog.pg_type, in the column order of its RelationDesc."""
    return [
        (
            r.oid,
            r.typname,
            PG_CATALOG_NAMESPACE,
            r.typlen,
            "b",
            r.typcategory,
            ",",
            r.typelem,
            r.typarray,
            0,
            False,
            0,
            0,
        )
        for r in PG_TYPE_ROWS
    ]


PG_TYPE_COLUMNS = (
    ("oid", "integer", False),
    ("typname", "text", False),
    ("typnamespace", "integer", False),
    ("typlen", "smallint", False),
    ("typtype", "text", False),
    ("typcategory", "text", False),
    ("typdelim", "text", False),
    ("typelem", "integer", False),
    ("typarray", "integer", False),
    ("typbasetype", "integer", False),
    ("typnotnull", "boolean", False),
    ("typrelid", "integer", False),
    ("typcollation", "integer", False),  # 0: Tidemark has the default collation only
)
