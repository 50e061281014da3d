"""The compiled scalars of in-process steps (local_scalar.compile_scalar)
answer and fail exactly as the interpreter (eval_scalar) on the same row:
the same value (a NaN as the one object rows hold), or the same error class,
SQLSTATE and message. Held over random typed expression trees (every node
the compiler handles, and nodes it leaves to the interpreter, around them),
over the expressions the SQL planner makes of random SQL, and in the
contexts a step uses them: a map-filter-project (local_backend._linear
against the per-row interpretation it replaced), an aggregate's argument
(aggregate_values) and a Reduce's value row (local_backend._values_of)."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import math
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator_lib.compute import local_scalar
from coordinator_lib.compute.local_backend import _linear
from coordinator_lib.compute.local_scalar import (
    _compiled,
    _eval,
    compile_scalar,
    eval_scalar,
)
from coordinator_lib.expr import relation as rel
from coordinator_lib.expr.scalar import (
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
    common_numeric,
)
from coordinator_lib.expr.text_input import INT_RANGES
from coordinator_lib.repr.relation import ColumnType, RelationDesc
from coordinator_lib.repr.relation import ScalarType as S
from coordinator_lib.sql import SelectPlan, plan_statement
from coordinator_lib.sql.errors import SqlError
from tests.sql.support import make_catalog
from tests.sql.test_random_expressions import expressions
from tests.sql.test_random_expressions import rows as table_rows

NUMBERS = [S.SMALLINT, S.INTEGER, S.BIGINT, S.NUMERIC, S.REAL, S.DOUBLE]
OTHERS = [S.TEXT, S.BOOLEAN, S.DATE, S.TIMESTAMP]
TYPES = NUMBERS + OTHERS
D = decimal.Decimal
EDGES: dict[S, list[Any]] = {
    S.SMALLINT: [0, 1, -1, 2, 7, -32768, 32767, 16384, -16384, 181],
    S.INTEGER: [0, 1, -1, 3, -7, -(2**31), 2**31 - 1, 2**16, 46341, -(2**30)],
    S.BIGINT: [0, 1, -1, 5, -(2**63), 2**63 - 1, 2**32, 3037000500, -(2**62)],
    S.NUMERIC: [D(0), D("1.5"), D("-0.005"), D("2.5"), D("-2.5"), D("1e20"), D("0.0000000001")],
    S.REAL: [0.0, -0.0, 1.5, -2.5, math.nan, math.inf, -math.inf, 3.4e38, 1e-30],
    S.DOUBLE: [0.0, -0.0, 0.5, -1.5, math.nan, math.inf, -math.inf, 1e308, 5e-324, 2.5],
    S.TEXT: ["", "a", "A", "%", "_", "\\", "a%", "1", "-3", "t", "NaN", "2024-01-01", "x_y"],
    S.BOOLEAN: [True, False],
    S.DATE: [dt.date(2024, 1, 1), dt.date(1, 1, 1), dt.date(9999, 12, 31)],
    S.TIMESTAMP: [dt.datetime(2024, 1, 1, 12, 30), dt.datetime(2000, 2, 29)],
}
# Table: one column of each type, twice (so a tree can compare two columns).
SCHEMA = tuple(ColumnType(t, True) for t in TYPES * 2)


SETTINGS = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def values(t: S) -> st.SearchStrategy[Any]:
    edges = st.sampled_from(EDGES[t])
    if t in (S.SMALLINT, S.INTEGER, S.BIGINT):
        return edges | st.integers(-1000, 1000)
    specials = st.sampled_from([math.nan, math.inf, -math.inf, 0.0])
    if t is S.DOUBLE:
        return specials | edges | st.floats(allow_nan=False)
    if t is S.REAL:
        return specials | edges | st.floats(-1e6, 1e6, width=32)
    if t is S.NUMERIC:
        return edges | st.decimals(-(10**6), 10**6, places=3, allow_nan=False)
    if t is S.TEXT:
        return edges | st.text("ab%_\\1", max_size=4)
    return edges


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


rows = st.tuples(*(_maybe(values(t.scalar_type)) for t in SCHEMA))


@st.composite
def trees(draw: st.DrawFn, want: S, depth: int = 3) -> ScalarExpr:
    """A well-typed expression of type `want` over SCHEMA."""
    leaf = draw(st.integers(0, 9)) < 3 or depth == 0
    if leaf:
        kind = draw(st.integers(0, 19))
        if kind < 10:
            return Column(
                draw(st.sampled_from([i for i, c in enumerate(SCHEMA) if c.scalar_type is want]))
            )
        if kind < 19:
            value = draw(_maybe(values(want)))
            if value is math.nan and draw(st.booleans()):
                value = float("nan")  # a NaN object of its own, as arithmetic makes
            return Literal(value, ColumnType(want, value is None))
        return RaiseError("XX123", "raised", ColumnType(want, True))
    sub = depth - 1
    # Each type's own operators first (a draw favours the first choices),
    # then CASE, COALESCE and casts (from numbers more often).
    general: list[Callable[[], ScalarExpr]] = [
        lambda: Cast(draw(trees(draw(st.sampled_from(NUMBERS + TYPES)), sub)), want),
        lambda: If(draw(trees(S.BOOLEAN, sub)), draw(trees(want, sub)), draw(trees(want, sub))),
        lambda: CallVariadic(
            VariadicFunc.COALESCE, (draw(trees(want, sub)), draw(trees(want, sub)))
        ),
    ]
    choices: list[Callable[[], ScalarExpr]] = []
    if want in NUMBERS:

        def arithmetic() -> ScalarExpr:
            other = draw(st.sampled_from([t for t in NUMBERS if common_numeric(want, t) is want]))
            a, b = draw(trees(want, sub)), draw(trees(other, sub))
            if draw(st.booleans()):
                a, b = b, a
            func = draw(
                st.sampled_from(
                    [BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV, BinaryFunc.MOD]
                )
            )
            return CallBinary(func, a, b)

        choices += [
            arithmetic,
            arithmetic,
            lambda: CallUnary(
                draw(st.sampled_from([UnaryFunc.NEG, UnaryFunc.ABS])), draw(trees(want, sub))
            ),
            lambda: CallVariadic(
                draw(st.sampled_from([VariadicFunc.GREATEST, VariadicFunc.LEAST])),
                (draw(trees(want, sub)), draw(trees(want, sub))),
            ),
        ]
        if want in (S.INTEGER, S.DOUBLE):  # an If whose branches differ (typed as the wider)
            narrow = S.SMALLINT if want is S.INTEGER else S.INTEGER
            choices.append(
                lambda: If(
                    draw(trees(S.BOOLEAN, sub)), draw(trees(narrow, sub)), draw(trees(want, sub))
                )
            )
    if want is S.INTEGER:
        choices.append(lambda: CallUnary(UnaryFunc.LENGTH, draw(trees(S.TEXT, sub))))
    if want is S.TEXT:
        choices += [
            lambda: CallBinary(
                BinaryFunc.CONCAT, draw(trees(S.TEXT, sub)), draw(trees(S.TEXT, sub))
            ),
            lambda: CallUnary(
                draw(st.sampled_from([UnaryFunc.LOWER, UnaryFunc.UPPER])), draw(trees(S.TEXT, sub))
            ),
        ]
    if want is S.BOOLEAN:

        def comparison() -> ScalarExpr:
            a = draw(st.sampled_from(TYPES))
            b = draw(st.sampled_from(NUMBERS)) if a in NUMBERS else a
            func = draw(
                st.sampled_from(
                    [
                        BinaryFunc.EQ,
                        BinaryFunc.NOT_EQ,
                        BinaryFunc.LT,
                        BinaryFunc.LTE,
                        BinaryFunc.GT,
                        BinaryFunc.GTE,
                    ]
                )
            )
            return CallBinary(func, draw(trees(a, sub)), draw(trees(b, sub)))

        def logic() -> ScalarExpr:
            func = draw(st.sampled_from([VariadicFunc.AND, VariadicFunc.OR]))
            count = draw(st.integers(1, 3))
            return CallVariadic(func, tuple(operand() for _ in range(count)))

        def operand() -> ScalarExpr:  # an error beside a decisive operand, often
            if draw(st.integers(0, 3)) == 0:
                return RaiseError("XX123", "raised", ColumnType(S.BOOLEAN, True))
            return draw(trees(S.BOOLEAN, sub))

        choices += [
            comparison,
            comparison,
            logic,
            logic,
            lambda: CallUnary(
                draw(
                    st.sampled_from(
                        [
                            UnaryFunc.NOT,
                            UnaryFunc.IS_NULL,
                            UnaryFunc.IS_NOT_NULL,
                            UnaryFunc.IS_TRUE,
                            UnaryFunc.IS_FALSE,
                        ]
                    )
                ),
                draw(trees(S.BOOLEAN, sub)),
            ),
            lambda: CallBinary(BinaryFunc.LIKE, draw(trees(S.TEXT, sub)), draw(trees(S.TEXT, sub))),
        ]
    return draw(st.sampled_from(choices + general))()


any_tree = st.sampled_from([S.BOOLEAN, *TYPES]).flatmap(lambda t: trees(t))
BOOM = RaiseError("XX123", "raised", ColumnType(S.BOOLEAN, True))
COMPARISONS = [BinaryFunc.EQ, BinaryFunc.NOT_EQ, BinaryFunc.LT, BinaryFunc.LTE, BinaryFunc.GT]
ARITHMETIC = [BinaryFunc.ADD, BinaryFunc.SUB, BinaryFunc.MUL, BinaryFunc.DIV, BinaryFunc.MOD]


@st.composite
def nodes(draw: st.DrawFn) -> ScalarExpr:
    """One node the compiler compiles, over leaves (columns, literals with
    edge values, errors): each kind equally often, so range ends, NaN and
    errors beside decisive operands meet the node."""

    def leaf(t: S) -> ScalarExpr:
        return draw(trees(t, 0))

    kind = draw(st.sampled_from(["compare", "arith", "cast", "logic", "if"]))
    if kind == "compare":
        a = draw(st.sampled_from(TYPES))
        b = draw(st.sampled_from(NUMBERS)) if a in NUMBERS else a
        return CallBinary(draw(st.sampled_from([*COMPARISONS, BinaryFunc.GTE])), leaf(a), leaf(b))
    if kind == "arith":
        a = draw(st.sampled_from(NUMBERS))
        b = draw(st.sampled_from(NUMBERS))
        return CallBinary(draw(st.sampled_from(ARITHMETIC)), leaf(a), leaf(b))
    if kind == "cast":
        return Cast(leaf(draw(st.sampled_from(TYPES))), draw(st.sampled_from(TYPES)))
    if kind == "logic":
        func = draw(st.sampled_from([VariadicFunc.AND, VariadicFunc.OR]))
        count = draw(st.integers(1, 4))
        return CallVariadic(
            func, tuple(draw(st.sampled_from([BOOM, leaf(S.BOOLEAN)])) for _ in range(count))
        )
    t = draw(st.sampled_from(TYPES))
    branch = st.sampled_from([leaf(t), leaf(t), RaiseError("XX123", "raised", ColumnType(t, True))])
    return If(draw(st.sampled_from([BOOM, leaf(S.BOOLEAN)])), draw(branch), draw(branch))


@SETTINGS
@given(expr=nodes(), batch=st.lists(rows, min_size=1, max_size=5))
def test_each_compiled_node_answers_as_the_interpreter(expr: ScalarExpr, batch: list[Any]) -> None:
    compiled = compile_scalar(expr, SCHEMA)
    for row in batch:
        assert outcome(compiled, row) == outcome(eval_scalar, expr, row, SCHEMA), (expr, row)


def shape(value: Any) -> Any:
    """A value as it must match: its Python type and repr (a Decimal's scale,
    an int is not a bool, -0.0 is not 0.0), and a NaN whether it is the one
    NaN object rows hold (repr/nan.py)."""
    if type(value) is float and value != value:
        return ("nan", value is math.nan)
    if type(value) is tuple:
        return ("tuple", tuple(shape(v) for v in value))
    return (type(value).__name__, repr(value))


def outcome(function: Callable[..., Any], *args: Any) -> Any:
    """`function(*args)` as its value's shape or its error."""
    try:
        return ("value", shape(function(*args)))
    except Exception as error:  # the class, SQLSTATE and message must match
        return ("error", type(error).__name__, getattr(error, "code", None), str(error))


