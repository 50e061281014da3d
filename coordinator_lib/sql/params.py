"""Query parameters (`$1`, `$2`, ...) of the extended query protocol.

A client prepares a statement with parameters, may be told their types
(`parameter_types`, for ParameterDescription), then binds text values
(`bind_parameters`) and executes. Binding replaces each `$n` in a copy of the
syntax tree by a literal, so planning never sees a parameter (`plan_parsed`
refuses an unbound one with 42P02):

- a NULL value is NULL (cast to the type, if known);
- a value of known type is `CAST('<text>' AS <type>)`: the text is parsed as
  that type, as PostgreSQL parses a parameter's text;
- a value of unknown type is an untyped string literal, which the planner
  types from its context exactly like PostgreSQL's unknown-type literals
  (`int_col = $1` reads '5' as an integer; INSERT assigns it the column type).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence

from sqlglot import exp

from coordinator_lib.repr.relation import RelationDesc, ScalarType
from coordinator_lib.sql.catalog import SqlCatalog
from coordinator_lib.sql.coercion import scalar_type_of
from coordinator_lib.sql.dialect import Tidemark
from coordinator_lib.sql.errors import CharacterNotInRepertoire, ParseError, SqlError
from coordinator_lib.sql.escape_string import invalid_byte_sequence
from coordinator_lib.sql.positions import parameter_start
from coordinator_lib.sql.scope import ident_name, table_parts

S = ScalarType
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)


def _number(param: exp.Parameter) -> int:
    """n of `$n`; anything else the parser reads as a parameter (`@x`,
    which PostgreSQL reads as an operator) is a syntax error."""
    if not param.name.isdigit():
        start = parameter_start(param)
        raise ParseError(
            f'syntax error at or near "{param.name}"', start + 1 if start is not None else None
        )
    return int(param.name)


def parameter_count(statement: exp.Expr) -> int:
    """The highest `$n` in `statement` (0 without parameters)."""
    return max((_number(p) for p in statement.find_all(exp.Parameter)), default=0)


def data_type(st: ScalarType) -> exp.DataType:
    """The SQL type a ScalarType is written as (a tree of the caller's own)."""
    return _data_type(st).copy()


@functools.cache
def _data_type(st: ScalarType) -> exp.DataType:
    # An array or list as its element's (`map[text=>text][]` does not parse
    # as an array); other types by parsing the name: once per type, not per parameter.
    if st.element is not None:
        element = _data_type(st.element).copy()
        kind = exp.DType.LIST if st.is_list else exp.DType.ARRAY
        return exp.DataType(this=kind, expressions=[element], nested=True)
    return exp.DataType.build(st.value, dialect=Tidemark)


def _in_limit(param: exp.Parameter) -> bool:
    return isinstance(param.parent, exp.Limit | exp.Offset | exp.Fetch)


def _bound(param: exp.Parameter, value: str | None, st: ScalarType | None) -> exp.Expr:
    if value is not None and _in_limit(param) and value.strip().isdigit():
        return exp.Literal.number(value.strip())  # LIMIT/OFFSET take a constant integer
    return _value_node(value, st)


def _value_node(value: str | None, st: ScalarType | None) -> exp.Expr:
    node: exp.Expr = exp.Null() if value is None else exp.Literal.string(value)
    if st is not None:
        node = exp.Cast(this=node, to=data_type(st))
    return node


def bound_value(value: str | None, st: ScalarType | None, start: int | None) -> exp.Expr:
    """What a `$n` outside LIMIT/OFFSET becomes with `value` (text, None
    for NULL) of type `st` (None: unknown), its nodes positioned at the
    `$`'s `start` (errors about the value point there)."""
    return _at(_value_node(value, st), start)


def _at(node: exp.Expr, start: int | None) -> exp.Expr:
    if start is not None:
        for child in node.walk():
            child.meta["start"] = start
    return node


def check_values(values: Sequence[str | None]) -> None:
    """A value with NUL is 22021, as PostgreSQL refuses it before any input
    function."""
    for value in values:
        if value is not None and "\x00" in value:
            raise CharacterNotInRepertoire(invalid_byte_sequence(b"\x00"))


def bind_parameters(
    statement: exp.Expr,
    values: Sequence[str | None],
    types: Sequence[ScalarType | None] = (),
) -> exp.Expr:
    """A copy of `statement` with `$n` replaced by `values[n - 1]` (text
    format; None is NULL), typed by `types[n - 1]` when given and not None.
    Parameters without a value stay (planning then refuses them). A value
    with NUL is 22021, as PostgreSQL refuses it before any input function."""
    return replace_parameters(statement.copy(), values, types)


def replace_parameters(
    tree: exp.Expr,
    values: Sequence[str | None],
    types: Sequence[ScalarType | None] = (),
) -> exp.Expr:
    """`bind_parameters` in place, on a tree of the caller's own."""
    check_values(values)
    for param in list(tree.find_all(exp.Parameter)):
        n = _number(param)
        if not 1 <= n <= len(values):
            continue
        st = types[n - 1] if n <= len(types) else None
        param.replace(_at(_bound(param, values[n - 1], st), parameter_start(param)))
    return tree


# --- inferring types ------------------------------------------------------------------


class _Tables:
    """The catalog relations a statement names, by the name that qualifies
    their columns, for a cheap guess of a column's type."""

    def __init__(self, statement: exp.Expr, catalog: SqlCatalog) -> None:
        self.by_name: dict[str, RelationDesc] = {}
        for table in statement.find_all(exp.Table):
            if not isinstance(table.this, exp.Identifier):
                continue
            try:
                item = catalog.resolve(table_parts(table))
            except SqlError:
                continue  # a CTE, or an error planning will report
            alias = table.args.get("alias")
            name = ident_name(alias.this) if alias is not None and alias.this else item.name.item
            self.by_name.setdefault(name, item.desc)

    def column_type(self, node: exp.Expr) -> ScalarType | None:
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
            return None
        column = ident_name(node.this)
        qualifier = ident_name(node.args["table"]) if node.args.get("table") else None
        found = [
            desc.types[desc.names.index(column)].scalar_type
            for name, desc in self.by_name.items()
            if (qualifier is None or name == qualifier) and column in desc.names
        ]
        return found[0] if len(found) == 1 else None


def _note(types: list[ScalarType | None], node: exp.Expr | None, st: ScalarType | None) -> None:
    if isinstance(node, exp.Paren):
        node = node.unnest()
    if isinstance(node, exp.Parameter) and st is not None and types[_number(node) - 1] is None:
        types[_number(node) - 1] = st


def _insert_targets(statement: exp.Insert, catalog: SqlCatalog) -> list[ScalarType]:
    target = statement.this
    listed = list(target.expressions) if isinstance(target, exp.Schema) else []
    table = target.this if isinstance(target, exp.Schema) else target
    if not isinstance(table, exp.Table):
        return []
    try:
        desc = catalog.resolve(table_parts(table)).desc
    except SqlError:
        return []
    names = [ident_name(c) for c in listed] if listed else list(desc.names)
    return [desc.types[desc.names.index(n)].scalar_type for n in names if n in desc.names]


def parameter_types(statement: exp.Expr, catalog: SqlCatalog) -> list[ScalarType | None]:
    """A type for each `$1 .. $n` where the statement says it cheaply: an
    explicit cast, an INSERT or UPDATE target column, a comparison, IN or
    BETWEEN with a column, LIMIT/OFFSET; None where it does not (the
    client then sends text, which planning types from context)."""
    types: list[ScalarType | None] = [None] * parameter_count(statement)
    if not types:
        return types
    tables = _Tables(statement, catalog)
    for cast in statement.find_all(exp.Cast):
        with contextlib.suppress(SqlError):  # a type planning will refuse
            _note(types, cast.this, scalar_type_of(cast.args["to"]))
    if isinstance(statement, exp.Insert):
        targets = _insert_targets(statement, catalog)
        source = statement.expression
        rows: list[list[exp.Expr]] = []
        if isinstance(source, exp.Values):
            rows = [
                list(r.expressions) if isinstance(r, exp.Tuple) else [r] for r in source.expressions
            ]
        elif isinstance(source, exp.Select):
            rows = [[e.this if isinstance(e, exp.Alias) else e for e in source.expressions]]
        for row in rows:
            for node, st in zip(row, targets, strict=False):
                _note(types, node, st)
    if isinstance(statement, exp.Update):
        for assignment in statement.expressions:
            column = assignment.this
            if isinstance(column, exp.Column):
                _note(types, assignment.expression, tables.column_type(exp.column(column.name)))
    for node in statement.find_all(*_COMPARISONS, exp.Like, exp.ILike):
        _note(types, node.expression, tables.column_type(node.this))
        _note(types, node.this, tables.column_type(node.expression))
    for node in statement.find_all(exp.In):
        for item in node.expressions:
            _note(types, item, tables.column_type(node.this))
    for node in statement.find_all(exp.Between):
        st = tables.column_type(node.this)
        _note(types, node.args.get("low"), st)
        _note(types, node.args.get("high"), st)
    for param in statement.find_all(exp.Parameter):
        if _in_limit(param):
            _note(types, param, S.BIGINT)
    return types


__all__ = ["bind_parameters", "data_type", "parameter_count", "parameter_types"]
