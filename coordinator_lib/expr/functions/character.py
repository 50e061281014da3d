"""Character types with a length, as PostgreSQL applies their modifier.

A value written into a `varchar(n)` column (INSERT, UPDATE, COPY) must fit:
characters past `n` may only be blanks, which are cut; anything else is
22001 "value too long for type character varying(n)". An explicit cast cuts
instead (`'abcdef'::varchar(3)` is 'abc', sql/scalar.py uses `left`).
`char(n)` (bpchar) does the same and then pads with blanks to `n`.
Called by the plan only (sql/typmod.py), never by name from SQL.
"""

from __future__ import annotations

from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F
from pyspark.sql import types as T

from coordinator_lib.expr.functions.registry import (
    FunctionError,
    SparkCall,
    scalar_function,
    sig,
)
from coordinator_lib.expr.functions.spark import spark_error
from coordinator_lib.repr.relation import ScalarType

S = ScalarType


def type_name(scalar: ScalarType, length: int) -> str:
    """The SQL name of the type with its length: `character varying(3)`."""
    base = "character" if scalar is S.BPCHAR else "character varying"
    return f"{base}({length})"


def _fitted(text: str, length: int, scalar: ScalarType) -> str:
    if len(text) <= length:
        return text
    if text[length:].strip(" "):
        raise FunctionError(f"value too long for type {type_name(scalar, length)}", "22001")
    return text[:length]


def _fit_column(c: SparkCall, scalar: ScalarType) -> SparkColumn:
    text, length = c.args[0], int(c.constant(1))
    too_long = spark_error(
        f"value too long for type {type_name(scalar, length)}", "22001", T.StringType()
    )
    rest = F.substring(text, length + 1, 2**31 - 1)
    cut = F.substring(text, 1, length)
    fitted = (
        F.when(F.char_length(text) <= length, text)
        .when(F.rtrim(rest) == "", cut)
        .otherwise(too_long)
    )
    return F.rpad(fitted, length, " ") if scalar is S.BPCHAR else fitted


@scalar_function(
    "varchar_fit",
    sig(S.TEXT, S.INTEGER, result=S.TEXT),
    sql=(),
    spark=lambda c: _fit_column(c, S.TEXT),
)
def varchar_fit(text: str, length: int) -> str:
    """Assignment to `varchar(length)`: blanks past it are cut, other characters refused."""
    return _fitted(text, length, S.TEXT)


@scalar_function(
    "bpchar_fit",
    sig(S.BPCHAR, S.INTEGER, result=S.BPCHAR),
    sql=(),
    spark=lambda c: _fit_column(c, S.BPCHAR),
)
def bpchar_fit(text: str, length: int) -> str:
    """Assignment to `char(length)`: as varchar_fit, then blank-padded to length."""
    return _fitted(text, length, S.BPCHAR).ljust(length)


@scalar_function(
    "bpchar_cut",
    sig(S.BPCHAR, S.INTEGER, result=S.BPCHAR),
    sql=(),
    spark=lambda c: F.rpad(F.substring(c.args[0], 1, int(c.constant(1))), int(c.constant(1)), " "),
)
def bpchar_cut(text: str, length: int) -> str:
    """An explicit cast to `char(length)`: cut to length, then blank-padded."""
    return text[:length].ljust(length)


__all__ = ["type_name"]
