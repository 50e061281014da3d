"""Scalar expressions evaluated on Python rows, with PostgreSQL semantics:
three-valued logic, NULL-strict operators, integer division truncating
toward zero, overflow and division by zero as errors, lazy CASE and COALESCE,
AND / OR left to right up to their first FALSE / TRUE.

The in-process executor (compute/local.py) uses it for small steps, where
Spark's per-job overhead would dominate; Spark's rendering (compute/scalar.py)
implements the same semantics, and the differential tests hold both to
DuckDB's answers.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import json
import math
import operator
import re
import weakref
from collections.abc import Callable
from typing import Any

from coordinator_lib.compute.float_sum import float_sum
from coordinator_lib.expr.functions import CallFunction, evaluate
from coordinator_lib.expr.relation import AggregateExpr, AggregateFunc
from coordinator_lib.expr.scalar import (
    COMPARISON_OPERATORS,
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    Column,
    If,
    Literal,
    RaiseError,
    Record,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
    is_integer,
)
from coordinator_lib.expr.text_input import INT_RANGES, REAL_MAX, parse_text_as
from coordinator_lib.repr.array import array_text
from coordinator_lib.repr.interval import Interval
from coordinator_lib.repr.nan import is_nan, nan_ordered, one_nan
from coordinator_lib.repr.numeric import ARITHMETIC, NumericFieldOverflow, numeric_display
from coordinator_lib.repr.numeric import to_numeric as stored_numeric
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.repr.text_map import format_map
from coordinator_lib.repr.time_of_day import format_time, time_from_micros, time_micros

S = ScalarType
Row = tuple[Any, ...]


def to_numeric(value: decimal.Decimal | int) -> decimal.Decimal:
    """`value` in numeric's bound (repr/numeric.py), overflow as 22003."""
    try:
        return stored_numeric(value)
    except NumericFieldOverflow as error:
        raise EvalError(error.message, error.code) from None


class EvalError(Exception):
    """A runtime error PostgreSQL would raise (division by zero, overflow, bad
    cast); `code` is its SQLSTATE."""

    def __init__(self, message: str, code: str = "22000") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def check_range(value: int, st: ScalarType) -> int:
    low, high = INT_RANGES[st]
    if not low <= value <= high:
        raise EvalError(f"{st.value} out of range", "22003")
    return value


def _like(text: str, pattern: str) -> bool:
    regex = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            regex.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        regex.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.fullmatch("".join(regex), text, flags=re.DOTALL) is not None


def _element_text(value: Any, st: ScalarType) -> str:
    """An array element's text: its type's output function, which is not
    always its `::text` (PostgreSQL prints booleans in arrays as t / f)."""
    if st is S.BOOLEAN:
        return "t" if value else "f"
    return to_text(value, st)


def _timestamp_text(value: dt.datetime) -> str:
    """PostgreSQL's output: the fraction without trailing zeros."""
    text = value.isoformat(sep=" ")
    return text.rstrip("0").rstrip(".") if "." in text else text


def to_text(value: Any, st: ScalarType) -> str:
    element = st.element
    if element is not None:
        return array_text(value, lambda v: _element_text(v, element), st.is_list)
    if st is S.BOOLEAN:
        return "true" if value else "false"
    if st in (S.REAL, S.DOUBLE):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    if st is S.NUMERIC:  # as clients are shown it: no trailing zeros
        return format(numeric_display(value), "f")
    if st is S.TIMESTAMPTZ:
        return _timestamp_text(value.astimezone(dt.UTC).replace(tzinfo=None)) + "+00"
    if st is S.TIMESTAMP:
        return _timestamp_text(value)
    if st is S.BYTEA:
        return "\\x" + value.hex()
    if st is S.TIME:
        return format_time(value)
    if st.map_value is not None:
        return format_map(value, st.map_value)
    if st is S.BPCHAR:  # char(n) as text drops its padding
        return value.rstrip(" ")
    return str(value)


