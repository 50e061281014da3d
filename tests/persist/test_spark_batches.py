"""Spark and pyarrow read each other's batches, and consolidate alike.

Both engines touch the same Parquet files (pyarrow for small batches, Spark
for big ones), so every ScalarType, NULLs included, must round-trip through
either writer and either reader unchanged.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession

from coordinator_lib.persist import batch
from coordinator_lib.persist.blob import BlobStore
from coordinator_lib.persist.spark_batches import (
    conform,
    consolidate_dataframe,
    read_batches_dataframe,
    spark_schema,
    write_batch_dataframe,
)
from coordinator_lib.repr.interval import Interval
from coordinator_lib.repr.relation import DIFF_COLUMN, TIME_COLUMN, RelationDesc, ScalarType
from coordinator_lib.repr.update import Update, row_sort_key

pytestmark = pytest.mark.spark

UTC = dt.UTC

# One column of every ScalarType but arrays and lists; `i` is NOT NULL, every other nullable.
ALL_TYPES = RelationDesc.of(
    ("b", "boolean"),
    ("s", "smallint"),
    ("i", "integer", False),
    ("l", "bigint"),
    ("r", "real"),
    ("d", "double precision"),
    ("n", "numeric"),
    ("t", "text"),
    ("by", "bytea"),
    ("dt", "date"),
    ("ts", "timestamp"),
    ("tz", "timestamp with time zone"),
    ("j", "jsonb"),
    ("iv", "interval"),
    ("tm", "time"),
    ("bc", "character"),
    ("mp", "map[text=>text]"),
    ("mm", "map[text=>map[text=>integer]]"),
)
# Every map type is carried as map[text=>text] is (its JSON object text):
# two of them stand for all.
_MAPS = {ScalarType.MAP_TEXT, ScalarType.MAP_MAP_INTEGER}
assert {t.scalar_type for t in ALL_TYPES.types} == {
    s for s in ScalarType if s.element is None and (not s.is_map or s in _MAPS)
}

ALL_TYPES_UPDATES = [
    Update(
        (
            True,
            7,
            1,
            2**40,
            1.5,
            2.25,
            decimal.Decimal("1.5"),
            "hello",
            b"\x00\xffbytes",
            dt.date(2024, 2, 29),
            dt.datetime(2024, 2, 29, 23, 59, 58, 123456),
            dt.datetime(2024, 2, 29, 23, 59, 58, 654321, tzinfo=UTC),
            '{"a": 1}',
            Interval(14, -3, 4_000_000_123),
            dt.time(23, 59, 58, 123456),
            "ab  ",
            '{"a":"1","b":null}',
            '{"a":"{\\"b\\":\\"1\\"}","c":null}',
        ),
        1_700_000_000_000,
        1,
    ),
    Update(
        (
            False,
            -(2**15),
            -(2**31),
            2**63 - 1,
            -0.25,
            -1e300,
            decimal.Decimal("-1234567890123456789012345678.0123456789"),
            "ünïcødé ✓",
            b"",
            dt.date(1969, 12, 31),
            dt.datetime(1900, 1, 1, 0, 0, 0, 1),
            # Not UTC: stored as the same instant in UTC.
            dt.datetime(2000, 1, 1, 5, 30, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
            "[]",
            Interval(0, 0, -1),
            dt.time(0, 0),
            "",
            "{}",
            "{}",
        ),
        1_700_000_000_001,
        -3,
    ),
    Update(
        (
            None,
            None,
            2,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        ),
        5,
        2,
    ),
]


def _normalize(value: Any, scalar_type: ScalarType) -> Any:
    """One Python value per SQL value, whichever engine produced it."""
    if value is None:
        return None
    if scalar_type is ScalarType.BYTEA:
        return bytes(value)
    if scalar_type is ScalarType.TIMESTAMPTZ:
        # Spark collects timestamptz as a naive datetime in the Python
        # process's local time zone; astimezone() reads naive values as local.
        return value.astimezone(UTC)
    if scalar_type is ScalarType.INTERVAL and not isinstance(value, Interval):
        return Interval(value["months"], value["days"], value["micros"])  # Spark's Row
    return value


def _normalize_row(row: tuple, desc: RelationDesc) -> tuple:
    return tuple(_normalize(v, t.scalar_type) for v, t in zip(row, desc.types, strict=True))


def _sorted_updates(updates: list[Update], desc: RelationDesc) -> list[Update]:
    normalized = [Update(_normalize_row(tuple(u.row), desc), u.time, u.diff) for u in updates]
    return sorted(normalized, key=lambda u: (row_sort_key(u.row), u.time, u.diff))


def _spark_updates(df: DataFrame, desc: RelationDesc) -> list[Update]:
    out = []
    for record in df.collect():
        values = tuple(record)
        out.append(Update(values[: desc.arity], values[desc.arity], values[desc.arity + 1]))
    return _sorted_updates(out, desc)


def _pyarrow_updates(batch_dir: Path, desc: RelationDesc) -> list[Update]:
    store = BlobStore(batch_dir.parent.parent)
    files = store.batch_files(batch_dir.parent.name, batch_dir.name)
    table = batch.read_batch_table(files, desc)
    return _sorted_updates(batch.table_to_updates(table, desc), desc)


def _spark_frame(spark: SparkSession, updates: list[Update], desc: RelationDesc) -> DataFrame:
    rows = [(*(_spark_value(v) for v in u.row), u.time, u.diff) for u in updates]
    return spark.createDataFrame(rows, spark_schema(desc))


def _spark_value(value: Any) -> Any:
    """A Python value as Spark's createDataFrame takes it (an interval is a struct)."""
    if isinstance(value, Interval):
        return (value.months, value.days, value.micros)
    return value


