"""An INSERT ... VALUES with its constants taken out, what the adapter's plan
cache keeps (adapter/plan_cache.py).

Texts that differ only in their number and string constants (pgbench's
`INSERT INTO t VALUES (:id, ...)`, every loader's one-row INSERT) have one
`Shape`: their tokens with each constant reduced to its token type. The
first is parsed and planned as always and leaves an `InsertTemplate` (the
table, the target columns and the VALUES tree); a later one of the same
shape is tokenized, not parsed: its constants go into a copy of the VALUES
tree, with every position moved to where its own text has it, and only the
VALUES are planned (`plan_insert_values`: the same binder, assignment casts
and NOT NULL checks, so a bad constant gets the SQLSTATE and position a
parse would give). `$n` parameters are bound into the copy the same way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from coordinator_lib.expr.relation import Constant
from coordinator_lib.repr.relation import ColumnType, ScalarType
from coordinator_lib.sql.catalog import CatalogItem, SqlCatalog
from coordinator_lib.sql.coercion import INT_RANGES, parse_text_as
from coordinator_lib.sql.context import PlanContext
from coordinator_lib.sql.dialect import Tidemark
from coordinator_lib.sql.errors import SqlError
from coordinator_lib.sql.params import bound_value, check_values, replace_parameters
from coordinator_lib.sql.plan import PLANNER, check_no_parameters
from coordinator_lib.sql.plan_core import (
    insert_values_target,
    plan_insert_rows,
    plan_insert_values,
)
from coordinator_lib.sql.plans import InsertPlan

_CONSTANTS = frozenset({TokenType.NUMBER, TokenType.STRING})
# The nodes of a VALUES list of constants (NULL, booleans, numbers and
# strings, negated or not).
CONSTANT_VALUES_NODES = (exp.Values, exp.Tuple, exp.Literal, exp.Neg, exp.Null, exp.Boolean)
# The nodes a template's VALUES may hold: those and parameters; anything
# else (a call, an operator but minus) is planned each time.
_TEMPLATE_NODES = (*CONSTANT_VALUES_NODES, exp.Parameter)
_POSITIONS = ("start", "end", "op_start")
_DIALECT = Tidemark()
_LONGEST = 4096  # a longer text (a bulk INSERT) is parsed each time, never kept


@dataclass(frozen=True)
class Shape:
    """One INSERT text's tokens: `key` is equal for texts that differ only
    in constants (and spacing, comments, letter case of nothing: keywords
    and names keep their text)."""

    key: tuple[Any, ...]
    tokens: tuple[Token, ...]
    constants: tuple[int, ...]  # indexes into tokens


def shape_of(text: str) -> Shape | None:
    """The shape of a one-statement INSERT text; None for anything else or
    a text the tokenizer refuses (the parse then reports it)."""
    if len(text) > _LONGEST or text.lstrip()[:6].upper() != "INSERT":
        return None
    try:
        tokens = _DIALECT.tokenize(text)
    except (TokenError, SqlError):
        return None
    key: list[Any] = []
    constants: list[int] = []
    last = len(tokens) - 1
    for i, token in enumerate(tokens):
        kind = token.token_type
        if kind is TokenType.SEMICOLON and i != last:
            return None  # several statements
        if kind in _CONSTANTS and not (i and tokens[i - 1].token_type is TokenType.PARAMETER):
            key.append(kind)
            constants.append(i)
        else:
            key.append((kind, token.text))
    return Shape(tuple(key), tuple(tokens), tuple(constants))


# A position mark: (meta key, token index, the token's end rather than start).
_Mark = tuple[str, int, bool]
# One value of a template's VALUES: the index of the constant token that is
# the whole value (most are), or the value's tree and its nodes' marks.
# Each token's index by its start offset, and by its end offset.
_Edges = tuple[dict[int, int], dict[int, int]]
_Value = int | tuple[exp.Expr, tuple[tuple[_Mark, ...], ...]]


@dataclass(frozen=True)
class InsertTemplate:
    """A planned INSERT ... VALUES with its constants taken out."""

    item: CatalogItem
    columns: list[int]
    table: tuple[exp.Expr, tuple[tuple[_Mark, ...], ...]]  # the table's name, positioned
    rows: tuple[tuple[_Value, ...], ...]
    tuples: tuple[bool, ...]  # whether each row was written as a parenthesized list

    def plan(
        self,
        shape: Shape,
        catalog: SqlCatalog,
        text: str,
        params: list[str | None],
        types: list[ScalarType | None],
    ) -> InsertPlan:
        """This INSERT with `shape`'s constants (and `params`) in place. A
        value that is one `$n` with a value is bound where it goes (no copy
        of its tree, no search for parameters); any other `$n` is bound, or
        refused, by searching the VALUES as a parse's would be."""
        tokens = shape.tokens
        constants = iter(shape.constants)
        check_values(params)
        rows: list[list[exp.Expr]] = []
        searched = False  # some value holds a `$n` left to bind or refuse
        for row in self.rows:
            items: list[exp.Expr] = []
            for value in row:
                item = _parameter(value, tokens, params, types)
                if item is None:
                    item = _value(value, tokens, constants)
                    searched = searched or _holds_parameter(value)
                items.append(item)
            rows.append(items)
        ctx = PlanContext(catalog, text, PLANNER)
        if not searched:
            planned = plan_insert_rows(self.item, self.columns, rows, ctx)
            if planned is not None:
                return planned
        values = exp.Values(
            expressions=[
                exp.Tuple(expressions=items) if is_tuple else items[0]
                for items, is_tuple in zip(rows, self.tuples, strict=True)
            ]
        )
        if searched:
            if params:
                replace_parameters(values, params, types)
            check_no_parameters(values)
        table = _value(self.table, tokens, iter(()))
        return plan_insert_values(self.item, self.columns, table, values, ctx)

    def prepared(
        self, plan: InsertPlan, params: list[str | None], types: list[ScalarType | None]
    ) -> PreparedInsert | None:
        """The fast path of one exact text (a prepared statement's) of this
        template, from `plan`, its planning with `params`: None unless it
        is one row whose values are constants or a `$n` of its column's own
        type (or an integer type into an integer column), all of
        `_PREPARED_TYPES` (whose planning is the type's input
        function alone, `coercion.parse_text_as`, which the binder calls
        for a `$n`'s text: `ScalarBinder.resolve_unknown`), and reading
        `params` again that way gives `plan`'s row."""
        expr = plan.expr
        if len(self.rows) != 1 or not isinstance(expr, Constant) or len(expr.rows) != 1:
            return None
        base, diff = expr.rows[0]
        desc = self.item.desc
        if diff != 1 or len(base) != desc.arity or plan.id != self.item.id:
            return None
        slots: list[_Slot] = []
        for column, value in zip(self.columns, self.rows[0], strict=True):
            column_type = desc.types[column]
            if not _prepared_type(column_type):
                return None
            if not _holds_parameter(value):
                continue  # constants: the same text, the same value
            assert not isinstance(value, int)
            tree = value[0]
            if type(tree) is not exp.Parameter or not tree.name.isdigit():
                return None
            n = int(tree.name) - 1
            if not 0 <= n < len(params) or n >= len(types):
                return None
            st, declared = column_type.scalar_type, types[n]
            if declared not in (None, st) and not (declared in INT_RANGES and st in INT_RANGES):
                return None  # a cast between types but integers': planned each time
            slots.append((column, n, declared or st, INT_RANGES.get(st)))
        fast = PreparedInsert(plan, tuple(base), tuple(slots))
        again = fast.plan(params)
        return fast if again is not None and again.expr == expr else None