def cast_value(value: Any, src: ScalarType, dst: ScalarType) -> Any:
    if value is None or src is dst:
        return value
    if dst is S.TEXT:
        return to_text(value, src)
    if src.element is not None and dst.element is not None:  # to a list, element by element
        return tuple(cast_value(v, src.element, dst.element) for v in value)
    if src is S.BPCHAR:
        value, src = to_text(value, src), S.TEXT
    if src is S.JSONB:
        value, src = _jsonb_scalar(value, dst)
        if src is dst:
            return value
    if src is S.TEXT:
        try:
            return parse_text_as(value, dst)
        except Exception as error:
            raise EvalError(str(error), getattr(error, "code", "22P02")) from None
    if is_integer(dst):
        if src is S.BOOLEAN:
            return int(value)
        if is_integer(src):
            return check_range(value, dst)
        if src is S.NUMERIC:
            rounded = value.quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP)
            return check_range(int(rounded), dst)
        if src in (S.REAL, S.DOUBLE):
            if not math.isfinite(value):
                raise EvalError("integer out of range", "22003")
            return check_range(round(value), dst)  # rint: half to even
    if dst is S.NUMERIC:
        if src in (S.REAL, S.DOUBLE):
            if not math.isfinite(value):
                raise EvalError("cannot convert infinity or NaN to numeric")
            return to_numeric(decimal.Decimal(repr(value)))
        return to_numeric(decimal.Decimal(value))
    if dst in (S.REAL, S.DOUBLE):
        return _float_result(float(value), dst, value)
    if dst is S.BOOLEAN and is_integer(src):
        return value != 0
    if src is S.DATE and dst in (S.TIMESTAMP, S.TIMESTAMPTZ):
        tz = dt.UTC if dst is S.TIMESTAMPTZ else None
        return dt.datetime(value.year, value.month, value.day, tzinfo=tz)
    if src is S.TIMESTAMP and dst is S.TIMESTAMPTZ:
        return value.replace(tzinfo=dt.UTC)
    if src is S.TIMESTAMPTZ and dst is S.TIMESTAMP:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if src in (S.TIMESTAMP, S.TIMESTAMPTZ) and dst is S.DATE:
        return value.date()
    if src is S.TIMESTAMP and dst is S.TIME:
        return value.time()
    if src is S.TIMESTAMPTZ and dst is S.TIME:
        return value.astimezone(dt.UTC).time()
    if src is S.TIME and dst is S.INTERVAL:
        return Interval(0, 0, time_micros(value))
    if src is S.INTERVAL and dst is S.TIME:
        return time_from_micros(value.micros)
    raise EvalError(f"no cast from {src.value} to {dst.value}")


_JSON_KINDS = {dict: "object", list: "array", str: "string", type(None): "null"}


def _jsonb_scalar(value: str, dst: ScalarType) -> tuple[Any, ScalarType]:
    """A jsonb number or boolean as the value to cast on (PostgreSQL's
    jsonb casts); any other jsonb is 22023, named as PostgreSQL names it."""
    parsed = json.loads(value, parse_float=decimal.Decimal, parse_int=decimal.Decimal)
    if isinstance(parsed, bool):
        if dst is S.BOOLEAN:
            return parsed, S.BOOLEAN
        kind = "boolean"
    elif isinstance(parsed, decimal.Decimal):
        if dst is not S.BOOLEAN:
            return parsed, S.NUMERIC
        kind = "numeric"
    else:
        kind = _JSON_KINDS[type(parsed)]
    raise EvalError(f"cannot cast jsonb {kind} to type {dst.value}", "22023")


def _divide(a: int, b: int) -> int:
    """Integer division truncating toward zero (PostgreSQL's)."""
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


def _modulo(a: int, b: int) -> int:
    """The remainder with the dividend's sign (PostgreSQL's)."""
    return abs(a) % abs(b) * (1 if a >= 0 else -1)


# Integer arithmetic before its range check (a zero divisor is checked first).
_INTEGER_OPS: dict[BinaryFunc, Callable[[int, int], int]] = {
    BinaryFunc.ADD: operator.add,
    BinaryFunc.SUB: operator.sub,
    BinaryFunc.MUL: operator.mul,
    BinaryFunc.DIV: _divide,
    BinaryFunc.MOD: _modulo,
}


