"""Binding scalar expressions: a sqlglot expression over a Scope becomes a
typed `expr.scalar` expression over column indexes.

Types follow PostgreSQL (see `coercion.py`): operands are cast to a common
type explicitly (so every CallBinary has two operands of one type and the
expr layer's `typ()` agrees with what PostgreSQL returns), untyped string
literals and NULL stay "unknown" until their context gives them a type, and
every type error names the operator or function, the types and the position.

After GROUP BY the same binder runs over the Reduce's output: a `Grouping`
maps aggregate calls and grouped expressions to its columns, and any other
column reference is a GroupingError.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from sqlglot import exp

from coordinator_lib.expr.functions import CallFunction
from coordinator_lib.expr.functions.arrays import ORDERED_ELEMENTS
from coordinator_lib.expr.relation import Map, Project, RelationExpr
from coordinator_lib.expr.scalar import (
    BinaryFunc,
    CallBinary,
    CallUnary,
    CallVariadic,
    Cast,
    Column,
    If,
    Literal,
    ScalarExpr,
    UnaryFunc,
    VariadicFunc,
    is_numeric,
)
from coordinator_lib.expr.temporal import MzNow
from coordinator_lib.repr.interval import Interval
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql import function_calls
from coordinator_lib.sql.coercion import (
    NO_FOLD,
    can_assign,
    can_cast_explicitly,
    can_cast_implicitly,
    common_type,
    declared_type,
    fold_cast,
    integer_literal_type,
    interval_typmod,
    number_literal,
    operator_type,
    parse_text_as,
    scalar_type_of,
    timestamp_precision,
)
from coordinator_lib.sql.errors import (
    AmbiguousFunction,
    CannotCoerce,
    GroupingError,
    ParseError,
    SqlError,
    TypeMismatch,
    UndefinedFunction,
    UndefinedOperator,
    UnsupportedFeature,
    WrongObjectType,
)
from coordinator_lib.sql.list_syntax import is_empty_list, list_concat
from coordinator_lib.sql.outer import OuterColumn, SubqueryExpr, SubqueryKind
from coordinator_lib.sql.positions import operator_position, position_of
from coordinator_lib.sql.row_comparison import (
    expand_row_comparison,
    expand_row_distinct,
    expand_row_in,
    expand_row_null_test,
    is_row_comparison,
    is_row_constructor,
    is_row_in,
    no_record_values,
    quantified_subquery,
    row_items,
)
from coordinator_lib.sql.scope import Scope, ident_name
from coordinator_lib.sql.select_srf import is_set_returning
from coordinator_lib.sql.temporal import bind_mz_now, compare_mz_now
from coordinator_lib.sql.typed import Typed, as_varchar, literal, null_of, number
from coordinator_lib.sql.typmod import read_text

if TYPE_CHECKING:
    from coordinator_lib.sql.query import BoundQuery

S = ScalarType
BOOL = ColumnType(S.BOOLEAN, False)
TRUE = Literal(True, BOOL)


def is_aggregate(node: exp.Expr) -> bool:
    """An aggregate call (optionally with FILTER), not inside a window."""
    if isinstance(node, exp.Filter):
        return isinstance(node.this, exp.AggFunc)
    return isinstance(node, exp.AggFunc) and not isinstance(node.parent, exp.Window | exp.Filter)


# Functions that exist only as window functions: called without OVER they
# are 42809, as PostgreSQL and Materialize answer, not an unknown function.
_WINDOW_FUNCTIONS = frozenset(
    {
        "row_number",
        "rank",
        "dense_rank",
        "percent_rank",
        "cume_dist",
        "ntile",
        "lag",
        "lead",
        "first_value",
        "last_value",
        "nth_value",
    }
)


def unsupported_call(name: str, aggregate: bool, position: int | None) -> SqlError:
    """The error for a call of `name` that cannot be planned here: a window
    function without OVER is 42809, as PostgreSQL and Materialize answer."""
    if name in _WINDOW_FUNCTIONS:
        return WrongObjectType(f"window function {name} requires an OVER clause", position)
    kind = "aggregate function" if aggregate else "function"
    return UnsupportedFeature(f"{kind} {name} is not supported yet", position)


def _values_subquery(node: exp.Expr) -> exp.Expr:
    """`VALUES (...)` as the subquery it is in `x IN (VALUES ...)`, and
    `x op ALL (...)` as the quantified comparison it is (sqlglot reads the
    first as an IN list's one item and the second as a call of a function
    ALL: `ALL (VALUES ...)`, `ALL ($1)`, `ALL (ARRAY[...])`); other nodes
    unchanged."""
    if isinstance(node, exp.Values):
        return exp.Subquery(this=node)
    word = node.name.upper() if isinstance(node, exp.Anonymous) else ""
    values = node.expressions if word in ("ALL", "ANY", "SOME") else []
    if len(values) == 1:
        quantifier = exp.All if word == "ALL" else exp.Any
        (value,) = values
        return quantifier(
            this=exp.Subquery(this=value)
            if isinstance(value, exp.Values)
            else exp.Paren(this=value)
        )
    return node


def _is_subquery(node: exp.Expr) -> bool:
    return isinstance(node, exp.Query | exp.Exists)


def contains_aggregate(node: exp.Expr) -> bool:
    """Whether `node` calls an aggregate of this query (not of a subquery)."""
    return any(
        isinstance(n, exp.AggFunc) and not isinstance(n.parent, exp.Window)
        for n in node.walk(prune=_is_subquery)
    )


def contains_subquery(node: exp.Expr) -> bool:
    return any(_is_subquery(n) for n in node.walk())


@dataclass
class Grouping:
    """What the SELECT list, HAVING and ORDER BY of a grouped query may use:
    the group keys (bound over the Reduce's input; key k is output column k)
    and the aggregate calls (by node identity, already expressions over the
    Reduce's output)."""

    pre: ScalarBinder
    keys: list[Typed]
    aggregates: dict[int, Typed] = field(default_factory=dict)

    def lookup(self, node: exp.Expr) -> Typed | None:
        if id(node) in self.aggregates:
            return self.aggregates[id(node)]
        if isinstance(node, exp.Literal | exp.Null | exp.Boolean | exp.Star):
            return None
        if contains_aggregate(node) or contains_subquery(node):
            return None
        bound = self.pre.bind(node)
        for k, key in enumerate(self.keys):
            if bound.expr == key.expr:
                return Typed(Column(k), key.type)
        if isinstance(bound.expr, OuterColumn):  # an enclosing query's column: a constant here
            return bound
        if isinstance(node, exp.Column):
            # Named as Materialize names it: with its FROM item ("t.a").
            if isinstance(bound.expr, Column):
                name = self.pre.scope.describe(bound.expr.index)
            else:
                name = ".".join(ident_name(p) for p in node.parts)
            raise GroupingError(
                f'column "{name}" must appear in the GROUP BY clause '
                "or be used in an aggregate function",
                position_of(node),
            )
        return None


_ARITHMETIC = {
    exp.Add: (BinaryFunc.ADD, "+"),
    exp.Sub: (BinaryFunc.SUB, "-"),
    exp.Mul: (BinaryFunc.MUL, "*"),
    exp.Div: (BinaryFunc.DIV, "/"),
    exp.Mod: (BinaryFunc.MOD, "%"),
}
_COMPARISON = {
    exp.EQ: (BinaryFunc.EQ, "="),
    exp.NEQ: (BinaryFunc.NOT_EQ, "<>"),
    exp.GT: (BinaryFunc.GT, ">"),
    exp.GTE: (BinaryFunc.GTE, ">="),
    exp.LT: (BinaryFunc.LT, "<"),
    exp.LTE: (BinaryFunc.LTE, "<="),
}
_TEXT_FUNCS = {exp.Lower: UnaryFunc.LOWER, exp.Upper: UnaryFunc.UPPER}
_NAMED_ALIASES = {"char_length": "length", "character_length": "length"}
_NO_MIN_MAX = {S.BOOLEAN, S.JSONB, S.BYTEA, *(st for st in S if st.element is not None)}


class ScalarBinder:
    """Binds expressions over `types` (the columns Column(i) indexes): the
    scope's columns, or with `grouping` the Reduce's output. `clause` names
    where the expression sits, for "not allowed in WHERE" messages."""

    def __init__(
        self,
        scope: Scope,
        clause: str,
        *,
        types: tuple[ColumnType, ...] | None = None,
        grouping: Grouping | None = None,
    ) -> None:
        self.scope = scope
        self.clause = clause
        self.types = scope.types if types is None else types
        self.grouping = grouping

    # --- entry points ----------------------------------------------------------

    def bind(self, node: exp.Expr) -> Typed:
        if self.grouping is not None:
            hit = self.grouping.lookup(node)
            if hit is not None:
                return hit
        elif is_aggregate(node):
            raise GroupingError(
                f"aggregate functions are not allowed in {self.clause}", position_of(node)
            )
        handler = self._handler(node)
        return handler(node)

    def bind_boolean(self, node: exp.Expr, what: str) -> Typed:
        """An expression that must be boolean (`what` is e.g. "WHERE")."""
        return self.require_boolean(self.bind(node), node, f"argument of {what}")

    def bind_final(self, node: exp.Expr) -> Typed:
        """Bind and give an unknown literal its default type, text."""
        return finalize(self.bind(node))

    # --- dispatch --------------------------------------------------------------

    def _handler(self, node: exp.Expr) -> Callable[[Any], Typed]:
        if type(node) is exp.Literal:  # the commonest node: not worth the table below
            return self._literal
        if type(node) in _ARITHMETIC:
            return self._arithmetic
        if type(node) in _COMPARISON:
            return self._comparison
        if type(node) in _TEXT_FUNCS:
            return self._text_function
        if function_calls.binds_node(node):
            return lambda n: function_calls.bind_node(self, n)
        if self.scope.context is not None:
            if type(node) is exp.Subquery:
                return self._subquery
            if type(node) is exp.Exists:
                return self._exists
        name = _HANDLERS.get(type(node))
        if name is not None:
            return cast(
                "Callable[[Any], Typed]", getattr(self, name)
            )  # a string: no alias built per call
        return self._unsupported

    def _paren(self, node: exp.Paren) -> Typed:
        return self.bind(node.this)

    def _null(self, node: exp.Null) -> Typed:
        return Typed(null_of(S.TEXT), ColumnType(S.TEXT, True), unknown=True)

    def _boolean(self, node: exp.Boolean) -> Typed:
        return literal(bool(node.this), S.BOOLEAN)

    def _unsupported(self, node: exp.Expr) -> Typed:
        position = position_of(node)
        if isinstance(node, exp.Subquery | exp.Exists | exp.Select | exp.Query):
            raise UnsupportedFeature("subqueries are not supported here", position)
        if isinstance(node, exp.Window):
            raise UnsupportedFeature("window functions are not supported yet", position)
        if isinstance(node, exp.CurrentDate):
            raise UnsupportedFeature(
                "current_date is not allowed here: it is not materializable "
                "(a view can use mz_now() in a temporal filter)",
                position,
            )
        if isinstance(node, exp.CurrentTimestamp):
            raise UnsupportedFeature(
                "now() is not allowed here: it is not materializable "
                "(a view can use mz_now() in a temporal filter)",
                position,
            )
        if isinstance(node, exp.Placeholder | exp.Parameter):
            raise UnsupportedFeature("query parameters are not supported yet", position)
        if isinstance(node, exp.TryCast):
            raise UnsupportedFeature("TRY_CAST is not supported", position)
        if is_set_returning(node):  # PostgreSQL's words: ... not allowed in WHERE
            clause = self.clause.removesuffix(" clause")
            raise UnsupportedFeature(
                f"set-returning functions are not allowed in {clause}", position
            )
        if isinstance(node, exp.Filter):  # FILTER on what is no aggregate (PostgreSQL's words)
            called = _function_name(node.this) or node.this.sql(dialect="postgres")
            raise WrongObjectType(
                f"FILTER specified, but {called} is not an aggregate function", position
            )
        written = _function_name(node)
        if written:
            raise unsupported_call(written, isinstance(node, exp.AggFunc), position)
        raise UnsupportedFeature(
            f"expression {node.sql(dialect='postgres')!r} is not supported", position
        )

    # --- leaves ----------------------------------------------------------------

    def _column(self, node: exp.Column) -> Typed:
        if isinstance(node.this, exp.Star):
            return self._star(node)
        parts = tuple(ident_name(p) for p in node.parts)
        if self.scope.outer is not None and not self.scope.can_resolve(parts):
            return _outer_reference(self.scope.outer, node)
        index = self.scope.resolve(parts, node)
        return Typed(Column(index), self.types[index])

    def _star(self, node: exp.Expr) -> Typed:
        raise ParseError("* is only allowed in a SELECT list and in count(*)", position_of(node))

    def _literal(self, node: exp.Literal) -> Typed:
        if node.is_string:
            return Typed(
                Literal(node.this, ColumnType(S.TEXT, False)), ColumnType(S.TEXT, False), True
            )
        try:
            value, st = number_literal(node.this)
        except SqlError as error:
            raise error.at(position_of(node)) from None
        return number(value, st)

    def _escape_string(self, node: exp.ByteString) -> Typed:
        text = node.this
        return Typed(Literal(text, ColumnType(S.TEXT, False)), ColumnType(S.TEXT, False), True)

    # --- coercion helpers -------------------------------------------------------

    def typed(self, expr: ScalarExpr) -> Typed:
        return Typed(expr, expr.typ(self.types))

    def resolve_unknown(self, value: Typed, target: ScalarType, node: exp.Expr | None) -> Typed:
        """Give an unknown literal the type `target` (parsing its text)."""
        assert isinstance(value.expr, Literal)
        text = value.expr.value
        if text is None:
            return Typed(null_of(target), ColumnType(target, True))
        try:
            parsed = parse_text_as(text, target)
        except SqlError as error:
            raise error.at(position_of(node)) from None
        return literal(parsed, target)

    def cast_to(self, value: Typed, target: ScalarType, node: exp.Expr | None) -> Typed:
        """`value` as `target`, folding literal casts that are exact (the cast
        itself must already be allowed)."""
        if value.unknown:
            return self.resolve_unknown(value, target, node)
        if value.scalar is target:
            return value
        if value.exact is not None and target in (S.REAL, S.DOUBLE):
            try:
                return literal(fold_cast(value.exact, S.NUMERIC, target), target)
            except SqlError as error:
                raise error.at(position_of(node)) from None
        if isinstance(value.expr, Literal):
            try:
                folded = fold_cast(value.expr.value, value.scalar, target)
            except SqlError as error:
                raise error.at(position_of(node)) from None
            if folded is not NO_FOLD:
                return literal(folded, target)
        return self.typed(Cast(value.expr, target))

    def as_text(self, value: Typed, node: exp.Expr | None) -> Typed:
        """An argument of a text-only operator or function: an unknown
        literal is text, char(n) is its text without trailing blanks."""
        if value.unknown or value.scalar is S.BPCHAR:
            return self.cast_to(value, S.TEXT, node)
        return value

    def coerce(self, value: Typed, target: ScalarType, node: exp.Expr | None, what: str) -> Typed:
        """Implicit coercion; `what` describes the context for the error."""
        if value.unknown or can_cast_implicitly(value.scalar, target):
            return self.cast_to(value, target, node)
        raise TypeMismatch(
            f"{what} must be type {target.value}, not type {value.scalar.value}",
            position_of(node),
        )

    def assign(self, value: Typed, into: ColumnType, node: exp.Expr | None, column: str) -> Typed:
        """Assignment coercion (INSERT/UPDATE into a column of type `into`);
        an untyped literal is read with an interval column's qualifier."""
        target = into.scalar_type
        if value.unknown and into.interval_typmod is not None:
            assert isinstance(value.expr, Literal)
            if value.expr.value is not None:
                try:
                    return literal(read_text(value.expr.value, into), target)
                except SqlError as error:
                    raise error.at(position_of(node)) from None
        if value.unknown or can_assign(value.scalar, target):
            return self.cast_to(value, target, node)
        raise TypeMismatch(
            f'column "{column}" is of type {target.value} but expression is of type '
            f"{value.scalar.value}",
            position_of(node),
            hint="You will need to rewrite or cast the expression.",
        )

    def require_boolean(self, value: Typed, node: exp.Expr | None, what: str) -> Typed:
        if value.unknown:
            return self.resolve_unknown(value, S.BOOLEAN, node)
        if value.scalar is not S.BOOLEAN:
            raise TypeMismatch(
                f"{what} must be type boolean, not type {value.scalar.value}", position_of(node)
            )
        return value

    def unify(
        self, values: list[Typed], nodes: list[exp.Expr | None], what: str
    ) -> tuple[list[Typed], ScalarType]:
        """Cast values to their common type (CASE/COALESCE/... rules)."""
        target = common_type([None if v.unknown else v.scalar for v in values])
        if target is None:
            so_far: ScalarType | None = None
            for v, n in zip(values, nodes, strict=True):
                if v.unknown:
                    continue
                joined = v.scalar if so_far is None else common_type([so_far, v.scalar])
                if joined is None:
                    raise TypeMismatch(
                        f"{what} types {so_far.value if so_far else '?'} and "
                        f"{v.scalar.value} cannot be matched",
                        position_of(n),
                    )
                so_far = joined
            raise TypeMismatch(f"{what} types cannot be matched", position_of(nodes[0]))
        cast = [self.cast_to(v, target, n) for v, n in zip(values, nodes, strict=True)]
        known = [v for v in values if not v.unknown]
        if target is S.TEXT and known and known[0].type.varchar:
            # the first typed value's varchar types the untyped literals (PostgreSQL)
            cast = [as_varchar(c) if v.unknown else c for v, c in zip(values, cast, strict=True)]
        return cast, target

    def operands(
        self,
        node: exp.Expr,
        left: Typed,
        right: Typed,
        symbol: str,
        nodes: tuple[exp.Expr | None, exp.Expr | None] | None = None,
    ) -> tuple[Typed, Typed, ScalarType]:
        """Resolve a binary operator's operand type; unknowns take the other
        side's type. `nodes` are the operands' syntax (default: the node's
        `this` and `expression`), for error positions."""
        lnode, rnode = nodes or (node.args.get("this"), node.args.get("expression"))
        if left.unknown and right.unknown:
            left = self.resolve_unknown(left, S.TEXT, lnode)
            right = self.resolve_unknown(right, S.TEXT, rnode)
        elif left.unknown:
            left = self.resolve_unknown(left, right.scalar, lnode)
        elif right.unknown:
            right = self.resolve_unknown(right, left.scalar, rnode)
        target = operator_type(left.scalar, right.scalar)
        if target is None or (
            target.element is not None
            and symbol not in ("=", "<>", "!=")
            and (symbol not in ("<", "<=", ">", ">=") or target.element not in ORDERED_ELEMENTS)
        ):  # arrays and lists order by their elements (array_cmp) where those order alike
            raise self.no_operator(node, symbol, left.scalar, right.scalar)
        return self.cast_to(left, target, lnode), self.cast_to(right, target, rnode), target

    def no_operator(
        self, node: exp.Expr, symbol: str, left: ScalarType, right: ScalarType | None = None
    ) -> UndefinedOperator:
        shown = f"{left.value} {symbol} {right.value}" if right else f"{symbol} {left.value}"
        return UndefinedOperator.no_overload(shown, operator_position(node))

    # --- operators -------------------------------------------------------------

    def _arithmetic(self, node: exp.Binary) -> Typed:
        func, symbol = _ARITHMETIC[type(node)]
        left, right = self.bind(node.this), self.bind(node.expression)
        if left.unknown and right.unknown:
            raise UndefinedOperator(
                f"operator is not unique: unknown {symbol} unknown",
                operator_position(node),
                hint="Could not choose a best candidate operator. "
                "You might need to add explicit type casts.",
            )
        if left.unknown:
            left = self.resolve_unknown(left, _unknown_operand(symbol, right.scalar), node.this)
        elif right.unknown:
            right = self.resolve_unknown(
                right, _unknown_operand(symbol, left.scalar), node.expression
            )
        moved = function_calls.interval_arithmetic(self, node, symbol, left, right)
        if moved is not None:
            return moved
        if isinstance(node, exp.Add | exp.Sub) and S.DATE in (left.scalar, right.scalar):
            return function_calls.date_arithmetic(self, node, left, right)
        if not (is_numeric(left.scalar) and is_numeric(right.scalar)):
            raise self.no_operator(node, symbol, left.scalar, right.scalar)
        left, right, _ = self.operands(node, left, right, symbol)
        return self.typed(CallBinary(func, left.expr, right.expr))

    def compare(
        self,
        node: exp.Expr,
        func: BinaryFunc,
        symbol: str,
        left: Typed,
        right: Typed,
        nodes: tuple[exp.Expr | None, exp.Expr | None] | None = None,
    ) -> Typed:
        if isinstance(left.expr, MzNow) or isinstance(right.expr, MzNow):
            return compare_mz_now(self, node, func, symbol, left, right, nodes)
        left, right, target = self.operands(node, left, right, symbol, nodes)
        if target is S.BPCHAR:  # char(n) compares without its trailing blanks
            left, right = self.cast_to(left, S.TEXT, None), self.cast_to(right, S.TEXT, None)
        if target is S.INTERVAL:  # PostgreSQL's order: 30-day months, 24-hour days
            left = function_calls.interval_cmp_key(self, node, left)
            right = function_calls.interval_cmp_key(self, node, right)
        if target.element is not None and func not in (BinaryFunc.EQ, BinaryFunc.NOT_EQ):
            nullable = left.type.nullable or right.type.nullable
            order = CallFunction(
                "array_cmp", (left.expr, right.expr), ColumnType(S.INTEGER, nullable)
            )
            return self.typed(CallBinary(func, order, Literal(0, ColumnType(S.INTEGER, False))))
        return self.typed(CallBinary(func, left.expr, right.expr))

    def _comparison(self, node: exp.Binary) -> Typed:
        if is_row_constructor(node.this) and isinstance(node.expression, exp.Any | exp.All):
            query = quantified_subquery(node, node.expression)
            self._check_row_in_width(exp.In(this=node.this, query=query))
            every = isinstance(node.expression, exp.All)
            return _bind_row_any(self, node, query, type(node), every)
        if is_row_comparison(node):
            return self.bind(expand_row_comparison(node))
        func, symbol = _COMPARISON[type(node)]
        right = _values_subquery(node.expression)
        if isinstance(right, exp.Any | exp.All):
            return self._quantified(node, func, symbol, right)
        return self.compare(node, func, symbol, self.bind(node.this), self.bind(right))

    # --- subqueries (planned and lowered by sql/subquery.py) ----------------------

    def _subquery(self, node: exp.Subquery) -> Typed:
        return _bind_scalar(self, node)

    def _exists(self, node: exp.Exists) -> Typed:
        return _bind_exists(self, node)

    def _quantified(
        self, node: exp.Binary, func: BinaryFunc, symbol: str, right: exp.Any | exp.All
    ) -> Typed:
        query = right.this
        array = query.unnest() if isinstance(query, exp.Paren) else query
        if isinstance(array, exp.Array) and array.expressions:
            # `x op ANY (ARRAY[a, b])` is `x op a OR x op b` (ALL: AND), with
            # PostgreSQL's NULL rules (what SQLAlchemy's has_table sends).
            parts = [
                type(node)(this=node.this.copy(), expression=e.copy()) for e in array.expressions
            ]
            joined = exp.and_(*parts) if isinstance(right, exp.All) else exp.or_(*parts)
            return self.bind(exp.Paren(this=joined))
        if not isinstance(array, exp.Query):
            if isinstance(right, exp.Any) and symbol == "=":
                return self._array_contains(node.this, array)
            if isinstance(right, exp.All) and symbol == "<>":
                # x <> ALL (array) is NOT (x = ANY (array)), NULLs included.
                return self.typed(
                    CallUnary(UnaryFunc.NOT, self._array_contains(node.this, array).expr)
                )
        if self.scope.context is None or not isinstance(query, exp.Query):
            word = "ANY" if isinstance(right, exp.Any) else "ALL"
            raise UnsupportedFeature(f"{symbol} {word} (...) needs a subquery", position_of(right))
        every = isinstance(right, exp.All)
        return _bind_any(self, node, node.this, query, func, symbol, every)

    def _array_contains(self, left_node: exp.Expr, array_node: exp.Expr) -> Typed:
        """`x = ANY (array)`: TRUE if an element equals x, else NULL if one is
        NULL, else FALSE (compute's `array_contains`)."""
        values = self.bind(array_node)
        left = self.bind(left_node)
        if values.unknown and not left.unknown and not left.scalar.is_array:
            # An untyped literal or parameter (psycopg's list sent as text,
            # '{1,3}') is an array of x's type, as PostgreSQL reads it.
            values = self.resolve_unknown(values, left.scalar.array(), array_node)
        element = None if values.unknown else values.scalar.element
        if element is None:
            raise UnsupportedFeature(
                "= ANY (...) needs a subquery or an array", position_of(array_node)
            )
        left = self.coerce(left, element, left_node, "= ANY")
        result = CallFunction(
            "array_contains", (values.expr, left.expr), ColumnType(ScalarType.BOOLEAN, True)
        )
        return Typed(result, result.type)

    def _connective(self, node: exp.Connector) -> Typed:
        func = VariadicFunc.AND if isinstance(node, exp.And) else VariadicFunc.OR
        word = "AND" if func is VariadicFunc.AND else "OR"
        parts: list[exp.Expr] = []
        stack: list[exp.Expr] = [node]
        while stack:  # flatten a AND b AND c (left-deep) in order
            current = stack.pop()
            if type(current) is type(node):
                stack.append(current.expression)
                stack.append(current.this)
            else:
                parts.append(current)
        exprs = [self.bind_boolean(p, word).expr for p in parts]
        return self.typed(CallVariadic(func, tuple(exprs)))

    def _not(self, node: exp.Not) -> Typed:
        inner = node.this
        if isinstance(inner, exp.Is) and isinstance(inner.expression, exp.Null):
            if is_row_constructor(inner.this):
                negated = bool(node.meta.get("is_not_null"))
                test = expand_row_null_test(inner.this, negated=negated)
                return self.bind(test if negated else exp.Not(this=test))
            operand = self.bind(inner.this)
            return self.typed(CallUnary(UnaryFunc.IS_NOT_NULL, operand.expr))
        value = self.bind_boolean(inner, "NOT")
        return self.typed(CallUnary(UnaryFunc.NOT, value.expr))

    def _is(self, node: exp.Is) -> Typed:
        target = node.expression
        if isinstance(target, exp.Null) and is_row_constructor(node.this):
            return self.bind(expand_row_null_test(node.this, negated=False))
        operand = self.bind(node.this)
        if isinstance(target, exp.Null):
            return self.typed(CallUnary(UnaryFunc.IS_NULL, operand.expr))
        if isinstance(target, exp.Boolean):
            value = self.require_boolean(operand, node.this, "argument of IS TRUE/FALSE")
            func = UnaryFunc.IS_TRUE if target.this else UnaryFunc.IS_FALSE
            return self.typed(CallUnary(func, value.expr))
        raise UnsupportedFeature(
            f"IS {target.sql(dialect='postgres')} is not supported", position_of(node)
        )

    def _null_safe(self, node: exp.Expr) -> Typed:
        """IS [NOT] DISTINCT FROM, lowered to a NULL-aware comparison that is never NULL."""
        if isinstance(node, exp.NullSafeEQ | exp.NullSafeNEQ) and is_row_comparison(node):
            return self.bind(expand_row_distinct(node))
        left, right, _ = self.operands(
            node, self.bind(node.this), self.bind(node.args["expression"]), "IS DISTINCT FROM"
        )
        a, b = left.expr, right.expr
        equal = CallVariadic(
            VariadicFunc.COALESCE, (CallBinary(BinaryFunc.EQ, a, b), Literal(False, BOOL))
        )
        not_distinct = If(
            CallUnary(UnaryFunc.IS_NULL, a),
            CallUnary(UnaryFunc.IS_NULL, b),
            If(CallUnary(UnaryFunc.IS_NULL, b), Literal(False, BOOL), equal),
        )
        if isinstance(node, exp.NullSafeEQ):
            return self.typed(not_distinct)
        return self.typed(CallUnary(UnaryFunc.NOT, not_distinct))

    def _like(self, node: exp.Like | exp.ILike) -> Typed:
        if isinstance(node.expression, exp.Escape):
            raise UnsupportedFeature("LIKE ... ESCAPE is not supported", position_of(node))
        left, right = self.bind(node.this), self.bind(node.expression)
        word = "ILIKE" if isinstance(node, exp.ILike) else "LIKE"
        left, right = self.as_text(left, node.this), self.as_text(right, node.expression)
        if left.scalar is not S.TEXT or right.scalar is not S.TEXT:
            raise self.no_operator(node, word, left.scalar, right.scalar)
        a, b = left.expr, right.expr
        if isinstance(node, exp.ILike):
            a, b = CallUnary(UnaryFunc.LOWER, a), CallUnary(UnaryFunc.LOWER, b)
        result: ScalarExpr = CallBinary(BinaryFunc.LIKE, a, b)
        if node.args.get("negate"):
            result = CallUnary(UnaryFunc.NOT, result)
        return self.typed(result)

    def _concat(self, node: exp.DPipe) -> Typed:
        left, right = self.bind(node.this), self.bind(node.expression)
        if any(not v.unknown and v.scalar.element is not None for v in (left, right)):
            return list_concat(self, node, left, right)
        textual = [v.unknown or v.scalar in (S.TEXT, S.BPCHAR) for v in (left, right)]
        if not any(textual):  # Materialize's (and PostgreSQL's) words for `||`
            raise UndefinedOperator(
                f"operator does not exist: {left.scalar.value} || {right.scalar.value}",
                operator_position(node),
            )
        parts = [
            self.cast_to(value, S.TEXT, side)
            for value, side in ((left, node.this), (right, node.expression))
        ]
        return self.typed(CallBinary(BinaryFunc.CONCAT, parts[0].expr, parts[1].expr))

    def _neg(self, node: exp.Neg) -> Typed:
        inner = node.this
        if isinstance(inner, exp.Literal) and not inner.is_string:
            # PostgreSQL negates a constant before typing it: -2147483648 is an integer.
            if inner.this.isdigit():
                negated = -int(inner.this)
                st = integer_literal_type(negated)
                return number(negated if st is not S.NUMERIC else Decimal(negated), st)
            value, st = number_literal(inner.this)
            return number(-value, st)
        operand = self.bind(inner)
        if operand.unknown:
            raise UndefinedOperator("operator is not unique: - unknown", position_of(node))
        if operand.scalar is S.INTERVAL:
            return function_calls.interval_negation(self, node, operand)
        if not is_numeric(operand.scalar):
            raise self.no_operator(node, "-", operand.scalar)
        return self.typed(CallUnary(UnaryFunc.NEG, operand.expr))

    # --- casts and conditionals ----------------------------------------------------

    def _cast(self, node: exp.Cast) -> Typed:
        if node.args.get("format") or node.args.get("safe"):
            raise UnsupportedFeature("this form of CAST is not supported", position_of(node))
        try:
            target = scalar_type_of(node.to)
            typmod = interval_typmod(node.to)
        except SqlError as error:
            raise error.at(position_of(node.to) or position_of(node)) from None
        if target.is_list and is_empty_list(node.this):  # LIST[]::int list
            return literal((), target)
        empty_array = isinstance(node.this, exp.Array) and not node.this.expressions
        if target.is_array and empty_array:  # ARRAY[]::int[] (the cast types it)
            return literal((), target)
        value = self.bind(node.this)
        known_text = isinstance(value.expr, Literal) and value.expr.value is not None
        if typmod is not None and value.unknown and known_text:
            return self._interval_literal(node, value, *typmod)
        if value.unknown:
            cast = self.resolve_unknown(value, target, node.this)
        elif not can_cast_explicitly(value.scalar, target):
            raise CannotCoerce(
                f"cannot cast type {value.scalar.value} to {target.value}", position_of(node)
            )
        else:
            cast = self.cast_to(value, target, node)
        if typmod is not None:  # PostgreSQL's interval_scale
            fields = Literal(typmod[0], ColumnType(S.TEXT, False))
            digits = Literal(typmod[1], ColumnType(S.INTEGER, False))
            restricted = CallFunction("interval_restrict", (cast.expr, fields, digits), cast.type)
            return self.typed(restricted)
        # the result shows as declared (varchar, varchar(n), char(n))
        declared = replace(declared_type(node.to), nullable=cast.type.nullable)
        if declared.length is not None:  # an explicit cast cuts the text to it (char pads)
            count = Literal(declared.length, ColumnType(ScalarType.INTEGER, False))
            cut = "bpchar_cut" if target is S.BPCHAR else "left"
            return self.typed(CallFunction(cut, (cast.expr, count), declared))
        if declared.varchar and isinstance(cast.expr, Literal):
            return self.typed(Literal(cast.expr.value, declared))
        if cast.type.varchar and not declared.varchar:  # varchar::text is text
            return self.typed(Cast(cast.expr, target))
        try:
            precision = timestamp_precision(node.to)
        except SqlError as error:
            raise error.at(position_of(node.to) or position_of(node)) from None
        if precision is None or precision == 6:
            return cast
        digits = Literal(precision, ColumnType(ScalarType.INTEGER, False))
        return self.typed(CallFunction("timestamp_round", (cast.expr, digits), cast.type))

    def _interval_literal(self, node: exp.Cast, value: Typed, fields: str, precision: int) -> Typed:
        """`'...'::interval <fields>(p)` reads the text with the qualifier
        (a bare number is its last field), as `INTERVAL '...' <fields>` does."""
        assert isinstance(value.expr, Literal)
        try:
            parsed = function_calls.parse_interval(value.expr.value, fields or None, precision)
        except SqlError as error:
            raise error.at(position_of(node.this) or position_of(node)) from None
        return literal(Interval(*parsed), S.INTERVAL)

    def _case(self, node: exp.Case) -> Typed:
        operand_node = node.args.get("this")
        operand = self.bind(operand_node) if operand_node is not None else None
        conditions: list[ScalarExpr] = []
        results: list[Typed] = []
        result_nodes: list[exp.Expr | None] = []
        for branch in node.args.get("ifs") or []:
            when = branch.this
            if operand is not None:
                cond = self.compare(
                    branch, BinaryFunc.EQ, "=", operand, self.bind(when), (operand_node, when)
                )
            else:
                cond = self.bind_boolean(when, "CASE/WHEN")
            conditions.append(cond.expr)
            results.append(self.bind(branch.args["true"]))
            result_nodes.append(branch.args["true"])
        default_node = node.args.get("default")
        if default_node is not None:
            results.append(self.bind(default_node))
        else:
            results.append(Typed(null_of(S.TEXT), ColumnType(S.TEXT, True), unknown=True))
        result_nodes.append(default_node)
        unified, _ = self.unify(results, result_nodes, "CASE")
        expr = unified[-1].expr
        for cond, value in zip(reversed(conditions), reversed(unified[:-1]), strict=True):
            expr = If(cond, value.expr, expr)
        return self.typed(expr)

    def _coalesce(self, node: exp.Coalesce) -> Typed:
        nodes = [node.this, *node.expressions]
        unified, _ = self.unify([self.bind(n) for n in nodes], nodes, "COALESCE")
        return self.typed(CallVariadic(VariadicFunc.COALESCE, tuple(v.expr for v in unified)))

    def _greatest_least(self, node: exp.Greatest | exp.Least) -> Typed:
        nodes = [node.this, *node.expressions]
        word = "GREATEST" if isinstance(node, exp.Greatest) else "LEAST"
        unified, _ = self.unify([self.bind(n) for n in nodes], nodes, word)
        func = VariadicFunc.GREATEST if isinstance(node, exp.Greatest) else VariadicFunc.LEAST
        return self.typed(CallVariadic(func, tuple(v.expr for v in unified)))

    def _nullif(self, node: exp.Nullif) -> Typed:
        first, second = self.bind(node.this), self.bind(node.expression)
        if first.unknown and not second.unknown:
            first = self.resolve_unknown(first, second.scalar, node.this)
        first = finalize(first)
        left, right, _ = self.operands(node, first, second, "=")
        result_type = first.scalar
        condition = CallBinary(BinaryFunc.EQ, left.expr, right.expr)
        return self.typed(If(condition, null_of(result_type), first.expr))

    def _between(self, node: exp.Between) -> Typed:
        if node.args.get("symmetric"):
            raise UnsupportedFeature("BETWEEN SYMMETRIC is not supported", position_of(node))
        value = self.bind(node.this)
        bounds = []
        for key, func, symbol in (("low", BinaryFunc.GTE, ">="), ("high", BinaryFunc.LTE, "<=")):
            bound_node = node.args[key]
            bound = self.bind(bound_node)
            bounds.append(
                self.compare(node, func, symbol, value, bound, (node.this, bound_node)).expr
            )
        low, high = bounds
        return self.typed(CallVariadic(VariadicFunc.AND, (low, high)))

    def _check_row_in_width(self, node: exp.In) -> None:
        """`(a, b) IN (SELECT ...)` needs a subquery as wide as the row:
        PostgreSQL's 42601 names which way it is off."""
        query = node.args.get("query")
        if query is None or self.scope.context is None:
            return
        arity = _plan(self, query).arity
        width = len(node.this.expressions)
        if arity != width:
            which = "many" if arity > width else "few"
            raise ParseError(f"subquery has too {which} columns", position_of(node))

    def _in(self, node: exp.In) -> Typed:
        query = node.args.get("query")
        if is_row_in(node):
            self._check_row_in_width(node)
            if query is None:
                return self.bind(expand_row_in(node))
            return _bind_row_any(self, node, query, exp.EQ, False)
        if query is None and len(node.expressions) == 1:
            query = _values_subquery(node.expressions[0])  # x IN (VALUES ...)
            query = query if isinstance(query, exp.Subquery) else None
        if query is not None and self.scope.context is not None:
            return _bind_any(self, node, node.this, query, BinaryFunc.EQ, "=", False)
        if query or node.args.get("unnest") or node.args.get("field"):
            raise UnsupportedFeature("IN (subquery) is not supported here", position_of(node))
        if not node.expressions:
            raise ParseError("IN needs at least one value", position_of(node))
        value = self.bind(node.this)
        tests = [
            self.compare(node, BinaryFunc.EQ, "=", value, self.bind(item), (node.this, item)).expr
            for item in node.expressions
        ]
        if len(tests) == 1:
            return self.typed(tests[0])
        return self.typed(CallVariadic(VariadicFunc.OR, tuple(tests)))

    # --- functions ------------------------------------------------------------------

    def no_function(self, node: exp.Expr, name: str, args: list[Typed]) -> UndefinedFunction:
        shown = ", ".join("unknown" if a.unknown else a.scalar.value for a in args)
        return UndefinedFunction(
            f"function {name}({shown}) does not exist",
            position_of(node),
            hint="No function matches the given name and argument types. "
            "You might need to add explicit type casts.",
        )

    def _text_function(self, node: exp.Func) -> Typed:
        func = _TEXT_FUNCS[type(node)]
        arg = self.as_text(self.bind(node.this), node.this)
        if arg.scalar is not S.TEXT:
            raise self.no_function(node, func.value, [arg])
        return self.typed(CallUnary(func, arg.expr))

    def _length(self, node: exp.Length) -> Typed:
        arg = self.as_text(self.bind(node.this), node.this)
        if arg.scalar is not S.TEXT:
            raise self.no_function(node, "length", [arg])
        return self.typed(CallUnary(UnaryFunc.LENGTH, arg.expr))

    def _abs(self, node: exp.Abs) -> Typed:
        arg = self.bind(node.this)
        if arg.unknown or not is_numeric(arg.scalar):
            raise self.no_function(node, "abs", [arg])
        return self.typed(CallUnary(UnaryFunc.ABS, arg.expr))

    def _tuple(self, node: exp.Tuple) -> Typed:
        raise no_record_values(node)

    def _anonymous(self, node: exp.Anonymous) -> Typed:
        name = (
            ident_name(node.this)
            if isinstance(node.this, exp.Identifier)
            else str(node.this).lower()
        )
        name = _NAMED_ALIASES.get(name, name)
        if name == "row":
            raise no_record_values(node)
        if name == "length" and len(node.expressions) == 1:
            return self._length(exp.Length(this=node.expressions[0]).update_positions(node))
        if function_calls.binds_name(name):
            return function_calls.bind_named(self, node, name)
        if name == "mz_now":
            return bind_mz_now(self, node)
        args = [self.bind(a) for a in node.expressions]
        raise self.no_function(node, name, args)


# --- subqueries: planned as queries of their own (ctx.planner), lowered by subquery.py


def _unknown_operand(symbol: str, other: ScalarType) -> ScalarType:
    """The type an untyped literal takes beside `other`: its type, but an
    interval added to a timestamp (PostgreSQL has no timestamp + timestamp)."""
    if symbol == "+" and other in (S.TIMESTAMP, S.TIMESTAMPTZ):
        return S.INTERVAL
    return other


def _outer_reference(outer: ScalarBinder, node: exp.Column) -> Typed:
    """A column the subquery's FROM clause lacks, bound in the enclosing
    query (so GROUP BY rules there apply) and seen from one level in."""

    value = outer.bind(node)
    expr = value.expr
    if isinstance(expr, Column):
        return Typed(OuterColumn(1, expr.index, value.type), value.type)
    if isinstance(expr, OuterColumn):
        return Typed(OuterColumn(expr.depth + 1, expr.index, expr.type), value.type)
    raise UnsupportedFeature(
        "this reference to an enclosing query's column is not supported", position_of(node)
    )


def _plan(binder: ScalarBinder, node: exp.Expr) -> BoundQuery:
    """Plan a subquery with `binder`'s query as the enclosing one."""
    ctx = binder.scope.context
    assert ctx is not None
    ctx.outer.append(binder)
    try:
        return ctx.planner.plan_query(node, ctx)
    finally:
        ctx.outer.pop()


def _relation(binder: ScalarBinder, bound: BoundQuery, node: exp.Expr) -> RelationExpr:
    ctx = binder.scope.context
    assert ctx is not None
    return ctx.planner.visible(bound, node)


def _bind_scalar(binder: ScalarBinder, node: exp.Subquery) -> Typed:
    """`(SELECT x ...)`: its one column's value."""

    bound = _plan(binder, node)
    if bound.arity != 1:
        raise ParseError(  # Materialize's words (PostgreSQL: "must return only one column")
            f"Expected subselect to return 1 column, got {bound.arity} columns",
            position_of(node),
        )
    rel = _relation(binder, bound, node)
    ctype = ColumnType(bound.types[0].scalar_type, True)
    sub = SubqueryExpr(SubqueryKind.SCALAR, rel, (), len(binder.types), ctype)
    return Typed(sub, ctype)


def _bind_exists(binder: ScalarBinder, node: exp.Exists) -> Typed:

    bound = _plan(binder, node.this)
    rel = Project(_relation(binder, bound, node), ())
    return Typed(SubqueryExpr(SubqueryKind.EXISTS, rel, (), len(binder.types), BOOL), BOOL)


def _bind_any(
    binder: ScalarBinder,
    node: exp.Expr,
    left_node: exp.Expr,
    query: exp.Expr,
    func: BinaryFunc,
    symbol: str,
    every: bool,
) -> Typed:
    """`left op ANY (query)` (IN is `= ANY`), or with `every` `left op ALL (query)`."""

    left = binder.bind(left_node)
    bound = _plan(binder, query)
    if bound.arity != 1:
        raise ParseError(  # Materialize's words (PostgreSQL: "has too many/few columns")
            f"subquery has {bound.arity} columns available but 1 columns specified",
            position_of(node),
        )
    right_type = bound.types[0]
    if 0 in bound.unknowns and not left.unknown:
        assert binder.scope.context is not None
        rel = binder.scope.context.planner.coerce_columns(
            bound, [left.scalar], False, [query], "IN"
        )
        right_type = ColumnType(left.scalar, right_type.nullable)
    else:
        rel = _relation(binder, bound, query)
    if left.unknown:
        left = binder.resolve_unknown(left, right_type.scalar_type, left_node)
    base = len(binder.types)
    inner = ScalarBinder(Scope(), binder.clause, types=rel.desc.types)
    compared = inner.compare(
        node,
        func,
        symbol,
        Typed(OuterColumn(1, base, left.type), left.type),
        Typed(Column(0), right_type),
        (left_node, query),
    )
    test = compared.expr
    if every:
        test = CallUnary(UnaryFunc.NOT, test)
    arity = rel.desc.arity
    plan = Project(Map(rel, (test,)), (arity,))
    ctype = ColumnType(S.BOOLEAN, True)
    value: ScalarExpr = SubqueryExpr(SubqueryKind.ANY, plan, (left.expr,), base, ctype)
    if every:
        value = CallUnary(UnaryFunc.NOT, value)
    return Typed(value, ctype)


def _bind_row_any(
    binder: ScalarBinder, node: exp.Expr, query: exp.Expr, op: type[exp.Expr], every: bool
) -> Typed:
    """`(a, b) op ANY (query)` (a row IN is `= ANY`), or with `every` `op ALL`:
    one ANY subquery whose test is the row comparison of the left side's
    fields with the subquery's columns (lexicographic for `<`..`>=`, the AND
    of the pairs for `=`, their OR for `<>`; `row_comparison.expand_row_comparison`
    on bound pairs), so its NULLs are SQL's and it is one semi-join, as
    `x op ANY (query)` is. The caller checked the subquery's width."""
    if binder.scope.context is None or not isinstance(query, exp.Query):
        raise UnsupportedFeature("ANY and ALL need a subquery", position_of(node))
    items = row_items(node.this)
    assert items is not None
    func, symbol = _COMPARISON[op]
    lefts = [binder.bind(item) for item in items]
    width = len(items)
    # An untyped literal the subquery selects is text, as in PostgreSQL (its
    # `(k, x) = ANY (SELECT 1, NULL)` is 42883 integer = text; a single
    # value's `= ANY` takes the left side's type: _bind_any).
    rel = _relation(binder, _plan(binder, query), query)
    right_types = rel.desc.types
    base = len(binder.types)
    inner = ScalarBinder(Scope(), binder.clause, types=right_types)
    pairs: list[tuple[Typed, Typed]] = []
    for k, (item, left) in enumerate(zip(items, lefts, strict=True)):
        if left.unknown:
            lefts[k] = left = binder.resolve_unknown(left, right_types[k].scalar_type, item)
        outer = Typed(OuterColumn(1, base + k, left.type), left.type)
        pairs.append((outer, Typed(Column(k), right_types[k])))

    def compared(pair: int, f: BinaryFunc, s: str) -> ScalarExpr:
        left, right = pairs[pair]
        return inner.compare(node, f, s, left, right, (items[pair], query)).expr

    test: ScalarExpr
    if func in (BinaryFunc.EQ, BinaryFunc.NOT_EQ):
        joined = VariadicFunc.AND if func is BinaryFunc.EQ else VariadicFunc.OR
        tests = tuple(compared(k, func, symbol) for k in range(width))
        test = tests[0] if width == 1 else CallVariadic(joined, tests)
    else:  # a1 < b1 OR (a1 = b1 AND (the rest)), the last pair with op itself
        strict = _STRICT_ORDER[func]
        test = compared(width - 1, func, symbol)
        for k in reversed(range(width - 1)):
            equal = compared(k, BinaryFunc.EQ, "=")
            rest = CallVariadic(VariadicFunc.AND, (equal, test))
            test = CallVariadic(VariadicFunc.OR, (compared(k, *strict), rest))
    if every:
        test = CallUnary(UnaryFunc.NOT, test)
    plan = Project(Map(rel, (test,)), (rel.desc.arity,))
    ctype = ColumnType(S.BOOLEAN, True)
    args = tuple(left.expr for left in lefts)
    value: ScalarExpr = SubqueryExpr(SubqueryKind.ANY, plan, args, base, ctype)
    if every:
        value = CallUnary(UnaryFunc.NOT, value)
    return Typed(value, ctype)


_STRICT_ORDER = {
    BinaryFunc.LT: (BinaryFunc.LT, "<"),
    BinaryFunc.LTE: (BinaryFunc.LT, "<"),
    BinaryFunc.GT: (BinaryFunc.GT, ">"),
    BinaryFunc.GTE: (BinaryFunc.GT, ">"),
}


def finalize(value: Typed) -> Typed:
    """An unknown literal that nothing typed is text (PostgreSQL's rule)."""
    if not value.unknown:
        return value
    return Typed(value.expr, value.type)


def avg_result_type(st: ScalarType) -> ScalarType:
    """avg() of integers and numeric is numeric, of floats double precision."""
    return S.DOUBLE if st in (S.REAL, S.DOUBLE) else S.NUMERIC


_OF_NUMBERS = frozenset(
    ("sum", "avg", "stddev", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop")
)


def check_aggregate_argument(func: str, value: Typed, node: exp.Expr) -> Typed:
    """The argument types PostgreSQL has each aggregate for."""
    if func in _OF_NUMBERS:
        if value.unknown:  # PostgreSQL's code and first words, then Materialize's
            raise AmbiguousFunction(
                f"function {func}(unknown) is not unique: unable to determine which"
                " implementation to use",
                position_of(node) or (node.parent and position_of(node.parent)),  # NULL: the call
                hint="Could not choose a best candidate function."
                " You might need to add explicit type casts.",
            )
        if not is_numeric(value.scalar):
            shown = value.scalar.value
            raise UndefinedFunction(f"function {func}({shown}) does not exist", position_of(node))
        return value
    value = finalize(value)
    if func in ("min", "max") and value.scalar in _NO_MIN_MAX:
        raise UndefinedFunction(
            f"function {func}({value.scalar.value}) does not exist", position_of(node)
        )
    return value


def _function_name(node: exp.Expr) -> str | None:
    """The name of the function call `node` as written, None when the parser
    made a function of an operator or other syntax (`#-`, `COLLATE`), whose
    internal name would mean nothing to the user."""
    if not isinstance(node, exp.Func):
        return None
    name = node.sql_name().lower()
    written = node.sql(dialect="postgres").lower()
    return name if written.startswith(name) else None


# The binder method of each node type `_handler` finds by type, by name (so
# a subclass's override is found): built once, where a table of bound
# methods made per node was a tenth of a one-row INSERT's planning.
_HANDLERS: dict[type, str] = {
    exp.Paren: "_paren",
    exp.Column: "_column",
    exp.Literal: "_literal",
    exp.ByteString: "_escape_string",
    exp.Null: "_null",
    exp.Boolean: "_boolean",
    exp.Cast: "_cast",
    exp.And: "_connective",
    exp.Or: "_connective",
    exp.Not: "_not",
    exp.Is: "_is",
    exp.NullSafeEQ: "_null_safe",
    exp.NullSafeNEQ: "_null_safe",
    exp.Like: "_like",
    exp.ILike: "_like",
    exp.DPipe: "_concat",
    exp.Neg: "_neg",
    exp.Case: "_case",
    exp.Coalesce: "_coalesce",
    exp.Nullif: "_nullif",
    exp.Greatest: "_greatest_least",
    exp.Least: "_greatest_least",
    exp.Between: "_between",
    exp.In: "_in",
    exp.Length: "_length",
    exp.Abs: "_abs",
    exp.Anonymous: "_anonymous",
    exp.Tuple: "_tuple",
    exp.Star: "_star",
}
