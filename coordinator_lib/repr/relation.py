"""RelationDesc: the column names, types, nullability and keys of a collection.

It is the one schema every layer derives its own from: the Parquet/Arrow
schema of persisted batches, the Spark schema of DataFrames, the pandera
schema that checks rows, and PostgreSQL type OIDs on the wire.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from coordinator_lib.repr.errors import InvalidRow
from coordinator_lib.repr.interval import Interval, from_struct
from coordinator_lib.repr.nan import one_nan
from coordinator_lib.repr.update import Row

# Columns persist adds to every batch; user columns may not use these names.
TIME_COLUMN = "__time"
DIFF_COLUMN = "__diff"
RESERVED_COLUMNS = (TIME_COLUMN, DIFF_COLUMN)


class ScalarType(Enum):
    """SQL scalar types (PostgreSQL names)."""

    BOOLEAN = "boolean"
    SMALLINT = "smallint"
    INTEGER = "integer"
    BIGINT = "bigint"
    REAL = "real"
    DOUBLE = "double precision"
    NUMERIC = "numeric"
    TEXT = "text"
    # char(n): text blank-padded to its column's length; compares and
    # converts to text without its trailing blanks (sql/scalar.py).
    BPCHAR = "character"
    BYTEA = "bytea"
    DATE = "date"
    TIMESTAMP = "timestamp"
    TIMESTAMPTZ = "timestamp with time zone"
    JSONB = "jsonb"
    # Months, days, microseconds apart (repr/interval.py), stored as a struct.
    INTERVAL = "interval"
    # A time of day (datetime.time), to the microsecond.
    TIME = "time"
    # Materialize's map of text keys to text values, carried as its
    # canonical JSON object text (repr/text_map.py).
    MAP_TEXT = "map[text=>text]"
    # Maps of other value types (Materialize's `map[text=>T]`), named as the
    # lists are, by their value type's name: `map_value` reads it back. Each
    # is carried as map[text=>text] is, every value as its type's text
    # output (a map value as its own carried text): repr/text_map.py.
    MAP_BOOLEAN = "map[text=>boolean]"
    MAP_SMALLINT = "map[text=>smallint]"
    MAP_INTEGER = "map[text=>integer]"
    MAP_BIGINT = "map[text=>bigint]"
    MAP_DOUBLE = "map[text=>double precision]"
    MAP_NUMERIC = "map[text=>numeric]"
    MAP_JSONB = "map[text=>jsonb]"
    # Maps of maps, one level (the enum names each type it has).
    MAP_MAP_TEXT = "map[text=>map[text=>text]]"
    MAP_MAP_INTEGER = "map[text=>map[text=>integer]]"
    MAP_MAP_BIGINT = "map[text=>map[text=>bigint]]"
    MAP_MAP_NUMERIC = "map[text=>map[text=>numeric]]"
    MAP_MAP_MAP_TEXT = "map[text=>map[text=>map[text=>text]]]"
    # One-dimensional arrays of the types above (array_agg's results), values
    # are tuples (rows stay hashable); elements may be NULL.
    BOOLEAN_ARRAY = "boolean[]"
    SMALLINT_ARRAY = "smallint[]"
    INTEGER_ARRAY = "integer[]"
    BIGINT_ARRAY = "bigint[]"
    REAL_ARRAY = "real[]"
    DOUBLE_ARRAY = "double precision[]"
    NUMERIC_ARRAY = "numeric[]"
    TEXT_ARRAY = "text[]"
    BPCHAR_ARRAY = "character[]"
    BYTEA_ARRAY = "bytea[]"
    DATE_ARRAY = "date[]"
    TIMESTAMP_ARRAY = "timestamp[]"
    TIMESTAMPTZ_ARRAY = "timestamp with time zone[]"
    JSONB_ARRAY = "jsonb[]"
    INTERVAL_ARRAY = "interval[]"
    TIME_ARRAY = "time[]"
    MAP_TEXT_ARRAY = "map[text=>text][]"
    # Materialize's one-layer lists of the types above (`int list`, list_agg's
    # results): held as arrays are (tuples, Arrow lists, Spark arrays), printed
    # as arrays are (`{1,2,NULL}`); lists of lists are not supported.
    BOOLEAN_LIST = "boolean list"
    SMALLINT_LIST = "smallint list"
    INTEGER_LIST = "integer list"
    BIGINT_LIST = "bigint list"
    REAL_LIST = "real list"
    DOUBLE_LIST = "double precision list"
    NUMERIC_LIST = "numeric list"
    TEXT_LIST = "text list"
    BPCHAR_LIST = "character list"
    BYTEA_LIST = "bytea list"
    DATE_LIST = "date list"
    TIMESTAMP_LIST = "timestamp list"
    TIMESTAMPTZ_LIST = "timestamp with time zone list"
    JSONB_LIST = "jsonb list"
    INTERVAL_LIST = "interval list"
    TIME_LIST = "time list"
    MAP_TEXT_LIST = "map[text=>text] list"

    def to_arrow(self) -> pa.DataType:
        element = self.element
        if element is not None:
            return pa.list_(pa.field("item", element.to_arrow(), nullable=True))
        return _ARROW_TYPES[self]

    @property
    def element(self) -> ScalarType | None:
        """The element type of an array or list type; None for other types."""
        if self.value.endswith("[]"):
            return ScalarType(self.value[:-2])
        if self.value.endswith(" list"):
            return ScalarType(self.value[:-5])
        return None

    @property
    def map_value(self) -> ScalarType | None:
        """The value type of a map type (`map[text=>T]`); None for other types."""
        if self.element is None and self.value.startswith(_MAP_PREFIX):
            return ScalarType(self.value[len(_MAP_PREFIX) : -1])
        return None

    @property
    def is_map(self) -> bool:
        return self.map_value is not None

    def map_of(self) -> ScalarType:
        """The map type `map[text=>self]`; ValueError if Tidemark has none."""
        try:
            return ScalarType(f"{_MAP_PREFIX}{self.value}]")
        except ValueError:
            raise ValueError(f"no map type with values of type {self.value}") from None

    @property
    def is_array(self) -> bool:
        return self.value.endswith("[]")

    @property
    def is_list(self) -> bool:
        return self.value.endswith(" list")

    def list(self) -> ScalarType:
        """The list type of this (non-array, non-list) type."""
        if self.element is not None:
            raise ValueError(f"no lists of arrays or lists: {self.value}")
        return ScalarType(self.value + " list")

    def array(self) -> ScalarType:
        """The array type of this (non-array, non-list) type."""
        if self.element is not None:
            raise ValueError(f"no arrays of arrays: {self.value}")
        return ScalarType(self.value + "[]")


_MAP_PREFIX = "map[text=>"

_ARROW_TYPES: dict[ScalarType, pa.DataType] = {
    ScalarType.BOOLEAN: pa.bool_(),
    ScalarType.SMALLINT: pa.int16(),
    ScalarType.INTEGER: pa.int32(),
    ScalarType.BIGINT: pa.int64(),
    ScalarType.REAL: pa.float32(),
    ScalarType.DOUBLE: pa.float64(),
    ScalarType.NUMERIC: pa.decimal128(38, 10),
    ScalarType.TEXT: pa.string(),
    ScalarType.BPCHAR: pa.string(),
    ScalarType.BYTEA: pa.binary(),
    ScalarType.DATE: pa.date32(),
    ScalarType.TIMESTAMP: pa.timestamp("us"),
    ScalarType.TIMESTAMPTZ: pa.timestamp("us", tz="UTC"),
    ScalarType.TIME: pa.time64("us"),
    # jsonb is stored as its canonical text so Spark and pyarrow agree on it.
    ScalarType.JSONB: pa.string(),
    **{st: pa.string() for st in ScalarType if st.is_map},
    # A struct, not Arrow's month_day_nano_interval: Parquet cannot store
    # that (its INTERVAL is months, days, milliseconds), and Spark reads a
    # struct back as a struct.
    ScalarType.INTERVAL: pa.struct(
        [
            pa.field("months", pa.int32()),
            pa.field("days", pa.int32()),
            pa.field("micros", pa.int64()),
        ]
    ),
}

_INT_RANGES = {
    ScalarType.SMALLINT: (-(2**15), 2**15 - 1),
    ScalarType.INTEGER: (-(2**31), 2**31 - 1),
    ScalarType.BIGINT: (-(2**63), 2**63 - 1),
}

_ALIASES = {
    "bool": ScalarType.BOOLEAN,
    "int2": ScalarType.SMALLINT,
    "int": ScalarType.INTEGER,
    "int4": ScalarType.INTEGER,
    "int8": ScalarType.BIGINT,
    "float4": ScalarType.REAL,
    "float": ScalarType.DOUBLE,
    "float8": ScalarType.DOUBLE,
    "double": ScalarType.DOUBLE,
    "decimal": ScalarType.NUMERIC,
    "varchar": ScalarType.TEXT,
    "bpchar": ScalarType.BPCHAR,
    "char": ScalarType.BPCHAR,
    "string": ScalarType.TEXT,
    "timestamptz": ScalarType.TIMESTAMPTZ,
    "json": ScalarType.JSONB,
}


def parse_scalar_type(name: str) -> ScalarType:
    """A ScalarType from a PostgreSQL type name or common alias."""
    key = name.strip().lower()
    if key.endswith("[]"):
        return parse_scalar_type(key[:-2]).array()
    if key.endswith(" list"):
        return parse_scalar_type(key[:-5]).list()
    if key in _ALIASES:
        return _ALIASES[key]
    if key.startswith(_MAP_PREFIX) and key.endswith("]"):
        return parse_scalar_type(key[len(_MAP_PREFIX) : -1]).map_of()
    try:
        return ScalarType(key)
    except ValueError:
        raise ValueError(f"unknown type {name!r}") from None


@dataclass(frozen=True)
class ColumnType:
    """A column's type. `length` is the declared `n` of `varchar(n)` (on
    text) or `char(n)` (on bpchar): PostgreSQL's type modifier, which writes
    into the column enforce (sql/typmod.py) and the catalog shows. `varchar`:
    text declared `varchar` / `character varying`, with or without a length,
    which the catalog and pgwire show as PostgreSQL's varchar (OID 1043).
    `interval_typmod`: an interval column's qualifier and seconds precision
    (`interval hour` is ("HOUR", 6), `interval(2)` ("", 2)), to which a write
    restricts the value (sql/typmod.py)."""

    scalar_type: ScalarType
    nullable: bool = True
    length: int | None = None
    varchar: bool = False
    interval_typmod: tuple[str, int] | None = None


def common_column_type(scalar: ScalarType, nullable: bool, types: list[ColumnType]) -> ColumnType:
    """The type of a value that is any one of `types` (UNION's columns, CASE's
    branches, COALESCE's arguments), all already of `scalar`, in the order
    written. As PostgreSQL: a length (`varchar(n)`, `char(n)`) only when every
    input has the same one (select_common_typmod); varchar (OID 1043) when
    the first input is (select_common_type keeps the first of text and
    varchar, each implicitly castable to the other)."""
    lengths = {(t.length, t.varchar) for t in types}
    same = len(lengths) == 1 and all(t.scalar_type is scalar for t in types)
    length = types[0].length if same and types else None
    varchar = scalar is ScalarType.TEXT and bool(types) and types[0].varchar
    return ColumnType(scalar, nullable, length, varchar)


@dataclass(frozen=True)
class RelationDesc:
    """Names and types of a relation's columns, plus its known unique keys
    (each a tuple of column indexes)."""

    names: tuple[str, ...]
    types: tuple[ColumnType, ...]
    keys: tuple[tuple[int, ...], ...] = field(default=())

    def __post_init__(self) -> None:
        if len(self.names) != len(self.types):
            raise ValueError(
                f"RelationDesc has {len(self.names)} names but {len(self.types)} types"
            )
        seen: set[str] = set()
        for name in self.names:
            if name in RESERVED_COLUMNS:
                raise ValueError(f"column name {name!r} is reserved")
            if name in seen:
                raise ValueError(f"column name {name!r} appears twice")
            seen.add(name)
        for key in self.keys:
            for index in key:
                if not 0 <= index < len(self.names):
                    raise ValueError(f"key column index {index} out of range")

    @staticmethod
    def of(*columns: tuple[str, str] | tuple[str, str, bool], keys: tuple = ()) -> RelationDesc:
        """Shorthand: `RelationDesc.of(("id", "bigint", False), ("name", "text"))`."""
        names, types = [], []
        for column in columns:
            name, type_name = column[0], column[1]
            nullable = column[2] if len(column) > 2 else True
            names.append(name)
            types.append(ColumnType(parse_scalar_type(type_name), bool(nullable)))
        return RelationDesc(tuple(names), tuple(types), tuple(tuple(k) for k in keys))

    @property
    def arity(self) -> int:
        return len(self.names)

    def arrow_schema(self, with_time_diff: bool = False) -> pa.Schema:
        """The Arrow schema of the columns (and `__time`, `__diff`), made
        once per desc: every commit and read asks for it."""
        memo = self.__dict__.get("_arrow_schemas")
        if memo is None:
            memo = (self._make_arrow_schema(False), self._make_arrow_schema(True))
            # Not a field: eq, hash and repr ignore it.
            object.__setattr__(self, "_arrow_schemas", memo)
        return memo[1] if with_time_diff else memo[0]

    def _make_arrow_schema(self, with_time_diff: bool) -> pa.Schema:
        fields = [
            pa.field(name, ty.scalar_type.to_arrow(), nullable=ty.nullable)
            for name, ty in zip(self.names, self.types, strict=True)
        ]
        if with_time_diff:
            fields += [
                pa.field(TIME_COLUMN, pa.int64(), nullable=False),
                pa.field(DIFF_COLUMN, pa.int64(), nullable=False),
            ]
        return pa.schema(fields)

    def validate_row(self, row: Row, position: int | None = None) -> Row:
        """Check one row; return it as a tuple. Raises InvalidRow naming the
        row position and column."""
        where = f"row {position}" if position is not None else "row"
        if not isinstance(row, tuple | list):
            raise InvalidRow(f"{where}: expected a tuple of {self.arity} values, got {row!r}")
        if len(row) != self.arity:
            raise InvalidRow(f"{where}: expected {self.arity} columns, got {len(row)}")
        for value, name, ty in zip(row, self.names, self.types, strict=True):
            problem = _check_value(value, ty)
            if problem:
                raise InvalidRow(f"{where}, column {name!r}: {problem}")
        return tuple(row)

    def to_json(self) -> dict:
        return {
            "names": list(self.names),
            "types": [_type_json(t) for t in self.types],
            "keys": [list(k) for k in self.keys],
        }

    @staticmethod
    def from_json(data: dict) -> RelationDesc:
        return RelationDesc(
            tuple(data["names"]),
            tuple(
                ColumnType(
                    ScalarType(t[0]),
                    bool(t[1]),
                    t[2] if len(t) > 2 else None,
                    bool(t[3]) if len(t) > 3 else False,
                    (t[4][0], t[4][1]) if len(t) > 4 else None,
                )
                for t in data["types"]
            ),
            tuple(tuple(k) for k in data.get("keys", [])),
        )


def _type_json(t: ColumnType) -> list[Any]:
    """[type, nullable], then length and varchar, then interval_typmod, each only
    when set (descs stored before a field existed read the same)."""
    head = [t.scalar_type.value, t.nullable]
    if t.interval_typmod is not None:
        return [*head, t.length, t.varchar, list(t.interval_typmod)]
    return head + ([t.length, True] if t.varchar else [] if t.length is None else [t.length])


def _check_value(value: Any, ty: ColumnType) -> str | None:
    """None if `value` fits the column type, else what is wrong with it."""
    if value is None:
        return None if ty.nullable else "NULL in a NOT NULL column"
    st = ty.scalar_type
    expected = st.value
    element = st.element
    if element is not None:
        if not isinstance(value, tuple):
            return f"expected {expected} as a tuple, got {type(value).__name__} {value!r}"
        for item in value:
            problem = _check_value(item, ColumnType(element, True))
            if problem:
                return f"array element: {problem}"
        return None
    if st is ScalarType.BOOLEAN:
        ok = isinstance(value, bool)
    elif st in _INT_RANGES:
        if not isinstance(value, int) or isinstance(value, bool):
            ok = False
        else:
            low, high = _INT_RANGES[st]
            if not low <= value <= high:
                return f"{value} is out of range for {expected}"
            ok = True
    elif st in (ScalarType.REAL, ScalarType.DOUBLE):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif st is ScalarType.NUMERIC:
        ok = isinstance(value, int | decimal.Decimal) and not isinstance(value, bool)
    elif st in (ScalarType.TEXT, ScalarType.BPCHAR) or st.is_map:
        ok = isinstance(value, str)
    elif st is ScalarType.BYTEA:
        ok = isinstance(value, bytes)
    elif st is ScalarType.DATE:
        ok = isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    elif st is ScalarType.TIMESTAMP:
        ok = isinstance(value, dt.datetime) and value.tzinfo is None
    elif st is ScalarType.TIMESTAMPTZ:
        ok = isinstance(value, dt.datetime) and value.tzinfo is not None
    elif st is ScalarType.INTERVAL:
        ok = isinstance(value, Interval)
    elif st is ScalarType.TIME:
        ok = isinstance(value, dt.time)
    elif st is ScalarType.JSONB:
        if not isinstance(value, str):
            return f"expected jsonb text, got {type(value).__name__}"
        try:
            json.loads(value)
        except ValueError as error:
            return f"invalid jsonb: {error}"
        ok = True
    else:  # pragma: no cover - every ScalarType is handled above
        return f"unsupported type {expected}"
    if ok:
        return None
    return f"expected {expected}, got {type(value).__name__} {value!r}"


def column_pylist(column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """`column.to_pylist()`, with list (array) values as tuples so rows that
    hold them stay hashable."""
    values = column.to_pylist()
    kind = column.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        if pa.types.is_struct(kind.value_type):
            return [None if v is None else tuple(map(from_struct, v)) for v in values]
        if pa.types.is_floating(kind.value_type):
            return [None if v is None else one_nan(tuple(v)) for v in values]
        return [None if v is None else tuple(v) for v in values]
    if pa.types.is_struct(kind):
        return [from_struct(v) for v in values]
    if pa.types.is_floating(kind) and pc.any(pc.is_nan(column)).as_py():
        return [one_nan(v) for v in values]
    return values


def arrays_to_tuples(row: Any) -> tuple:
    """A row read from Spark (or any sequence of values) with list values as
    tuples."""
    return tuple(one_nan(tuple(v)) if isinstance(v, list) else one_nan(from_struct(v)) for v in row)
