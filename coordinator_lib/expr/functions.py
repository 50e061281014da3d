"""Scalar functions called by name (`CallFunction`).

Two groups:

- Webhook validation (Materialize's): hmac, decode, encode,
  constant_time_eq, and jsonb's `->` / `->>` (as `jsonb_get` /
  `jsonb_get_text`). They run in-process only (`compute/local_functions.py`);
  only binders whose expressions never reach Spark offer them
  (`sql/function_binder.py`).
- Built-ins of every query (`sql/builtins.py` binds them with PostgreSQL's
  overloads): string, math and date/time functions. Both engines implement
  each: `compute/local_functions.py` on Python values and
  `compute/spark_functions.py` on Spark Columns, held to PostgreSQL by
  `tests/compute/test_functions_postgres.py`.

A call is NULL when any argument is NULL, except the `NULL_TOLERANT` ones
(concat ignores NULL arguments; concat_ws is NULL only for a NULL separator).
"""

from __future__ import annotations

from dataclasses import dataclass

from coordinator_lib.expr.scalar import ScalarExpr
from coordinator_lib.repr.relation import ColumnType

# Local-only functions (webhook CHECK expressions).
WEBHOOK_FUNCTIONS = frozenset({"hmac", "decode", "encode", "constant_time_eq"})
# jsonb operators: -> ->> #> #>> @>. Spark runs the Python implementation as
# a UDF (jsonb is stored as canonical text that Spark's JSON functions would
# not print the same way).
JSONB_FUNCTIONS = frozenset(
    {"jsonb_get", "jsonb_get_text", "jsonb_get_path", "jsonb_get_path_text", "jsonb_contains"}
)
# Functions both engines implement.
BUILTIN_FUNCTIONS = frozenset(
    {
        # text
        "substring",
        "btrim",
        "ltrim",
        "rtrim",
        "replace",
        "concat",
        "concat_ws",
        "strpos",
        "left",
        "right",
        "lpad",
        "rpad",
        "split_part",
        "starts_with",
        "reverse",
        "repeat",
        "md5",
        "octet_length",
        # math (float and numeric overloads: the argument type says which)
        "round",
        "round_to",  # round(numeric, integer)
        "ceil",
        "floor",
        "sqrt",
        "power",
        # date/time: the unit or field is the first argument, a text constant
        "date_trunc",
        "timestamp_round",  # (timestamp, precision): a cast to timestamp(p)
        "extract",  # -> numeric
        "date_part",  # -> double precision
        "add_interval",  # (timestamp, months, days, microseconds): `+ interval '...'`
        "date_add_days",  # date + integer
        "date_sub_days",  # date - integer
        "date_diff_days",  # date - date -> integer
        "timezone_to_local",  # timestamptz AT TIME ZONE 'zone' -> timestamp
        "timezone_from_local",  # timestamp AT TIME ZONE 'zone' -> timestamptz
    }
)
# More built-ins (compute/local_builtins_extra.py): Spark runs the Python
# implementation as a UDF.
PYTHON_BUILTINS = frozenset(
    {
        "ln",
        "log10",
        "log_base",  # log(b, x)
        "exp",
        "trunc",
        "trunc_to",  # trunc(numeric, integer)
        "sign",
        "pi",
        "div",
        "regexp_replace",
        "regex_match",  # ~
        "regex_imatch",  # ~*
        "initcap",
        "ascii",
        "chr",
        "translate",
        "make_date",
        "make_timestamp",
        "to_char",  # (timestamp, template, zone name TZ prints)
        "json_build_object",  # (k1, v1, ...) -> jsonb
        "array_contains",  # (array, x): `x = ANY (array)`
    }
)
BUILTIN_FUNCTIONS = BUILTIN_FUNCTIONS | PYTHON_BUILTINS
# Names the evaluator knows (compute/local_functions.FUNCTIONS implements each).
FUNCTION_NAMES = WEBHOOK_FUNCTIONS | JSONB_FUNCTIONS | BUILTIN_FUNCTIONS
# What compute/spark_functions.py renders.
SPARK_FUNCTIONS = JSONB_FUNCTIONS | BUILTIN_FUNCTIONS
NULL_TOLERANT = frozenset({"concat", "concat_ws", "json_build_object"})


@dataclass(frozen=True)
class CallFunction(ScalarExpr):
    """`name(args...)`: NULL if any argument is NULL (but see NULL_TOLERANT).
    `type` is the result's type, chosen by the binder from the argument types
    (the overload)."""

    name: str
    args: tuple[ScalarExpr, ...]
    type: ColumnType

    def __post_init__(self) -> None:
        if self.name not in FUNCTION_NAMES:
            raise ValueError(f"unknown function {self.name!r}")

    def typ(self, column_types: tuple[ColumnType, ...]) -> ColumnType:
        return self.type

    def children(self) -> tuple[ScalarExpr, ...]:
        return self.args

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(map(repr, self.args))})"


__all__ = [
    "BUILTIN_FUNCTIONS",
    "FUNCTION_NAMES",
    "JSONB_FUNCTIONS",
    "NULL_TOLERANT",
    "SPARK_FUNCTIONS",
    "WEBHOOK_FUNCTIONS",
    "CallFunction",
]