@SETTINGS
@given(expr=any_tree, batch=st.lists(rows, min_size=1, max_size=5))
def test_compiled_scalars_answer_as_the_interpreter(expr: ScalarExpr, batch: list[Any]) -> None:
    compiled, argument = compile_scalar(expr, SCHEMA), _compiled(expr, SCHEMA)
    for row in batch:
        want = outcome(eval_scalar, expr, row, SCHEMA)
        assert outcome(compiled, row) == want, (expr, row)
        # an aggregate's argument: _eval, without one_nan
        assert outcome(argument, row) == outcome(_eval, expr, row, SCHEMA)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    value=st.sampled_from(TYPES).flatmap(lambda t: trees(t, 2)),
    key=st.sampled_from([S.DOUBLE, S.REAL, *TYPES]).flatmap(lambda t: trees(t, 2)),
    batch=st.lists(rows, min_size=1, max_size=5),
)
def test_compiled_records_answer_as_the_interpreter(
    value: ScalarExpr, key: ScalarExpr, batch: list[Any]
) -> None:
    """array_agg's argument: a Record (typed as its first field) of the
    value and an ORDER BY key, or NULL (FILTER)."""
    for expr in (Record((value, key)), If(key, Record((value, key)), Literal(None, SCHEMA[0]))):
        compiled = compile_scalar(expr, SCHEMA)
        for row in batch:
            want = outcome(eval_scalar, expr, row, SCHEMA)
            assert outcome(compiled, row) == want, (expr, row)