def test_spark_reads_pyarrow_batch(spark: SparkSession, tmp_path: Path) -> None:
    batch_dir = tmp_path / "s1" / "b1"
    batch.write_batch_table(batch.updates_to_table(ALL_TYPES_UPDATES, ALL_TYPES), batch_dir)

    df = read_batches_dataframe(spark, [str(batch_dir)], ALL_TYPES)

    assert [f.dataType for f in df.schema.fields] == [
        f.dataType for f in spark_schema(ALL_TYPES).fields
    ]
    assert _spark_updates(df, ALL_TYPES) == _sorted_updates(ALL_TYPES_UPDATES, ALL_TYPES)


def test_pyarrow_reads_spark_batch(spark: SparkSession, tmp_path: Path) -> None:
    batch_dir = tmp_path / "s1" / "b1"
    df = _spark_frame(spark, ALL_TYPES_UPDATES, ALL_TYPES)

    rows, size = write_batch_dataframe(df, str(batch_dir), ALL_TYPES)

    files = BlobStore(tmp_path).batch_files("s1", "b1")
    assert files
    assert rows == len(ALL_TYPES_UPDATES)
    assert size == sum(f.stat().st_size for f in files)
    # The files' own types (no coercion by a read schema) are the desc's.
    expected_schema = ALL_TYPES.arrow_schema(with_time_diff=True)
    for file in files:
        assert pq.read_schema(file).equals(expected_schema, check_metadata=False), file
    assert _pyarrow_updates(batch_dir, ALL_TYPES) == _sorted_updates(ALL_TYPES_UPDATES, ALL_TYPES)


def test_mixed_writers_read_together(spark: SparkSession, tmp_path: Path) -> None:
    arrow_dir = tmp_path / "s1" / "b1"
    spark_dir = tmp_path / "s1" / "b2"
    batch.write_batch_table(batch.updates_to_table(ALL_TYPES_UPDATES, ALL_TYPES), arrow_dir)
    write_batch_dataframe(
        _spark_frame(spark, ALL_TYPES_UPDATES, ALL_TYPES), str(spark_dir), ALL_TYPES
    )

    df = read_batches_dataframe(spark, [str(arrow_dir), str(spark_dir)], ALL_TYPES)

    assert _spark_updates(df, ALL_TYPES) == _sorted_updates(ALL_TYPES_UPDATES * 2, ALL_TYPES)


