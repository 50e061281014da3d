"""How a collection is a Spark DataFrame: data columns `c0, c1, ...`
(scalar.column_name), a delta's `__time`, and `__diff`, the multiplicity.
Old contents have no `__time`."""

from __future__ import annotations

from functools import reduce as fold

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from coordinator_lib.compute.scalar import column_name
from coordinator_lib.persist.spark_batches import spark_type
from coordinator_lib.repr.relation import RelationDesc

TIME = "__time"
DIFF = "__diff"
POINT = "__point"  # a time at which a group's value is computed


def data_columns(arity: int) -> list[str]:
    return [column_name(i) for i in range(arity)]


def is_timed(df: DataFrame) -> bool:
    """Whether `df` is a delta (its rows have times), not old contents."""
    return TIME in df.columns


def bookkeeping(df: DataFrame) -> list[str]:
    return [c for c in (TIME, DIFF) if c in df.columns]


def union_all(frames: list[DataFrame]) -> DataFrame:
    return fold(lambda a, b: a.unionByName(b), frames)


def empty_frame(spark: SparkSession, desc: RelationDesc, with_time: bool) -> DataFrame:
    fields = [
        T.StructField(column_name(i), spark_type(t.scalar_type), True)
        for i, t in enumerate(desc.types)
    ]
    if with_time:
        fields.append(T.StructField(TIME, T.LongType(), False))
    fields.append(T.StructField(DIFF, T.LongType(), False))
    return spark.createDataFrame([], T.StructType(fields))


def consolidate_delta(df: DataFrame, arity: int) -> DataFrame:
    """Sum diffs per (row, time) and drop zeros: the output of a step."""
    columns = data_columns(arity)
    return df.groupBy(*columns, TIME).agg(F.sum(DIFF).alias(DIFF)).filter(F.col(DIFF) != 0)