def test_a_record_of_a_text_and_a_computed_nan_holds_the_one_nan() -> None:
    """The case the record test found: a Record typed as its text field was
    returned without one_nan, so its NaN field was a NaN of its own (a
    DISTINCT of such records never matched). Fails without the fix."""
    types = (ColumnType(S.TEXT, True), ColumnType(S.DOUBLE, True))
    zero = Literal(0.0, ColumnType(S.DOUBLE, False))
    expr = Record((Column(0), CallBinary(BinaryFunc.MUL, Column(1), zero)))
    got = compile_scalar(expr, types)(("a", math.inf))
    assert got == eval_scalar(expr, ("a", math.inf), types)
    assert got[1] is math.nan


def test_case_and_logic_evaluate_as_the_interpreter_on_errors() -> None:
    """The classic cases by hand: CASE does not evaluate the branch not
    taken (no division by zero), COALESCE stops at its first non-NULL, AND/OR
    stop at their first FALSE / TRUE."""
    types = (ColumnType(S.INTEGER, True), ColumnType(S.INTEGER, True))
    x, y = Column(0), Column(1)
    zero = Literal(0, ColumnType(S.INTEGER, False))
    boom = RaiseError("XX123", "raised", ColumnType(S.BOOLEAN, True))
    false = Literal(False, ColumnType(S.BOOLEAN, False))
    true = Literal(True, ColumnType(S.BOOLEAN, False))
    cases = [
        If(CallBinary(BinaryFunc.EQ, y, zero), zero, CallBinary(BinaryFunc.DIV, x, y)),
        CallVariadic(VariadicFunc.COALESCE, (x, CallBinary(BinaryFunc.DIV, x, y))),
        CallVariadic(VariadicFunc.AND, (false, boom)),
        CallVariadic(VariadicFunc.OR, (true, boom)),
        CallBinary(BinaryFunc.MUL, x, x),
    ]
    for expr in cases:
        compiled = compile_scalar(expr, types)
        for row in [(7, 0), (None, 0), (2**31 - 1, 2), (-(2**31), -1), (5, None)]:
            want = outcome(eval_scalar, expr, row, types)
            assert outcome(compiled, row) == want, (expr, row)
    div = compile_scalar(cases[0], types)
    assert div((7, 0)) == 0 and div((7, 2)) == 3 and div((-7, 2)) == -3