def _arith(func: BinaryFunc, a: Any, b: Any, st: ScalarType) -> Any:
    if func in (BinaryFunc.DIV, BinaryFunc.MOD) and b == 0:
        raise EvalError("division by zero", "22012")
    if is_integer(st):
        return check_range(_INTEGER_OPS[func](a, b), st)
    if st is S.NUMERIC:
        ops = {
            BinaryFunc.ADD: ARITHMETIC.add,
            BinaryFunc.SUB: ARITHMETIC.subtract,
            BinaryFunc.MUL: ARITHMETIC.multiply,
            BinaryFunc.DIV: ARITHMETIC.divide,
            BinaryFunc.MOD: ARITHMETIC.remainder,
        }
        return to_numeric(ops[func](a, b))
    if func is BinaryFunc.ADD:
        result = a + b
    elif func is BinaryFunc.SUB:
        result = a - b
    elif func is BinaryFunc.MUL:
        result = a * b
        if result == 0 and a != 0 and b != 0:
            raise EvalError("value out of range: underflow", "22003")
    elif func is BinaryFunc.DIV:
        result = a / b
        if result == 0 and a != 0 and not math.isinf(b):
            raise EvalError("value out of range: underflow", "22003")
    else:
        return math.fmod(a, b)
    return _float_result(result, st, a, b)


def _float_result(result: float, st: ScalarType, *inputs: Any) -> float:
    """PostgreSQL's float overflow check: an infinite result (beyond real's
    range for a real) from finite inputs is 22003, never `inf`."""
    finite_inputs = all(not isinstance(v, float) or math.isfinite(v) for v in inputs)
    too_big = math.isinf(result) or (st is S.REAL and abs(result) > REAL_MAX)
    if too_big and finite_inputs:
        raise EvalError("value out of range: overflow", "22003")
    return result


def float_result(compute: Callable[[], float], st: ScalarType) -> float:
    """A float SUM's value (compute/float_sum.py: an exact sum beyond a
    double is OverflowError), checked as `_float_result` checks it."""
    try:
        total = compute()
    except OverflowError:
        raise EvalError("value out of range: overflow", "22003") from None
    return total if not math.isfinite(total) else _float_result(total, st)


def _scalar_type(expr: ScalarExpr, types: tuple[ColumnType, ...]) -> ScalarType:
    """`expr.typ(types).scalar_type`, remembered on the node for the last
    `types` it was asked with. eval_scalar runs once per row with the same
    types, and `typ` walks the node's whole subtree each time: without this,
    typing took over half of a q5 step (bench/nexmark.py). `typ` is a pure
    function of (node, types), so a hit for equal types is exact."""
    slots = getattr(expr, "__dict__", None)
    if slots is None:  # a node without instance attributes: no place to remember
        return expr.typ(types).scalar_type
    cached = slots.get("_local_scalar_type")
    if cached is not None and (cached[0] is types or cached[0] == types):
        return cached[1]
    st = expr.typ(types).scalar_type
    object.__setattr__(expr, "_local_scalar_type", (types, st))  # a cache, not a field
    return st


def eval_scalar(expr: ScalarExpr, row: Row, types: tuple[ColumnType, ...]) -> Any:
    """Evaluate `expr` on `row`, whose columns have `types` (a NaN as the
    one NaN object rows hold: repr/nan.py)."""
    return one_nan(_eval(expr, row, types))


