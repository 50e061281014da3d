"""A Spark job's rows brought to Python through Parquet files, a batch at a time.

Why files and not the driver: hydration (dataflow._spark_olds) reads each
stateful operator's input, which may be the whole data, and must hold a
batch of it, not all of it. `DataFrame.toArrow` and `collect` gather every
row in the driver first, and streaming the JVM's Arrow batches as they come
needs PySpark internals that change between releases and do not exist
over Spark Connect. Here Spark writes the rows as Parquet with the public
writer into a directory both sides see (a scratch directory under the blob
root: persist/scratch.py), and pyarrow reads them back `SPOOL_BATCH_ROWS`
at a time, as many times as they are used. Row groups are kept small
(`_ROW_GROUP_BYTES`) and pages read through a buffer, so a reader holds a
row group's column chunks at most.

Columns are written by position as `c0`..`cN` (a plan's names may repeat)
cast to the Spark types persist batches use (persist/spark_batches.py), so
pyarrow reads the values the in-process engine reads from persist; the
diff is last.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from coordinator_lib.persist.spark_batches import ensure_micros_timestamps, spark_type
from coordinator_lib.repr.relation import DIFF_COLUMN, RelationDesc, ScalarType, column_pylist
from coordinator_lib.repr.update import Row

# Rows per batch a reader converts to Python at a time.
SPOOL_BATCH_ROWS = 8192
# Parquet row group size Spark writes: what a reader's pages come from.
_ROW_GROUP_BYTES = 8 << 20
# pyarrow's read buffer per column chunk (0 would read a chunk whole).
_READ_BUFFER_BYTES = 1 << 20


def write_spool(frame: DataFrame, desc: RelationDesc, path: str) -> None:
    """Write `frame`'s rows (`desc`'s columns, then `__time`, `__diff`) as
    Parquet files in the new directory `path`, in one Spark job."""
    arity = desc.arity
    renamed = frame.toDF(*[f"c{i}" for i in range(arity)], *frame.columns[arity:])
    columns = [
        F.col(f"c{i}").cast(spark_type(t.scalar_type)).alias(f"c{i}")
        for i, t in enumerate(desc.types)
    ]
    out = renamed.select(*columns, F.col(DIFF_COLUMN).cast("long").alias(DIFF_COLUMN))
    if any(t.scalar_type is ScalarType.TIMESTAMPTZ for t in desc.types):
        ensure_micros_timestamps(out.sparkSession)
    out.write.mode("errorifexists").option("parquet.block.size", _ROW_GROUP_BYTES).parquet(path)


def spooled_rows(path: str, arity: int) -> Iterator[tuple[Row, int]]:
    """The `(row, diff)` pairs of the Parquet files in directory `path` (or
    of the file `path`): `arity` data columns, the diff last, converted
    `SPOOL_BATCH_ROWS` at a time as they are iterated."""
    for file in _parquet_files(Path(path)):
        with pq.ParquetFile(file, buffer_size=_READ_BUFFER_BYTES) as parquet:
            for batch in parquet.iter_batches(batch_size=SPOOL_BATCH_ROWS):
                columns = [column_pylist(batch.column(c)) for c in range(arity)]
                diffs = batch.column(batch.num_columns - 1).to_pylist()
                yield from zip(zip(*columns, strict=True), diffs, strict=True)


def _parquet_files(path: Path) -> list[Path]:
    """A directory's data files (Spark's part files; `_SUCCESS` and `.crc`
    files skipped), or the file itself."""
    if not path.is_dir():
        return [path]
    return sorted(
        p
        for p in path.iterdir()
        if p.is_file() and p.suffix == ".parquet" and not p.name.startswith((".", "_"))
    )


__all__ = ["SPOOL_BATCH_ROWS", "spooled_rows", "write_spool"]