def test_and_or_stop_at_the_first_decisive_operand() -> None:
    """PostgreSQL's answers (Spark's And/Or alike): operands
    are evaluated left to right and those after the first FALSE (AND) /
    TRUE (OR) are not, so `v <> 0 AND k / v > 1` is FALSE where v = 0; an
    error before it, or after a NULL, is raised. Interpreted and compiled.
    Fails on the code before (an AND / OR evaluated every operand)."""
    types = (ColumnType(S.INTEGER, True), ColumnType(S.INTEGER, True))
    k, v = Column(0), Column(1)
    zero = Literal(0, ColumnType(S.INTEGER, False))
    one = Literal(1, ColumnType(S.INTEGER, False))
    false = Literal(False, ColumnType(S.BOOLEAN, False))
    true = Literal(True, ColumnType(S.BOOLEAN, False))
    null = Literal(None, ColumnType(S.BOOLEAN, True))
    AND, OR = VariadicFunc.AND, VariadicFunc.OR
    raised = ("error", "EvalError", "XX123", "raised")
    by_zero = ("error", "EvalError", "22012", "division by zero")
    guard = CallBinary(BinaryFunc.NOT_EQ, v, zero)
    ratio = CallBinary(BinaryFunc.GT, CallBinary(BinaryFunc.DIV, k, v), one)
    cases: list[tuple[VariadicFunc, tuple[ScalarExpr, ...], tuple[Any, ...], Any]] = [
        (AND, (false, BOOM), (), False),
        (AND, (null, false, BOOM), (), False),
        (AND, (true, null), (), None),
        (AND, (true, true, true), (), True),
        (AND, (BOOM, false), (), raised),
        (AND, (null, BOOM), (), raised),
        (OR, (true, BOOM), (), True),
        (OR, (false, null, true, BOOM), (), True),
        (OR, (false, null), (), None),
        (OR, (false, false), (), False),
        (OR, (BOOM, true), (), raised),
        (OR, (false, BOOM), (), raised),
        (AND, (guard, ratio), (7, 0), False),
        (AND, (guard, ratio), (7, 2), True),
        (AND, (guard, ratio), (None, 0), False),
        (AND, (ratio, guard), (7, 0), by_zero),
        (OR, (CallUnary(UnaryFunc.NOT, guard), ratio), (7, 0), True),
    ]
    for func, operands, row, want in cases:
        expr = CallVariadic(func, operands)
        want = want if isinstance(want, tuple) else ("value", shape(want))
        assert outcome(eval_scalar, expr, row or (None, None), types) == want, expr
        assert outcome(compile_scalar(expr, types), row or (None, None)) == want, expr
    # CASE WHEN v <> 0 AND k / v > 1 THEN 'p' ELSE 'n' END
    text = ColumnType(S.TEXT, False)
    case = If(CallVariadic(AND, (guard, ratio)), Literal("p", text), Literal("n", text))
    assert eval_scalar(case, (7, 0), types) == compile_scalar(case, types)((7, 0)) == "n"


