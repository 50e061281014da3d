"""What the Spark builders of this package share."""

from __future__ import annotations

from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F
from pyspark.sql import types as T


def spark_error(message: str, code: str, to: T.DataType) -> SparkColumn:
    """A Column that fails the job with `message` and its SQLSTATE where
    PostgreSQL raises (Spark would answer NULL or NaN), typed `to`."""
    return F.raise_error(F.lit(f"{message} (SQLSTATE {code})")).cast(to)


__all__ = ["spark_error"]