EXTREMES = RelationDesc.of(
    ("d", "date"), ("ts", "timestamp"), ("tz", "timestamp with time zone"), ("n", "numeric")
)
EXTREMES_UPDATES = [
    Update(
        (
            dt.date(1, 1, 1),
            dt.datetime(1, 1, 1),
            dt.datetime(1, 1, 1, tzinfo=UTC),
            decimal.Decimal("9" * 28 + "." + "9" * 10),
        ),
        1,
        1,
    ),
    Update(
        (
            dt.date(9999, 12, 31),
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            decimal.Decimal("-0.0000000001"),
        ),
        2,
        1,
    ),
    # Before the Julian/Gregorian switch: no calendar rebasing on either side.
    Update(
        (
            dt.date(1500, 3, 1),
            dt.datetime(1500, 3, 1, 12),
            dt.datetime(1500, 3, 1, 12, tzinfo=UTC),
            None,
        ),
        3,
        1,
    ),
]


def test_extreme_values_round_trip(spark: SparkSession, tmp_path: Path) -> None:
    """Years 1 and 9999 (beyond INT96's nanosecond range), pre-1582 dates and
    the widest numeric survive both writers. Spark's side is compared through
    toArrow(): collect() cannot turn a year-1 timestamptz into a Python
    datetime (it converts through local time and fails with "year 0")."""
    expected = _sorted_updates(EXTREMES_UPDATES, EXTREMES)
    arrow_dir = tmp_path / "s1" / "b1"
    spark_dir = tmp_path / "s1" / "b2"
    batch.write_batch_table(batch.updates_to_table(EXTREMES_UPDATES, EXTREMES), arrow_dir)
    write_batch_dataframe(_spark_frame(spark, EXTREMES_UPDATES, EXTREMES), str(spark_dir), EXTREMES)

    assert _pyarrow_updates(spark_dir, EXTREMES) == expected
    from_spark = read_batches_dataframe(spark, [str(arrow_dir)], EXTREMES).toArrow()
    assert _sorted_updates(batch.table_to_updates(from_spark, EXTREMES), EXTREMES) == expected


def test_read_no_batches_is_empty_with_schema(spark: SparkSession) -> None:
    df = read_batches_dataframe(spark, [], ALL_TYPES)

    assert df.schema == spark_schema(ALL_TYPES)
    assert df.collect() == []


def test_write_empty_dataframe(spark: SparkSession, tmp_path: Path) -> None:
    batch_dir = tmp_path / "s1" / "b1"

    rows, _ = write_batch_dataframe(_spark_frame(spark, [], ALL_TYPES), str(batch_dir), ALL_TYPES)

    assert rows == 0
    assert _pyarrow_updates(batch_dir, ALL_TYPES) == []
    assert read_batches_dataframe(spark, [str(batch_dir)], ALL_TYPES).collect() == []


def test_write_into_existing_dir_raises(spark: SparkSession, tmp_path: Path) -> None:
    batch_dir = tmp_path / "s1" / "b1"
    batch_dir.mkdir(parents=True)
    df = _spark_frame(spark, ALL_TYPES_UPDATES, ALL_TYPES)

    with pytest.raises(FileExistsError):
        write_batch_dataframe(df, str(batch_dir), ALL_TYPES)
    assert list(batch_dir.iterdir()) == []


def test_conform_casts_orders_and_drops_extra(spark: SparkSession) -> None:
    desc = RelationDesc.of(("a", "smallint"), ("b", "numeric"))
    df = spark.createDataFrame(
        [(1, "x", 7, 2, 3)], "`__diff` bigint, extra string, `__time` int, b int, a bigint"
    )

    out = conform(df, desc)

    assert out.columns == ["a", "b", TIME_COLUMN, DIFF_COLUMN]
    assert [f.dataType for f in out.schema.fields] == [
        f.dataType for f in spark_schema(desc).fields
    ]
    assert [tuple(r) for r in out.collect()] == [(3, decimal.Decimal(2), 7, 1)]


def test_conform_names_missing_columns(spark: SparkSession) -> None:
    desc = RelationDesc.of(("a", "integer"), ("b", "text"))
    df = spark.createDataFrame([(1, 1, 1)], "a int, `__time` bigint, other bigint")

    with pytest.raises(ValueError, match=r"b, __diff"):
        conform(df, desc)


# --- consolidation: Spark against pyarrow ------------------------------------