INTEGERS = [S.SMALLINT, S.INTEGER, S.BIGINT]


def _ends(t: S) -> list[Any]:
    low, high = INT_RANGES[t]
    return [low, low + 1, -2, -1, 0, 1, 2, high - 1, high, None]


def test_integer_arithmetic_and_casts_at_the_range_ends() -> None:
    """Every integer operator and cast on every pair of values next to the
    types' ends (where 22003 starts), compiled as interpreted."""
    for a, b in itertools.product(INTEGERS, INTEGERS):
        types = (ColumnType(a, True), ColumnType(b, True))
        exprs = [CallBinary(func, Column(0), Column(1)) for func in ARITHMETIC]
        exprs += [Cast(Column(0), b), CallUnary(UnaryFunc.NEG, Column(0))]
        for expr in exprs:
            compiled = compile_scalar(expr, types)
            for row in itertools.product(_ends(a), _ends(b)):
                assert outcome(compiled, row) == outcome(eval_scalar, expr, row, types), (expr, row)


SPECIAL = {
    S.DOUBLE: [math.nan, float("nan"), math.inf, -math.inf, 0.0, -0.0, 1.0, 1e308, None],
    S.REAL: [math.nan, math.inf, -math.inf, 0.0, 1.5, None],
    S.NUMERIC: [D("0"), D("-0.0"), D("1.000"), D("1e-10"), None],
    S.INTEGER: [0, 1, -1, 2**31 - 1, None],
    S.BIGINT: [0, 1, 2**63 - 1, None],
}