def _eval(expr: ScalarExpr, row: Row, types: tuple[ColumnType, ...]) -> Any:
    if isinstance(expr, Column):
        return row[expr.index]
    if isinstance(expr, Literal):
        return expr.value
    if isinstance(expr, If):
        if _eval(expr.cond, row, types) is True:
            return _eval(expr.then, row, types)
        return _eval(expr.els, row, types)
    if isinstance(expr, CallVariadic):
        if expr.func in (VariadicFunc.AND, VariadicFunc.OR):
            # Left to right, stopping at the first FALSE (AND) / TRUE (OR),
            # as PostgreSQL and Spark's And/Or: `v <> 0 AND k / v > 1`
            # is FALSE where v = 0, not a division by zero.
            decisive = expr.func is VariadicFunc.OR
            unknown = False
            for e in expr.exprs:
                value = _eval(e, row, types)
                if value is decisive:
                    return decisive
                unknown = unknown or value is None
            return None if unknown else not decisive
        if expr.func is VariadicFunc.COALESCE:
            for e in expr.exprs:
                value = _eval(e, row, types)
                if value is not None:
                    return value
            return None
        values = [v for v in (_eval(e, row, types) for e in expr.exprs) if v is not None]
        if not values:
            return None
        return max(values) if expr.func is VariadicFunc.GREATEST else min(values)
    if isinstance(expr, CallUnary):
        value = _eval(expr.expr, row, types)
        func = expr.func
        if func is UnaryFunc.IS_NULL:
            return value is None
        if func is UnaryFunc.IS_NOT_NULL:
            return value is not None
        if func is UnaryFunc.IS_TRUE:
            return value is True
        if func is UnaryFunc.IS_FALSE:
            return value is False
        if value is None:
            return None
        st = _scalar_type(expr.expr, types)
        if func is UnaryFunc.NOT:
            return not value
        # copy_negate / copy_abs: `-d` and `abs(d)` round a Decimal to 28 digits.
        if func is UnaryFunc.NEG:
            if isinstance(value, decimal.Decimal):
                return value.copy_negate()
            return check_range(-value, st) if is_integer(st) else -value
        if func is UnaryFunc.ABS:
            if isinstance(value, decimal.Decimal):
                return value.copy_abs()
            return check_range(abs(value), st) if is_integer(st) else abs(value)
        if func is UnaryFunc.LOWER:
            return value.lower()
        if func is UnaryFunc.UPPER:
            return value.upper()
        if func is UnaryFunc.LENGTH:
            return len(value)
        raise EvalError(f"cannot evaluate {func}")
    if isinstance(expr, CallBinary):
        left = _eval(expr.left, row, types)
        right = _eval(expr.right, row, types)
        if left is None or right is None:
            return None
        func = expr.func
        if func in COMPARISON_OPERATORS:
            if is_nan(left) or is_nan(right):
                left, right = nan_ordered(left), nan_ordered(right)
            return COMPARISON_OPERATORS[func](left, right)
        if func is BinaryFunc.LIKE:
            return _like(left, right)
        if func is BinaryFunc.CONCAT:
            return left + right
        return _arith(func, left, right, _scalar_type(expr, types))
    if isinstance(expr, Cast):
        value = _eval(expr.expr, row, types)
        return cast_value(value, _scalar_type(expr.expr, types), expr.to)
    if isinstance(expr, CallFunction):
        args = [_eval(arg, row, types) for arg in expr.args]
        try:
            return evaluate(expr.name, args)
        except ValueError as error:
            raise EvalError(str(error), getattr(error, "code", "22000")) from None
    if isinstance(expr, RaiseError):
        raise EvalError(expr.message, expr.code)
    if isinstance(expr, Record):
        return tuple(_eval(f, row, types) for f in expr.fields)
    raise EvalError(f"cannot evaluate {type(expr).__name__}")


Compiled = Callable[[Row], Any]


def compile_scalar(expr: ScalarExpr, types: tuple[ColumnType, ...]) -> Compiled:
    """`expr` as a function of a row with column `types`, answering exactly
    as `eval_scalar(expr, row, types)`. Built once per operator and step, so
    a row pays for its values, not for walking and typing the tree: columns,
    literals, comparisons, integer arithmetic, AND/OR/IF and casts become
    closures; every other node is evaluated by `_eval` as before."""
    try:
        st = _scalar_type(expr, types)
    except Exception:  # an expression that fails to type fails per row, as before
        return lambda row: eval_scalar(expr, row, types)
    compiled = _compiled(expr, types)
    if _never_nan(expr, st):
        return compiled
    return lambda row: one_nan(compiled(row))


def _never_nan(expr: ScalarExpr, st: ScalarType) -> bool:
    """Whether `expr`, of type `st`, never holds a float NaN. A Record is
    typed as its first field but is a tuple of all of them (array_agg's
    value then its ORDER BY keys), so a tree with one may hold a NaN."""
    if not (is_integer(st) or st in (S.BOOLEAN, S.TEXT, S.DATE, S.TIMESTAMP, S.TIMESTAMPTZ)):
        return False
    pending = [expr]
    while pending:
        node = pending.pop()
        if isinstance(node, Record):
            return False
        pending += node.children()
    return True


