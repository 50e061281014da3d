"""More built-in functions with PostgreSQL's semantics, in Python (the
binder is `sql/builtins_extra.py`):

- math: ln, exp, log (base 10, or log(b, x) of numeric), trunc (also
  trunc(numeric, places)), sign, pi, div (numeric quotient truncated
  toward zero). numeric ln/exp/log are computed in double precision, as
  numeric sqrt and power are.
- text: regexp_replace, the regular expression match operators (`~`,
  `~*`; `!~` is NOT of them), initcap, ascii, chr, translate.

Spark runs every one of them as a Python UDF of these functions
(`compute/spark_functions.py`, as it does jsonb's): PostgreSQL's regular
expressions are neither Java's nor Spark's, and one implementation keeps
the engines identical.

Regular expressions: PostgreSQL's (ARE) patterns are run by Python's `re`
after translating what differs and is common: the POSIX bracket classes
([[:alpha:]] ...) and the word boundaries \\m, \\M, \\y. The replacement
text of regexp_replace takes \\1 .. \\9 and \\& (the whole match), as in
PostgreSQL. Flags: g (every match), i (case-insensitive), c (sensitive),
q (the pattern is literal text); PostgreSQL's others are 0A000.
Character classes, case-insensitive matching and initcap's case mapping
are ASCII, as PostgreSQL's under the C locale (the one the tests' server
runs; Materialize's are Unicode).
"""

from __future__ import annotations

import decimal
import functools
import math
import re
from collections.abc import Callable
from typing import Any

from coordinator_lib.compute.local_builtins import (
    NUMERIC_SCALE,
    FunctionError,
    _from_float,
    _numeric,
)

# --- math -------------------------------------------------------------------------


def _log_checked(x: float | decimal.Decimal) -> None:
    if x == 0:
        raise FunctionError("cannot take logarithm of zero", "2201E")
    if x < 0:
        raise FunctionError("cannot take logarithm of a negative number", "2201E")


def ln(x: float | decimal.Decimal) -> float | decimal.Decimal:
    _log_checked(x)
    if isinstance(x, decimal.Decimal):
        return _from_float(math.log(float(x)))
    return math.log(x) if math.isfinite(x) else x


def log10(x: float | decimal.Decimal) -> float | decimal.Decimal:
    _log_checked(x)
    if isinstance(x, decimal.Decimal):
        return _from_float(math.log10(float(x)))
    return math.log10(x) if math.isfinite(x) else x


def log_base(base: decimal.Decimal, x: decimal.Decimal) -> decimal.Decimal:
    """log(b, x) (numeric only in PostgreSQL)."""
    _log_checked(base)
    _log_checked(x)
    if base == 1:
        raise FunctionError("division by zero", "22012")
    return _from_float(math.log(float(x)) / math.log(float(base)))


def exp(x: float | decimal.Decimal) -> float | decimal.Decimal:
    numeric = isinstance(x, decimal.Decimal)
    fx = float(x)
    if math.isnan(fx):
        return x
    try:
        result = math.exp(fx)
    except OverflowError:
        raise FunctionError("value out of range: overflow", "22003") from None
    if result == 0 and not numeric and math.isfinite(fx):
        raise FunctionError("value out of range: underflow", "22003")
    return _from_float(result) if numeric else result


def trunc(x: float | decimal.Decimal) -> float | decimal.Decimal:
    if isinstance(x, decimal.Decimal):
        return _numeric(x.quantize(decimal.Decimal(1), rounding=decimal.ROUND_DOWN))
    if not math.isfinite(x):
        return x
    return float(math.trunc(x))


def trunc_to(x: decimal.Decimal, places: int) -> decimal.Decimal:
    exponent = decimal.Decimal(1).scaleb(-places)
    context = decimal.Context(prec=60)
    return _numeric(x.quantize(exponent, rounding=decimal.ROUND_DOWN, context=context))


def sign(x: float | decimal.Decimal) -> float | decimal.Decimal:
    if isinstance(x, decimal.Decimal):
        return _numeric(decimal.Decimal((x > 0) - (x < 0)))
    if math.isnan(x):
        return x
    return float((x > 0) - (x < 0))


def pi() -> float:
    return math.pi


def div(a: decimal.Decimal, b: decimal.Decimal) -> decimal.Decimal:
    if b == 0:
        raise FunctionError("division by zero", "22012")
    quotient = (a / b).quantize(decimal.Decimal(1), rounding=decimal.ROUND_DOWN)
    return quotient.quantize(NUMERIC_SCALE)


# --- text -------------------------------------------------------------------------