def test_comparisons_and_arithmetic_of_special_numbers() -> None:
    """Comparisons and arithmetic between every pair of numeric types on
    NaN (the one object and one of its own), infinities, signed zeros and
    scales, compiled as interpreted."""
    for a, b in itertools.product(SPECIAL, SPECIAL):
        types = (ColumnType(a, True), ColumnType(b, True))
        funcs = [*COMPARISONS, BinaryFunc.GTE, *ARITHMETIC]
        for func in funcs:
            expr = CallBinary(func, Column(0), Column(1))
            compiled = compile_scalar(expr, types)
            for row in itertools.product(SPECIAL[a], SPECIAL[b]):
                assert outcome(compiled, row) == outcome(eval_scalar, expr, row, types), (expr, row)


# ------------------------------------------------------------- from SQL
CATALOG = make_catalog()


def _interpreted_linear(ops: list[Any]) -> Callable[[Any], Any]:
    """local_backend._linear as it was before compile_scalar (1b9c8a3^)."""

    def apply(row: Any) -> Any:
        for op in ops:
            if isinstance(op, rel.Filter):
                types = op.input.desc.types
                if not all(eval_scalar(p, row, types) is True for p in op.predicates):
                    return None
            elif isinstance(op, rel.Map):
                all_types = op.desc.types
                out = list(row)
                for scalar in op.scalars:
                    out.append(eval_scalar(scalar, tuple(out), all_types[: len(out)]))
                row = tuple(out)
            else:
                row = tuple(row[i] for i in op.outputs)
        return row

    return apply


def _chains(expr: rel.RelationExpr) -> list[tuple[list[Any], rel.RelationExpr | None]]:
    """Each Map/Filter/Project chain over the table (its ops bottom up, none
    for the table itself) and the node it is the input of."""
    found: list[tuple[list[Any], rel.RelationExpr | None]] = []

    def walk(node: rel.RelationExpr, parent: rel.RelationExpr | None) -> None:
        ops = []
        while isinstance(node, rel.Map | rel.Filter | rel.Project):
            ops.append(node)
            node = node.input
        if isinstance(node, rel.Get):
            found.append((ops[::-1], parent))
        for child in node.inputs():
            walk(child, node)

    walk(expr, None)
    return found


