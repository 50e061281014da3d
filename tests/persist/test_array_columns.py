"""Array columns (array_agg's results) in persisted batches: pyarrow and
Spark write and read them as Arrow lists, and every read gives tuples, so
rows stay hashable; consolidation groups rows by their arrays."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pytest

from coordinator_lib.persist import batch
from coordinator_lib.persist.blob import BlobStore
from coordinator_lib.repr.relation import RelationDesc, column_pylist
from coordinator_lib.repr.update import Update

DESC = RelationDesc.of(
    ("k", "integer"),
    ("ints", "integer[]"),
    ("texts", "text[]"),
    ("nums", "numeric[]"),
    ("tzs", "timestamp with time zone[]"),
)
UTC = dt.UTC
ROWS = [
    (1, (1, None, 3), ("a", "", None, "b c"), (decimal.Decimal("1.5"),), ()),
    (2, (), (), None, (dt.datetime(2000, 1, 1, 5, tzinfo=UTC), None)),
    (3, None, None, (None,), None),
]
UPDATES = [
    Update(ROWS[0], 1, 1),
    Update(ROWS[1], 1, 2),
    Update(ROWS[0], 2, 1),  # the same row again: consolidates with the first
    Update(ROWS[2], 2, 1),
    Update(ROWS[1], 3, -2),
]


def _sorted(updates: list[Update]) -> list[Update]:
    return sorted(updates, key=lambda u: (u.row[0], u.time, u.diff))


def _normalized(updates: list[Update]) -> list[Update]:
    """numeric is stored with 10 places."""

    def value(v: object) -> object:
        if isinstance(v, tuple):
            return tuple(value(x) for x in v)
        return v.normalize() if isinstance(v, decimal.Decimal) else v

    return [Update(tuple(value(v) for v in u.row), u.time, u.diff) for u in updates]


def test_pyarrow_round_trip_and_consolidation(tmp_path: Path) -> None:
    for update in UPDATES:
        DESC.validate_row(update.row)
    batch_dir = tmp_path / "s1" / "b1"
    batch.write_batch_table(batch.updates_to_table(UPDATES, DESC), batch_dir)
    files = BlobStore(tmp_path).batch_files("s1", "b1")
    table = batch.read_batch_table(files, DESC)
    read = batch.table_to_updates(table, DESC)
    assert _normalized(_sorted(read)) == _normalized(_sorted(UPDATES))
    assert all(isinstance(u.row[1], tuple | None) for u in read)
    assert len({u.row for u in read}) == 3  # hashable
    consolidated = batch.consolidate_table(table, DESC, 3)
    columns = [column_pylist(consolidated.column(n)) for n in DESC.names]
    diffs = consolidated.column("__diff").to_pylist()
    rows = dict(zip(zip(*columns, strict=True), diffs, strict=True))
    assert rows == {ROWS[0]: 2, ROWS[2]: 1}


@pytest.mark.spark
def test_spark_round_trip(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from coordinator_lib.persist.spark_batches import (
        read_batches_dataframe,
        spark_schema,
        write_batch_dataframe,
    )

    arrow_dir = tmp_path / "s1" / "b1"
    spark_dir = tmp_path / "s1" / "b2"
    batch.write_batch_table(batch.updates_to_table(UPDATES, DESC), arrow_dir)
    # Spark reads the pyarrow batch (through Arrow, as the engine's reads do)...
    frame = read_batches_dataframe(spark, [str(arrow_dir)], DESC)
    from_spark = batch.table_to_updates(frame.toArrow(), DESC)
    assert _normalized(_sorted(from_spark)) == _normalized(_sorted(UPDATES))
    # ...and writes a batch pyarrow reads back.
    rows = [(*u.row, u.time, u.diff) for u in UPDATES]
    df = spark.createDataFrame(
        [tuple(list(v) if isinstance(v, tuple) else v for v in r) for r in rows],
        spark_schema(DESC),
    )
    written, _ = write_batch_dataframe(df, str(spark_dir), DESC)
    assert written == len(UPDATES)
    files = BlobStore(tmp_path).batch_files("s1", "b2")
    read = batch.table_to_updates(batch.read_batch_table(files, DESC), DESC)
    assert _normalized(_sorted(read)) == _normalized(_sorted(UPDATES))