# POSIX bracket classes, ASCII only (PostgreSQL's follow the database locale).
_CLASSES = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "a-zA-Z0-9",
    "space": r"\s",
    "upper": "A-Z",
    "lower": "a-z",
    "punct": r"!-/:-@\[-`{-~",
    "xdigit": "0-9A-Fa-f",
}


def _translate_pattern(pattern: str) -> str:
    """PostgreSQL's regular expression as Python's (see module docstring)."""
    out: list[str] = []
    i = 0
    in_bracket = False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append(r"\b" if not in_bracket and nxt in "mMy" else c + nxt)
            i += 2
            continue
        if in_bracket and pattern.startswith("[:", i):
            end = pattern.find(":]", i + 2)
            name = pattern[i + 2 : end] if end > 0 else ""
            if name not in _CLASSES:
                raise FunctionError("invalid regular expression: invalid character class", "2201B")
            out.append(_CLASSES[name])
            i = end + 2
            continue
        if c == "[" and not in_bracket:
            in_bracket = True
            out.append(c)
            i += 1
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):  # a ']' first in brackets is literal
                out.append(r"\]")
                i += 1
            continue
        if c == "]" and in_bracket:
            in_bracket = False
        elif c == "[" and in_bracket:
            c = r"\["  # Python warns about nested sets
        out.append(c)
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _compile(pattern: str, flags: int, quoted: bool = False) -> re.Pattern[str]:
    translated = re.escape(pattern) if quoted else _translate_pattern(pattern)
    try:
        return re.compile(translated, flags)
    except re.error as error:
        raise FunctionError(f"invalid regular expression: {error}", "2201B") from None


def _flags(text: str) -> tuple[int, bool, bool]:
    """(re flags, g, q) of PostgreSQL's flag letters."""
    flags, every, quoted = re.ASCII, False, False
    for f in text:
        if f == "g":
            every = True
        elif f == "i":
            flags |= re.IGNORECASE
        elif f == "c":
            flags &= ~re.IGNORECASE
        elif f == "q":
            quoted = True
        elif f in "bemnpstwx":
            raise FunctionError(f'regular expression option "{f}" is not supported', "0A000")
        else:
            raise FunctionError(f'invalid regular expression option: "{f}"', "22023")
    return flags, every, quoted


def regexp_replace(text: str, pattern: str, replacement: str, flags: str = "") -> str:
    re_flags, every, quoted = _flags(flags)
    compiled = _compile(pattern, re_flags, quoted)

    def substitute(match: re.Match[str]) -> str:
        out: list[str] = []
        i = 0
        while i < len(replacement):
            c = replacement[i]
            if c == "\\" and i + 1 < len(replacement):
                nxt = replacement[i + 1]
                if nxt.isdigit() and nxt != "0":
                    n = int(nxt)
                    if n <= compiled.groups:
                        out.append(match.group(n) or "")
                    i += 2
                    continue
                if nxt == "&":
                    out.append(match.group(0))
                    i += 2
                    continue
                if nxt == "\\":
                    out.append("\\")
                    i += 2
                    continue
            out.append(c)
            i += 1
        return "".join(out)

    return compiled.sub(substitute, text, count=0 if every else 1)


def regex_match(text: str, pattern: str) -> bool:
    return _compile(pattern, re.ASCII).search(text) is not None


def regex_imatch(text: str, pattern: str) -> bool:
    return _compile(pattern, re.ASCII | re.IGNORECASE).search(text) is not None


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


def ascii_(text: str) -> int:
    return ord(text[0]) if text else 0


def chr_(code: int) -> str:
    if code == 0:
        raise FunctionError("null character not permitted", "54000")
    if code < 0:
        raise FunctionError("character number must be positive", "22023")
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise FunctionError("requested character too large for encoding: " + str(code), "54000")
    return chr(code)


def translate(text: str, source: str, target: str) -> str:
    """Each character of `source` in `text` becomes the one at its position
    in `target`, or is deleted where `target` is shorter (first one wins)."""
    table: dict[str, str] = {}
    for i, c in enumerate(source):
        table.setdefault(c, target[i] if i < len(target) else "")
    return "".join(table.get(c, c) for c in text)


EXTRA_BUILTINS: dict[str, Callable[..., Any]] = {
    "ln": ln,
    "log10": log10,
    "log_base": log_base,
    "exp": exp,
    "trunc": trunc,
    "trunc_to": trunc_to,
    "sign": sign,
    "pi": pi,
    "div": div,
    "regexp_replace": regexp_replace,
    "regex_match": regex_match,
    "regex_imatch": regex_imatch,
    "initcap": initcap,
    "ascii": ascii_,
    "chr": chr_,
    "translate": translate,
}

__all__ = ["EXTRA_BUILTINS"]