def _answers_alike(sql: str, table: list[tuple]) -> None:
    try:
        plan = plan_statement(sql, CATALOG)
    except SqlError:
        return
    assert isinstance(plan, SelectPlan)
    for ops, parent in _chains(plan.expr):
        compiled, interpreted = _linear(ops), _interpreted_linear(ops)
        outputs = []
        for row in table:
            want = outcome(interpreted, row)
            assert outcome(compiled, row) == want, (sql, row)
            if want[0] == "value" and want[1] != ("NoneType", "None"):
                outputs.append(interpreted(row))
        if isinstance(parent, rel.Reduce):
            _reduce_alike(sql, parent, outputs)


def _reduce_alike(sql: str, reduce: rel.Reduce, rows: list[Any]) -> None:
    """The group key and the aggregates' arguments compiled as interpreted,
    and each aggregate's value as with its argument interpreted."""
    types = reduce.input.desc.types
    for expr in (*reduce.group_key, *(a.expr for a in reduce.aggregates)):
        compiled = compile_scalar(expr, types)
        for row in rows:
            want = outcome(eval_scalar, expr, row, types)
            assert outcome(compiled, row) == want, (sql, expr, row)
    present = [(row, 1) for row in rows]
    for aggregate in reduce.aggregates:
        got = outcome(local_scalar.aggregate_values, aggregate, present, types)
        with _interpreting_arguments():
            want = outcome(local_scalar.aggregate_values, aggregate, present, types)
        assert got == want, (sql, aggregate)


class _interpreting_arguments:
    """aggregate_values with its argument interpreted (as before 3da5105)."""

    def __enter__(self) -> None:
        self.saved = local_scalar._argument
        local_scalar._argument = lambda agg, types: lambda row: _eval(agg.expr, row, types)

    def __exit__(self, *_: Any) -> None:
        local_scalar._argument = self.saved


SQL_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@SQL_SETTINGS
@given(expr=expressions, table=table_rows)
def test_planned_expressions_answer_as_interpreted(expr: str, table: list[tuple]) -> None:
    _answers_alike(f"SELECT {expr}, a FROM t", table)
    _answers_alike(f"SELECT a, b FROM t WHERE {expr}", table)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    agg=st.sampled_from(
        ["count", "sum", "min", "max", "string_agg", "array_agg", "count(DISTINCT"]
    ),
    expr=expressions,
    table=table_rows,
)
def test_planned_aggregates_answer_as_interpreted(agg: str, expr: str, table: list[tuple]) -> None:
    if agg.endswith("DISTINCT"):
        call = f"{agg} {expr})"
    elif agg == "string_agg":
        call = f"string_agg(({expr})::text, ',')"
    elif agg == "array_agg":
        call = f"array_agg({expr} ORDER BY e)"
    else:
        call = f"{agg}({expr})"
    _answers_alike(f"SELECT b, {call} FROM t GROUP BY b", table)
    _answers_alike(f"SELECT {expr} AS k, {call} FROM t GROUP BY 1", table)


# --------------------------------------------------- a Reduce's value row
def _masked(arity: int, keep: set[int]) -> Callable[[tuple], tuple]:
    """local_backend._values_of before 1cc4ef8."""
    mask = [i in keep for i in range(arity)]
    return lambda row: tuple(v if m else None for v, m in zip(row, mask, strict=True))


@given(
    arity=st.integers(1, 6),
    data=st.data(),
)
def test_a_reduces_value_row_keeps_what_it_kept(arity: int, data: st.DataObject) -> None:
    from coordinator_lib.compute.local_backend import _values_of

    keep = data.draw(st.sets(st.integers(0, arity - 1)))
    row = tuple(data.draw(st.lists(st.integers() | st.none(), min_size=arity, max_size=arity)))
    desc = RelationDesc.of(*((f"c{i}", "integer") for i in range(arity)))
    reduce = rel.Reduce(rel.Constant((), desc), ())

    class Node:  # the two fields _values_of reads of a plan.Reduce
        value_columns = frozenset(keep)
        expr = reduce

    assert _values_of(Node())(row) == _masked(arity, keep)(row)  # type: ignore[arg-type]