# Column types a prepared INSERT's fast path takes: reading their text is
# `parse_text_as` alone (no session setting, no type modifier, no rounding).
_PREPARED_TYPES = frozenset(
    {ScalarType.SMALLINT, ScalarType.INTEGER, ScalarType.BIGINT, ScalarType.TEXT}
    | {ScalarType.BOOLEAN, ScalarType.DOUBLE}
)


def _prepared_type(column: ColumnType) -> bool:
    return column.scalar_type in _PREPARED_TYPES and column.length is None and not column.varchar


# A prepared INSERT's `$n` value: (table column, parameter index, the
# parameter's type, the column's integer range if it has one: an integer
# parameter of another integer type is read as its own type, then must fit,
# as its assignment cast).
_Slot = tuple[int, int, ScalarType, tuple[int, int] | None]


@dataclass(frozen=True)
class PreparedInsert:
    """A one-row INSERT ... VALUES text planned once (a prepared statement
    executed again): its row with each `$n` slot's value read from the
    parameter's text by its type's input function. Anything that would
    fail (NULL, NUL, a text the input function refuses) is left to the
    full planning, which reports it with its position."""

    first: InsertPlan  # the plan of the first execution (its table and desc)
    base: tuple[Any, ...]  # that row, in table order
    slots: tuple[_Slot, ...]

    def plan(self, params: Sequence[str | None]) -> InsertPlan | None:
        row = list(self.base)
        for column, n, st, fits in self.slots:
            text = params[n] if n < len(params) else None
            if text is None or "\x00" in text:
                return None
            try:
                value = parse_text_as(text, st)
            except SqlError:
                return None
            if fits is not None and not fits[0] <= value <= fits[1]:
                return None
            row[column] = value
        first = self.first
        assert isinstance(first.expr, Constant)
        expr = Constant(((tuple(row), 1),), first.expr.constant_desc)
        return InsertPlan(first.id, expr, first.name)