def _compiled(expr: ScalarExpr, types: tuple[ColumnType, ...]) -> Compiled:
    """`_compile(expr, types)`; an expression that fails to type is
    interpreted (and fails per row, as before)."""
    try:
        return _compile(expr, types)
    except Exception:
        return lambda row: _eval(expr, row, types)


# id(aggregate) -> (a weak reference to it, the types, its argument
# compiled): compiled once per plan, not once per group. Weak, so the entry
# goes with its plan (the closure holds the argument, not the aggregate).
_ARGUMENTS: dict[int, tuple[weakref.ref[AggregateExpr], tuple[ColumnType, ...], Compiled]] = {}


def _argument(agg: AggregateExpr, types: tuple[ColumnType, ...]) -> Compiled:
    """`agg`'s argument as a function of a row (`_eval` without one_nan)."""
    key = id(agg)
    found = _ARGUMENTS.get(key)
    if found is not None and found[0]() is agg and (found[1] is types or found[1] == types):
        return found[2]
    compiled = _compiled(agg.expr, types)

    def forget(ref: weakref.ref[AggregateExpr]) -> None:
        if _ARGUMENTS.get(key, (None,))[0] is ref:  # not a newer aggregate at the same address
            _ARGUMENTS.pop(key, None)

    _ARGUMENTS[key] = (weakref.ref(agg, forget), types, compiled)
    return compiled


def _compile(expr: ScalarExpr, types: tuple[ColumnType, ...]) -> Compiled:
    if isinstance(expr, Column):
        return operator.itemgetter(expr.index)
    if isinstance(expr, Literal):
        value = expr.value
        return lambda row: value
    if isinstance(expr, CallBinary):
        return _compile_binary(expr, types)
    if isinstance(expr, If):
        cond, then, els = (_compile(e, types) for e in (expr.cond, expr.then, expr.els))
        return lambda row: then(row) if cond(row) is True else els(row)
    if isinstance(expr, CallVariadic) and expr.func in (VariadicFunc.AND, VariadicFunc.OR):
        return _compile_logic(expr, types)
    if isinstance(expr, Cast):
        return _compile_cast(expr, types)
    return lambda row: _eval(expr, row, types)


def _compile_cast(expr: Cast, types: tuple[ColumnType, ...]) -> Compiled:
    """`cast_value` with its type tests done once: a cast to the same type
    is the value, one between integer types a range check."""
    inner, src, dst = _compile(expr.expr, types), _scalar_type(expr.expr, types), expr.to
    if src is dst:
        return inner
    if is_integer(src) and is_integer(dst):
        low, high = INT_RANGES[dst]

        def integer(row: Row) -> Any:
            value = inner(row)
            if value is not None and not low <= value <= high:
                raise EvalError(f"{dst.value} out of range", "22003")
            return value

        return integer
    return lambda row: cast_value(inner(row), src, dst)


def _compile_logic(expr: CallVariadic, types: tuple[ColumnType, ...]) -> Compiled:
    """AND / OR in three-valued logic, left to right, stopping at the first
    FALSE (AND) / TRUE (OR) as `_eval` does: an operand after it is not
    evaluated (nor its error raised)."""
    parts = [_compile(e, types) for e in expr.exprs]
    decisive = expr.func is VariadicFunc.OR
    if len(parts) == 2:
        first, second = parts

        def pair(row: Row) -> Any:
            a = first(row)
            if a is decisive:
                return decisive
            b = second(row)
            if b is decisive:
                return decisive
            return None if a is None or b is None else not decisive

        return pair

    def logic(row: Row) -> Any:
        unknown = False
        for part in parts:
            value = part(row)
            if value is decisive:
                return decisive
            unknown = unknown or value is None
        return None if unknown else not decisive

    return logic