_VALUES: dict[ScalarType, list[Any]] = {
    ScalarType.INTEGER: [0, 1, -1],
    ScalarType.TEXT: ["a", "b", ""],
    # No -0.0: pyarrow's group_by keeps 0.0 and -0.0 apart, Spark merges them.
    ScalarType.DOUBLE: [0.5, 1.0, float("inf")],
    ScalarType.DATE: [dt.date(2020, 1, 1), dt.date(1970, 1, 1)],
    ScalarType.BIGINT: [2**62, 0],
}

_DESCS = [
    RelationDesc((), ()),
    RelationDesc.of(("k", "integer"), ("v", "text")),
    RelationDesc.of(("k", "bigint", False), ("x", "double precision"), ("d", "date")),
]


@st.composite
def _case(draw: st.DrawFn) -> tuple[RelationDesc, list[Update], int | None]:
    desc = draw(st.sampled_from(_DESCS))
    columns = []
    for ty in desc.types:
        choices = _VALUES[ty.scalar_type] + ([None] if ty.nullable else [])
        columns.append(st.sampled_from(choices))
    update = st.builds(
        Update,
        st.tuples(*columns),
        st.integers(min_value=0, max_value=3),
        st.integers(min_value=-2, max_value=2),
    )
    updates = draw(st.lists(update, max_size=12))
    as_of = draw(st.none() | st.integers(min_value=-1, max_value=4))
    return desc, updates, as_of


def _consolidated_rows(rows: list[tuple]) -> list[tuple]:
    return sorted(rows, key=row_sort_key)


@settings(max_examples=25, deadline=None)
@given(case=_case())
def test_consolidate_matches_pyarrow(spark: SparkSession, case: Any) -> None:
    desc, updates, as_of = case
    table = batch.updates_to_table(updates, desc)
    expected = batch.consolidate_table(table, desc, as_of)

    actual = consolidate_dataframe(_spark_frame(spark, updates, desc), desc, as_of)

    assert actual.columns == expected.column_names
    expected_rows = [tuple(r.values()) for r in expected.to_pylist()]
    assert _consolidated_rows([tuple(r) for r in actual.collect()]) == _consolidated_rows(
        expected_rows
    )


def test_consolidate_null_keys_and_zero_sums(spark: SparkSession) -> None:
    desc = RelationDesc.of(("k", "integer"), ("v", "text"))
    updates = [
        Update((None, None), 1, 1),
        Update((None, None), 2, 1),
        Update((None, "a"), 1, 1),
        Update((None, "a"), 2, -1),
        Update((1, None), 3, 5),
    ]
    df = _spark_frame(spark, updates, desc)

    assert sorted(
        (tuple(r) for r in consolidate_dataframe(df, desc, as_of=2).collect()), key=row_sort_key
    ) == [(None, None, 2)]
    assert sorted(
        (tuple(r) for r in consolidate_dataframe(df, desc, as_of=None).collect()),
        key=row_sort_key,
    ) == [
        (None, None, 1, 1),
        (None, None, 2, 1),
        (None, "a", 1, 1),
        (None, "a", 2, -1),
        (1, None, 3, 5),
    ]


def test_consolidate_zero_columns(spark: SparkSession) -> None:
    desc = RelationDesc((), ())
    df = _spark_frame(spark, [Update((), 1, 2), Update((), 2, -2), Update((), 9, 4)], desc)

    assert [tuple(r) for r in consolidate_dataframe(df, desc, as_of=2).collect()] == []
    assert [tuple(r) for r in consolidate_dataframe(df, desc, as_of=9).collect()] == [(4,)]
    empty = _spark_frame(spark, [], desc)
    assert consolidate_dataframe(empty, desc, as_of=9).collect() == []


def test_table_types_agree() -> None:
    """spark_schema and arrow_schema describe the same columns (no Spark needed)."""
    arrow = ALL_TYPES.arrow_schema(with_time_diff=True)
    sparks = spark_schema(ALL_TYPES)
    assert [f.name for f in sparks.fields] == arrow.names
    assert [f.nullable for f in sparks.fields] == [f.nullable for f in arrow]
    assert pa.types.is_int16(arrow.field("s").type)