def _value(value: _Value, tokens: tuple[Token, ...], constants: Iterator[int]) -> exp.Expr:
    """One value of a template with this text's constants and positions."""
    if isinstance(value, int):
        return _literal(tokens[next(constants)])
    tree, marks = value
    node = tree.copy()
    for child, child_marks in zip(node.walk(bfs=False), marks, strict=True):
        if _is_constant(child):
            token = tokens[next(constants)]
            child.set("this", token.text)
            child.meta["line"], child.meta["col"] = token.line, token.col
        for name, index, at_end in child_marks:
            token = tokens[index]
            child.meta[name] = token.end if at_end else token.start
    return node


def _parameter(
    value: _Value,
    tokens: tuple[Token, ...],
    params: list[str | None],
    types: list[ScalarType | None],
) -> exp.Expr | None:
    """A value that is one `$n` with a value, bound (`params.bound_value`,
    at the `$` as `parameter_start` finds it in the tree); None for any
    other value."""
    if isinstance(value, int):
        return None
    tree, marks = value
    if type(tree) is not exp.Parameter or not tree.name.isdigit():
        return None
    n = int(tree.name)
    if not 1 <= n <= len(params):
        return None
    start = _start(marks[0], tokens)
    if start is None:
        inner = _start(marks[1], tokens) if len(marks) > 1 else None
        start = inner - 1 if inner else None
    return bound_value(params[n - 1], types[n - 1] if n <= len(types) else None, start)


def _holds_parameter(value: _Value) -> bool:
    return not isinstance(value, int) and any(
        isinstance(node, exp.Parameter) for node in value[0].walk()
    )


def _start(marks: tuple[_Mark, ...], tokens: tuple[Token, ...]) -> int | None:
    """The start offset a node's marks give it, if any."""
    return next((tokens[index].start for name, index, _ in marks if name == "start"), None)


def _literal(token: Token) -> exp.Literal:
    """The literal the parser makes of a constant token."""
    literal = exp.Literal(this=token.text, is_string=token.token_type is TokenType.STRING)
    meta = literal.meta
    meta["line"], meta["col"], meta["start"], meta["end"] = (
        token.line,
        token.col,
        token.start,
        token.end,
    )
    return literal


