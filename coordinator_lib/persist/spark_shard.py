"""Shards as Spark DataFrames: large snapshots and large appends.

Same shards, same rules as the pyarrow path (persist.shard): a Spark append
writes its batch directory first, checks it, and only then names it in the
state with compare-and-set. The checks (times within [expected_upper,
new_upper), no NULL in NOT NULL columns) read the Parquet footers' statistics,
so they cost no extra Spark job.

A snapshot DataFrame is lazy: it reads the batches the state named when it
was planned. Planning takes a seqno hold (`Shard.plan_read`), so compaction
in any process keeps those batches' blobs until the hold is released: run
the job inside `read_scope.held_reads()`, or it keeps them for a lease.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator_lib.persist.errors import (
    InvalidUpdates,
    LeaseExpired,
    ReadBeforeSince,
    ReadBeyondUpper,
)
from coordinator_lib.persist.shard import Shard
from coordinator_lib.persist.spark_batches import (
    consolidate_dataframe,
    read_batches_dataframe,
    write_batch_dataframe,
)
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.relation import TIME_COLUMN

__all__ = [
    "ReadBeforeSince",
    "ReadBeyondUpper",
    "compare_and_append_dataframe",
    "snapshot_dataframe",
    "updates_between_dataframe",
    "updates_dataframe",
]


def snapshot_dataframe(shard: Shard, spark: SparkSession, as_of: int) -> DataFrame:
    """The consolidated contents at `as_of`: data columns plus `__diff`.
    Raises ReadBeforeSince / ReadBeyondUpper outside [since, upper)."""
    _, dirs = shard.batch_dirs_at(as_of)
    df = read_batches_dataframe(spark, dirs, shard.desc)
    return consolidate_dataframe(df, shard.desc, as_of)


def updates_dataframe(shard: Shard, spark: SparkSession) -> DataFrame:
    """Every stored update (data columns, `__time`, `__diff`), unconsolidated."""
    state = shard.plan_read()
    dirs = [shard.batch_dir(b) for b in state.batches]
    return read_batches_dataframe(spark, dirs, shard.desc)


def updates_between_dataframe(
    shard: Shard, spark: SparkSession, lower: int, upper: Frontier
) -> DataFrame | None:
    """Updates with times in [lower, upper) (unconsolidated), or None when the
    batch metadata shows there are none (no Spark job spent on finding out).
    Exact as long as `lower` is at or after the shard's since."""
    state = shard.plan_read()
    chosen = [
        b
        for b in state.batches
        if b.rows
        and (b.upper is None or b.upper > lower)
        and (upper.time is None or b.lower < upper.time)
    ]
    if not chosen:
        return None
    dirs = [shard.batch_dir(b) for b in chosen]
    df = read_batches_dataframe(spark, dirs, shard.desc)
    condition = F.col(TIME_COLUMN) >= lower
    if upper.time is not None:
        condition = condition & (F.col(TIME_COLUMN) < upper.time)
    return df.filter(condition)


def compare_and_append_dataframe(
    shard: Shard,
    df: DataFrame,
    expected_upper: Frontier,
    new_upper: Frontier,
    before_append: Callable[[], None] | None = None,
) -> int:
    """Append a DataFrame (data columns, `__time`, `__diff`) like
    `Shard.compare_and_append`. Returns the rows written. `before_append`
    runs once, after the batch is written and before it is appended (a
    job that fails has run nothing of it)."""
    shard.validate_updates([], expected_upper, new_upper)
    pending = before_append
    for _attempt in range(3):
        shard.check_upper(expected_upper)
        key = shard.reserve_batch_key()
        batch_dir = shard.blob.batch_path(shard.shard_id, key)
        try:
            rows, size = write_batch_dataframe(df, str(batch_dir), shard.desc)
            _check_footers(shard, batch_dir, expected_upper, new_upper)
        except BaseException:
            shard.blob.delete_batch(shard.shard_id, key)
            raise
        if pending is not None:
            run, pending = pending, None
            try:
                run()
            except BaseException:
                shard.blob.delete_batch(shard.shard_id, key)
                raise
        if rows == 0:
            shard.blob.delete_batch(shard.shard_id, key)
            shard.compare_and_append([], expected_upper, new_upper)
            return 0
        try:
            shard.add_written_batch(key, rows, size, expected_upper, new_upper)
            return rows
        except LeaseExpired:
            # The Spark job outlived the writer lease, so another process's GC
            # may already have taken the files: write them again under a
            # fresh lease (the DataFrame reads immutable, held batches).
            continue
    raise LeaseExpired(f"shard {shard.shard_id}: writer lease keeps expiring")


def _first_leaves(metadata: pq.FileMetaData) -> dict[str, int]:
    """Each top-level column's first Parquet leaf column: a struct (an
    interval) has a leaf per field, so leaves and fields are numbered apart."""
    first: dict[str, int] = {}
    at = 0
    for field in metadata.schema.to_arrow_schema():
        first[field.name] = at
        at += _leaf_count(field.type)
    return first


def _leaf_count(arrow_type: pa.DataType) -> int:
    if pa.types.is_struct(arrow_type):
        return sum(_leaf_count(child.type) for child in arrow_type)
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return _leaf_count(arrow_type.value_type)
    return 1


def _has_null_list(file: Path, name: str) -> bool:
    """Whether the list column `name` holds a NULL list. Its leaf's null
    count also counts empty lists and NULL elements (`{}`, `{NULL}`), which
    a NOT NULL list column may hold, so a nonzero count is read again here."""
    return bool(pq.ParquetFile(file).read(columns=[name]).column(name).null_count)


def _check_footers(
    shard: Shard, batch_dir: Path, expected_upper: Frontier, new_upper: Frontier
) -> None:
    """Validate a written batch from its Parquet statistics (all files)."""
    required = [
        name for name, ty in zip(shard.desc.names, shard.desc.types, strict=True) if not ty.nullable
    ]
    lows, highs = [], []
    null_columns: set[str] = set()
    for file in shard.blob.batch_files(shard.shard_id, batch_dir.name):
        metadata = pq.ParquetFile(file).metadata
        leaf = _first_leaves(metadata)
        lists = {f.name for f in metadata.schema.to_arrow_schema() if pa.types.is_list(f.type)}
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            stats = row_group.column(leaf[TIME_COLUMN]).statistics
            if stats is None or not stats.has_min_max:
                raise InvalidUpdates(f"shard {shard.shard_id}: batch has no time statistics")
            lows.append(stats.min)
            highs.append(stats.max)
            for name in required:
                column_stats = row_group.column(leaf[name]).statistics
                if column_stats is not None and column_stats.null_count:
                    if name in lists and not _has_null_list(file, name):
                        continue
                    null_columns.add(name)
    if lows:
        low, high = min(lows), max(highs)
        if not expected_upper.less_equal(low) or new_upper.less_equal(high):
            raise InvalidUpdates(
                f"shard {shard.shard_id}: times [{low}, {high}] lie outside"
                f" [{expected_upper.time}, {'inf' if new_upper.is_empty else new_upper.time})"
            )
    if null_columns:
        names = ", ".join(map(repr, sorted(null_columns)))
        raise InvalidUpdates(f"shard {shard.shard_id}: NULL in NOT NULL column {names}")
