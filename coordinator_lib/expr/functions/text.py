"""Text functions with PostgreSQL's semantics: substring, trim, replace,
concat, strpos, left/right, pad, split_part, starts_with, reverse, repeat,
md5, octet_length, bit_length, initcap, ascii, chr, translate.

Where Spark's function differs from PostgreSQL's the builder does not use
it as is (substring's start before 1, left/right with a negative count, an
empty trim or pad string); initcap, ascii, chr and translate run on Spark
as UDFs. Case mapping is ASCII, as PostgreSQL's under the C locale.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F
from pyspark.sql import types as T

from coordinator_lib.expr.functions.registry import (
    FunctionError,
    Pseudo,
    scalar_function,
    sig,
)
from coordinator_lib.expr.functions.spark import spark_error
from coordinator_lib.repr.relation import ScalarType

S = ScalarType
TEXT_1_OR_2 = (sig(S.TEXT, result=S.TEXT), sig(S.TEXT, S.TEXT, result=S.TEXT))


def _long(column: SparkColumn) -> SparkColumn:
    return column.cast("long")


def _substring_column(args: list[SparkColumn]) -> SparkColumn:
    text, start = args[0], _long(args[1])
    begin = F.greatest(start, F.lit(1).cast("long"))
    at = F.least(begin, F.lit(2**31 - 1).cast("long")).cast("int")  # past the end: ''
    if len(args) == 2:
        return F.substring(text, at, F.lit(2**31 - 1))
    length = _long(args[2])
    count = F.greatest(start + length - begin, F.lit(0).cast("long"))
    result = F.substring(text, at, F.least(count, F.lit(2**31 - 1)).cast("int"))
    negative = spark_error("negative substring length not allowed", "22011", T.StringType())
    return F.when(length < 0, negative).otherwise(result)


@scalar_function(
    "substring",
    sig(S.TEXT, S.INTEGER, result=S.TEXT),
    sig(S.TEXT, S.INTEGER, S.INTEGER, result=S.TEXT),
    sig(S.TEXT, S.BIGINT, result=S.TEXT),  # Materialize's substr(text, int, bigint)
    sig(S.TEXT, S.BIGINT, S.BIGINT, result=S.TEXT),
    spark=lambda c: _substring_column(c.args),
)
def substring(text: str, start: int, length: int | None = None) -> str:
    """PostgreSQL counts from 1; characters before position 1 count toward
    the length (substring('hello', 0, 3) is 'he')."""
    begin = max(start, 1)
    if length is None:
        return text[begin - 1 :]
    if length < 0:
        raise FunctionError("negative substring length not allowed", "22011")
    end = start + length
    return text[begin - 1 : max(end - 1, begin - 1)]


def _trim_column(name: str, args: list[SparkColumn]) -> SparkColumn:
    chars = args[1] if len(args) == 2 else F.lit(" ")
    if name == "btrim":
        trimmed = F.btrim(args[0], chars)
    elif name == "ltrim":
        trimmed = F.ltrim(args[0], chars)
    else:
        trimmed = F.rtrim(args[0], chars)
    return F.when(chars == "", args[0]).otherwise(trimmed)


@scalar_function("btrim", *TEXT_1_OR_2, spark=lambda c: _trim_column("btrim", c.args))
def btrim(text: str, chars: str = " ") -> str:
    return text.strip(chars) if chars else text


@scalar_function("ltrim", *TEXT_1_OR_2, spark=lambda c: _trim_column("ltrim", c.args))
def ltrim(text: str, chars: str = " ") -> str:
    return text.lstrip(chars) if chars else text


@scalar_function("rtrim", *TEXT_1_OR_2, spark=lambda c: _trim_column("rtrim", c.args))
def rtrim(text: str, chars: str = " ") -> str:
    return text.rstrip(chars) if chars else text


@scalar_function(
    "replace",
    sig(S.TEXT, S.TEXT, S.TEXT, result=S.TEXT),
    spark=lambda c: F.replace(c.args[0], c.args[1], c.args[2]),
)
def replace(text: str, old: str, new: str) -> str:
    return text.replace(old, new) if old else text


@scalar_function(
    "concat",
    sig(result=S.TEXT, variadic=(Pseudo.ANY_TEXT,)),
    spark=lambda c: F.concat_ws("", *c.args),
    nulls=lambda nullable: False,
)
def concat(*parts: str | None) -> str:
    return "".join(p for p in parts if p is not None)


def _separator_nullable(nullable: Sequence[bool]) -> bool:
    return nullable[0]


@scalar_function(
    "concat_ws",
    sig(S.TEXT, result=S.TEXT, variadic=(Pseudo.ANY_TEXT,)),
    spark=lambda c: F.call_function("concat_ws", *c.args),
    nulls=_separator_nullable,
)
def concat_ws(separator: str | None, *parts: str | None) -> str | None:
    if separator is None:
        return None
    return separator.join(p for p in parts if p is not None)


@scalar_function(
    "strpos",
    sig(S.TEXT, S.TEXT, result=S.INTEGER),
    spark=lambda c: F.call_function("instr", c.args[0], c.args[1]),
)
def strpos(text: str, sub: str) -> int:
    return text.find(sub) + 1


def _left_column(text: SparkColumn, n: SparkColumn) -> SparkColumn:
    count = F.when(n >= 0, n).otherwise(F.greatest(F.char_length(text) + n, F.lit(0)))
    return F.substring(text, 1, count)


@scalar_function(
    "left",
    sig(S.TEXT, S.INTEGER, result=S.TEXT),
    spark=lambda c: _left_column(c.args[0], c.args[1]),
)
def left(text: str, n: int) -> str:
    return text[:n] if n >= 0 else text[: max(len(text) + n, 0)]


def _right_column(text: SparkColumn, n: SparkColumn) -> SparkColumn:
    length = F.char_length(text)
    start = F.when(n >= 0, F.greatest(length - n + 1, F.lit(1))).otherwise(-n + 1)
    count = F.when(n >= 0, F.least(n, length)).otherwise(F.greatest(length + n, F.lit(0)))
    return F.when(count <= 0, F.lit("")).otherwise(F.substring(text, start, count))


@scalar_function(
    "right",
    sig(S.TEXT, S.INTEGER, result=S.TEXT),
    spark=lambda c: _right_column(c.args[0], c.args[1]),
)
def right(text: str, n: int) -> str:
    if n >= 0:
        return text[len(text) - n :] if n < len(text) else text
    return text[-n:]


def _pad(text: str, n: int, fill: str, at_left: bool) -> str:
    if n <= 0:
        return ""
    if len(text) >= n or not fill:
        return text[:n]
    missing = n - len(text)
    pad = (fill * (missing // len(fill) + 1))[:missing]
    return pad + text if at_left else text + pad


def _pad_column(name: str, args: list[SparkColumn]) -> SparkColumn:
    fill = args[2] if len(args) == 3 else F.lit(" ")
    text, n = args[0], args[1]
    padded = F.call_function(name, text, n, fill)
    # PostgreSQL: an empty fill truncates but never pads.
    empty = F.when(n <= 0, F.lit("")).otherwise(F.substring(text, 1, n))
    return F.when(fill == "", empty).otherwise(padded)


PAD = (sig(S.TEXT, S.INTEGER, result=S.TEXT), sig(S.TEXT, S.INTEGER, S.TEXT, result=S.TEXT))


@scalar_function("lpad", *PAD, spark=lambda c: _pad_column("lpad", c.args))
def lpad(text: str, n: int, fill: str = " ") -> str:
    return _pad(text, n, fill, True)


@scalar_function("rpad", *PAD, spark=lambda c: _pad_column("rpad", c.args))
def rpad(text: str, n: int, fill: str = " ") -> str:
    return _pad(text, n, fill, False)


def _split_part_column(args: list[SparkColumn]) -> SparkColumn:
    text, delimiter, n = args
    zero = spark_error("field position must not be zero", "22023", T.StringType())
    whole = F.when((n == 1) | (n == -1), text).otherwise(F.lit(""))
    split = F.split_part(text, delimiter, n)
    return F.when(n == 0, zero).when(delimiter == "", whole).otherwise(split)


@scalar_function(
    "split_part",
    sig(S.TEXT, S.TEXT, S.INTEGER, result=S.TEXT),
    spark=lambda c: _split_part_column(c.args),
)
def split_part(text: str, delimiter: str, n: int) -> str:
    if n == 0:
        raise FunctionError("field position must not be zero", "22023")
    parts = text.split(delimiter) if delimiter else [text]
    index = n - 1 if n > 0 else len(parts) + n
    return parts[index] if 0 <= index < len(parts) else ""


@scalar_function(
    "starts_with",
    sig(S.TEXT, S.TEXT, result=S.BOOLEAN),
    spark=lambda c: F.startswith(c.args[0], c.args[1]),
)
def starts_with(text: str, prefix: str) -> bool:
    return text.startswith(prefix)


@scalar_function("reverse", sig(S.TEXT, result=S.TEXT), spark=lambda c: F.reverse(c.args[0]))
def reverse(text: str) -> str:
    return text[::-1]


@scalar_function(
    "repeat",
    sig(S.TEXT, S.INTEGER, result=S.TEXT),
    spark=lambda c: F.call_function("repeat", c.args[0], F.greatest(c.args[1], F.lit(0))),
)
def repeat(text: str, n: int) -> str:
    return text * max(n, 0)


@scalar_function("md5", sig(S.TEXT, result=S.TEXT), spark=lambda c: F.md5(c.args[0]))
def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


@scalar_function(
    "octet_length",
    sig(S.TEXT, result=S.INTEGER),
    spark=lambda c: F.octet_length(c.args[0]).cast("int"),
)
def octet_length(text: str) -> int:
    return len(text.encode())


@scalar_function(
    "bpchar_octet_length",
    sig(S.BPCHAR, result=S.INTEGER),
    sql=("octet_length",),
    spark=lambda c: F.octet_length(c.args[0]).cast("int"),
)
def bpchar_octet_length(text: str) -> int:
    """char(n) counts its blank padding (PostgreSQL's bpcharoctetlen, as
    Materialize): a cast to text would drop it."""
    return len(text.encode())


@scalar_function(
    "bit_length",
    sig(S.TEXT, result=S.INTEGER),
    spark=lambda c: F.bit_length(c.args[0]).cast("int"),
)
def bit_length(text: str) -> int:
    return 8 * len(text.encode())


@scalar_function("initcap", sig(S.TEXT, result=S.TEXT))
def initcap(text: str) -> str:
    """Each run of letters and digits: first upper case, the rest lower
    (ASCII letters only: the C locale's classes, see the module docstring)."""
    out: list[str] = []
    in_word = False
    for c in text:
        ascii_ = c.isascii()
        out.append(c if not ascii_ else c.lower() if in_word else c.upper())
        in_word = ascii_ and c.isalnum()
    return "".join(out)


@scalar_function("ascii", sig(S.TEXT, result=S.INTEGER))
def ascii_(text: str) -> int:
    return ord(text[0]) if text else 0


@scalar_function("chr", sig(S.INTEGER, result=S.TEXT))
def chr_(code: int) -> str:
    if code == 0:
        raise FunctionError("null character not permitted", "54000")
    if code < 0:
        raise FunctionError("character number must be positive", "22023")
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise FunctionError("requested character too large for encoding: " + str(code), "54000")
    return chr(code)


@scalar_function("translate", sig(S.TEXT, S.TEXT, S.TEXT, result=S.TEXT))
def translate(text: str, source: str, target: str) -> str:
    """Each character of `source` in `text` becomes the one at its position
    in `target`, or is deleted where `target` is shorter (first one wins)."""
    table: dict[str, str] = {}
    for i, c in enumerate(source):
        table.setdefault(c, target[i] if i < len(target) else "")
    return "".join(table.get(c, c) for c in text)