def template_of(statement: exp.Expr, shape: Shape, catalog: SqlCatalog) -> InsertTemplate | None:
    """The template of a parsed INSERT of `shape` (before binding), if its
    VALUES hold only constants and parameters and every constant token is
    one literal of them, in order; else None (it is planned each time)."""
    if not isinstance(statement, exp.Insert) or statement.args.get("default"):
        return None
    if any(value for name, value in statement.args.items() if name not in ("this", "expression")):
        return None  # RETURNING, ON CONFLICT, ... (refused by planning anyway)
    if not isinstance(statement.expression, exp.Values):
        return None
    if not all(_template_node(node) for node in statement.expression.walk()):
        return None
    copy = statement.copy()
    item, columns, table = insert_values_target(copy, PlanContext(catalog, "", PLANNER))
    tokens = shape.tokens
    edges = (
        {token.start: i for i, token in enumerate(tokens)},
        {token.end: i for i, token in enumerate(tokens)},
    )
    constants = iter(shape.constants)
    rows: list[tuple[_Value, ...]] = []
    tuples: list[bool] = []
    for row in copy.expression.expressions:  # its DEFAULTs now NULL
        is_tuple = isinstance(row, exp.Tuple)
        values: list[_Value] = []
        for node in row.expressions if is_tuple else [row]:
            if _is_constant(node):
                index = next(constants, None)
                if index is None or not _same(node, tokens[index]):
                    return None
                values.append(index)
                continue
            value = _positioned(node, tokens, edges, constants)
            if value is None:
                return None
            values.append(value)
        rows.append(tuple(values))
        tuples.append(is_tuple)
    table_value = _positioned(table, tokens, edges, iter(()))  # its positions move with spacing
    if table_value is None or next(constants, None) is not None:
        return None
    return InsertTemplate(item, columns, table_value, tuple(rows), tuple(tuples))


def _positioned(
    node: exp.Expr, tokens: tuple[Token, ...], edges: _Edges, constants: Iterator[int]
) -> tuple[exp.Expr, tuple[tuple[_Mark, ...], ...]] | None:
    """`node` with the token of each position its nodes record (consuming
    the constants it holds); None if a position is not a token's edge."""
    by_start, by_end = edges
    marks: list[tuple[_Mark, ...]] = []
    for child in node.walk(bfs=False):
        if _is_constant(child):
            index = next(constants, None)
            if index is None or not _same(child, tokens[index]):
                return None
        child_marks: list[_Mark] = []
        for name in _POSITIONS:
            offset = child.meta.get(name) if child._meta else None
            if offset is None:
                continue
            at = by_end.get(offset) if name == "end" else by_start.get(offset)
            if at is None:
                return None
            child_marks.append((name, at, name == "end"))
        marks.append(tuple(child_marks))
    return node, tuple(marks)


def _same(literal: exp.Expr, token: Token) -> bool:
    """Whether the parser made `literal` of `token` and nothing else."""
    string = token.token_type is TokenType.STRING
    return bool(
        literal.this == token.text
        and literal.is_string == string
        and literal.meta.get("start") == token.start
        and literal.meta.get("end") == token.end
        and set(literal.args) <= {"this", "is_string"}
    )


def _template_node(node: exp.Expr) -> bool:
    if isinstance(node, _TEMPLATE_NODES):
        return True
    return isinstance(node, exp.Column | exp.Var) and node.name.upper() == "DEFAULT"


def _is_constant(node: exp.Expr) -> bool:
    """A number or string written in the text (not a `$n`'s number)."""
    return (
        isinstance(node, exp.Literal)
        and bool(node._meta)
        and node.meta.get("start") is not None
        and not isinstance(node.parent, exp.Parameter)
    )
