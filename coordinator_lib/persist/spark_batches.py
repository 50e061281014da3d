"""Reading and writing batches with Spark (the big path).

Batches have one layout whoever writes them: the RelationDesc's columns, then
`__time` and `__diff` as non-null int64 (see persist.batch for the pyarrow
side). The Spark types here are chosen so that the Parquet Spark writes is
read back by pyarrow with `RelationDesc.arrow_schema` unchanged:

| ScalarType  | Spark              | Parquet physical (logical)        | pyarrow              |
| ----------- | ------------------ | --------------------------------- | -------------------- |
| smallint    | ShortType          | INT32 (INT(16, signed))           | int16                |
| integer     | IntegerType        | INT32                             | int32                |
| real        | FloatType          | FLOAT                             | float32              |
| numeric     | DecimalType(38,10) | FIXED_LEN_BYTE_ARRAY(16) (DECIMAL)| decimal128(38, 10)   |
| date        | DateType           | INT32 (DATE)                      | date32               |
| timestamp   | TimestampNTZType   | INT64 (TIMESTAMP(micros, local))  | timestamp("us")      |
| timestamptz | TimestampType      | INT64 (TIMESTAMP(micros, UTC))    | timestamp("us", UTC) |

`timestamptz` needs `spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS`
(otherwise Spark writes legacy INT96, which pyarrow reads as nanoseconds
without a time zone); `write_batch_dataframe` makes sure it is set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from coordinator_lib.persist.blob import fsync_dir
from coordinator_lib.repr.relation import DIFF_COLUMN, TIME_COLUMN, RelationDesc, ScalarType

_SPARK_TYPES: dict[ScalarType, T.DataType] = {
    ScalarType.BOOLEAN: T.BooleanType(),
    ScalarType.SMALLINT: T.ShortType(),
    ScalarType.INTEGER: T.IntegerType(),
    ScalarType.BIGINT: T.LongType(),
    ScalarType.REAL: T.FloatType(),
    ScalarType.DOUBLE: T.DoubleType(),
    ScalarType.NUMERIC: T.DecimalType(38, 10),
    ScalarType.TEXT: T.StringType(),
    ScalarType.BPCHAR: T.StringType(),
    ScalarType.BYTEA: T.BinaryType(),
    ScalarType.DATE: T.DateType(),
    ScalarType.TIMESTAMP: T.TimestampNTZType(),
    ScalarType.TIMESTAMPTZ: T.TimestampType(),
    ScalarType.TIME: T.TimeType(6),
    # jsonb is stored as its canonical text, as on the pyarrow side.
    ScalarType.JSONB: T.StringType(),
    **{st: T.StringType() for st in ScalarType if st.is_map},
    # months, days, micros apart, as repr/relation.py stores them
    ScalarType.INTERVAL: T.StructType(
        [
            T.StructField("months", T.IntegerType()),
            T.StructField("days", T.IntegerType()),
            T.StructField("micros", T.LongType()),
        ]
    ),
}

_TIMESTAMP_CONF = "spark.sql.parquet.outputTimestampType"
_TIMESTAMP_MICROS = "TIMESTAMP_MICROS"


def spark_type(scalar_type: ScalarType) -> T.DataType:
    """The Spark type that round-trips through Parquet to `scalar_type.to_arrow()`."""
    element = scalar_type.element
    if element is not None:
        return T.ArrayType(_SPARK_TYPES[element], containsNull=True)
    return _SPARK_TYPES[scalar_type]


def spark_schema(desc: RelationDesc, with_time_diff: bool = True) -> T.StructType:
    """The Spark counterpart of `desc.arrow_schema(with_time_diff)`."""
    fields = [
        T.StructField(name, spark_type(ty.scalar_type), nullable=ty.nullable)
        for name, ty in zip(desc.names, desc.types, strict=True)
    ]
    if with_time_diff:
        fields += [
            T.StructField(TIME_COLUMN, T.LongType(), nullable=False),
            T.StructField(DIFF_COLUMN, T.LongType(), nullable=False),
        ]
    return T.StructType(fields)


def conform(df: DataFrame, desc: RelationDesc) -> DataFrame:
    """Select exactly the batch columns, in order, cast to the batch types.

    Extra columns are dropped; a missing one raises ValueError, since writing
    a batch without it would silently fill NULLs (or fail later in a reader)."""
    schema = spark_schema(desc, with_time_diff=True)
    present = set(df.columns)
    missing = [f.name for f in schema.fields if f.name not in present]
    if missing:
        raise ValueError(
            f"DataFrame lacks batch column(s) {', '.join(missing)}; "
            f"it has {', '.join(df.columns) or 'no columns'}"
        )
    columns: list[Column] = [
        F.col(_quote(f.name)).cast(f.dataType).alias(f.name) for f in schema.fields
    ]
    return df.select(*columns)


def write_batch_dataframe(df: DataFrame, batch_dir: str, desc: RelationDesc) -> tuple[int, int]:
    """Write `df` as a new batch directory of zstd Parquet files, in one Spark
    job. Returns (rows, bytes), summed from the written files' footers so the
    DataFrame is not computed a second time by a count.

    `batch_dir` must not exist (batches are immutable; raises FileExistsError).
    A path without a scheme is local; for local paths the files and the
    directory are fsynced, like persist.batch does, before returning."""
    filesystem, path = _filesystem(batch_dir)
    if filesystem.get_file_info(path).type != pafs.FileType.NotFound:
        raise FileExistsError(f"batch directory {batch_dir} already exists")
    out = conform(df, desc)
    if any(t.scalar_type is ScalarType.TIMESTAMPTZ for t in desc.types):
        ensure_micros_timestamps(out.sparkSession)
    out.write.mode("errorifexists").option("compression", "zstd").parquet(batch_dir)

    files = _data_files(filesystem, path)
    rows = 0
    size = 0
    for info in files:
        with filesystem.open_input_file(info.path) as handle:
            rows += pq.ParquetFile(handle).metadata.num_rows
        size += info.size or 0
    if isinstance(filesystem, pafs.LocalFileSystem):
        for info in files:
            _fsync_file(info.path)
        fsync_dir(Path(path))
        fsync_dir(Path(path).parent)
    return rows, size


def read_batches_dataframe(
    spark: SparkSession, batch_dirs: list[str], desc: RelationDesc
) -> DataFrame:
    """Read batch directories as one DataFrame with the desc's schema (no
    schema inference, no footer scan). Names starting with `.` or `_` are
    skipped by Spark, as by persist.blob."""
    schema = spark_schema(desc, with_time_diff=True)
    if not batch_dirs:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*batch_dirs)


def consolidate_dataframe(df: DataFrame, desc: RelationDesc, as_of: int | None) -> DataFrame:
    """Spark twin of persist.batch.consolidate_table: with `as_of`, drop times
    after it and sum diffs per row (columns: data + `__diff`); without, sum
    per (row, time) (columns: data + `__time` + `__diff`). Zero sums are
    dropped; NULLs group together."""
    if as_of is not None:
        df = df.filter(F.col(TIME_COLUMN) <= F.lit(as_of))
        keys = [_quote(name) for name in desc.names]
    else:
        keys = [*(_quote(name) for name in desc.names), TIME_COLUMN]
    # With no keys this is a global aggregate: one row, NULL sum if no input,
    # which the filter below drops together with zero.
    grouped = df.groupBy(*keys).agg(F.sum(DIFF_COLUMN).cast(T.LongType()).alias(DIFF_COLUMN))
    return grouped.filter(F.col(DIFF_COLUMN) != 0)


def _quote(name: str) -> str:
    """A column reference Spark will not parse as a nested field or expression."""
    return "`" + name.replace("`", "``") + "`"


def _filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    return pafs.FileSystem.from_uri(uri)


def _data_files(filesystem: pafs.FileSystem, path: str) -> list[pafs.FileInfo]:
    infos = filesystem.get_file_info(pafs.FileSelector(path, recursive=False))
    return sorted(
        (
            info
            for info in infos
            if info.type == pafs.FileType.File
            and not info.base_name.startswith((".", "_"))
            and info.base_name.endswith(".parquet")
        ),
        key=lambda info: info.path,
    )


def ensure_micros_timestamps(spark: SparkSession) -> None:
    """Have `spark` write timestamptz as Parquet micros (pyarrow's type):
    a session not built by get_or_create_spark may still write INT96."""
    if spark.conf.get(_TIMESTAMP_CONF, None) != _TIMESTAMP_MICROS:
        spark.conf.set(_TIMESTAMP_CONF, _TIMESTAMP_MICROS)


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