def _compile_binary(expr: CallBinary, types: tuple[ColumnType, ...]) -> Compiled:
    left, right, func = _compile(expr.left, types), _compile(expr.right, types), expr.func
    if func in COMPARISON_OPERATORS:
        compare = COMPARISON_OPERATORS[func]

        def comparison(row: Row) -> Any:
            a, b = left(row), right(row)
            if a is None or b is None:
                return None
            if is_nan(a) or is_nan(b):
                a, b = nan_ordered(a), nan_ordered(b)
            return compare(a, b)

        return comparison
    st = _scalar_type(expr, types)
    if is_integer(st) and func in _INTEGER_OPS:
        low, high = INT_RANGES[st]
        apply = _INTEGER_OPS[func]
        divides = func in (BinaryFunc.DIV, BinaryFunc.MOD)

        def integer(row: Row) -> Any:
            a, b = left(row), right(row)
            if a is None or b is None:
                return None
            if divides and b == 0:
                raise EvalError("division by zero", "22012")
            result = apply(a, b)
            if not low <= result <= high:
                raise EvalError(f"{st.value} out of range", "22003")
            return result

        return integer

    def binary(row: Row) -> Any:
        a, b = left(row), right(row)
        if a is None or b is None:
            return None
        if func is BinaryFunc.LIKE:
            return _like(a, b)
        if func is BinaryFunc.CONCAT:
            return a + b
        return _arith(func, a, b, st)

    return binary


def aggregate_values(
    agg: AggregateExpr, rows: list[tuple[Row, int]], types: tuple[ColumnType, ...]
) -> Any:
    """The aggregate over rows with positive multiplicities."""
    if agg.func is AggregateFunc.ARRAY_AGG:
        return _array_agg(agg, rows, types)
    values: list[Any] = []
    value_of = _argument(agg, types)
    for row, count in rows:
        value = value_of(row)
        if value is not None:
            values += [value] * count
    if agg.distinct:
        values = list(dict.fromkeys(values))
    out_type = agg.typ(types).scalar_type
    if agg.func is AggregateFunc.COUNT:
        return len(values)
    if not values:
        return None
    if agg.func is AggregateFunc.STRING_AGG:
        return (agg.separator or "").join(sorted(values, reverse=agg.descending))
    if agg.func in (AggregateFunc.MIN, AggregateFunc.MAX):
        # as ORDER BY orders values (arrays with NULL elements, NaN); Python's
        # own < fails on arrays with NULLs (a scalar subquery's two rows).
        from coordinator_lib.compute.local_ordered import compare_values  # imports this module

        order = functools.cmp_to_key(lambda a, b: compare_values(a, b, False, True))
        return (min if agg.func is AggregateFunc.MIN else max)(values, key=order)
    if out_type is S.NUMERIC:
        return to_numeric(
            functools.reduce(ARITHMETIC.add, map(decimal.Decimal, values), decimal.Decimal(0))
        )
    if is_integer(out_type):
        return check_range(sum(values), out_type)
    return float_result(lambda: float_sum(values), out_type)


def _compare_nullable(a: Any, b: Any, descending: bool, nulls_first: bool) -> int:
    if a is None or b is None:
        if a is None and b is None:
            return 0
        return (-1 if nulls_first else 1) if a is None else (1 if nulls_first else -1)
    if a == b:
        return 0
    less = a < b
    if descending:
        less = not less
    return -1 if less else 1


def _array_agg(
    agg: AggregateExpr, rows: list[tuple[Row, int]], types: tuple[ColumnType, ...]
) -> tuple | None:
    """array_agg: the records (value, keys...) of the rows, each as often as
    its multiplicity, ordered by the keys then the value (ascending, NULLs
    last); NULL records are rows FILTER left out. None for no rows. Spark's
    rendering (`compute/render.py`) sorts with the same comparator."""
    items: list[tuple] = []
    record_of = _argument(agg, types)
    for row, count in rows:
        record = record_of(row)
        if record is not None:
            items += [record] * count
    if not items:
        return None
    directions = [*agg.order, (False, False)]

    def compare(a: tuple, b: tuple) -> int:
        fields = [*range(1, len(a)), 0]
        for i, (descending, nulls_first) in zip(fields, directions, strict=True):
            result = _compare_nullable(a[i], b[i], descending, nulls_first)
            if result:
                return result
        return 0

    items.sort(key=functools.cmp_to_key(compare))
    return tuple(item[0] for item in items)
