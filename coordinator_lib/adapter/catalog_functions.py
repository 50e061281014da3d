"""PostgreSQL's catalog functions, operators and casts that client tools
(psql's describe commands, SQLAlchemy's inspector) use over pg_catalog,
resolved in the parsed statement before planning against the catalog at
that moment, as `regtype` is (session_functions.py):

- `pg_get_userbyid(oid)`: the role's name (OIDs from privileges.role_oids);
- `format_type(type_oid, typmod)`: the type's SQL name (pg_catalog.pg_type);
- `pg_get_viewdef(oid [, pretty])`: a view's or materialized view's query;
- `pg_get_expr(text, relid [, pretty])`: its text (Tidemark stores no
  expression trees in the catalog; the empty pg_attrdef has none anyway);
- `obj_description`, `col_description`, `shobj_description`: NULL (there are
  no comments); `pg_type_is_visible`, `pg_collation_is_visible`: TRUE;
- `x::regclass`: a relation's OID from its name or number, and an OID's name;
  `::oid` and `::pg_catalog.<type>` are the plain types (`oid` is `integer`,
  `char` is `text`);
- `array_to_string(ARRAY(subquery), sep)`: a string_agg over the subquery;
- `a OPERATOR(pg_catalog.op) b` is `a op b`; `COLLATE pg_catalog.default`
  (or "default") is the default collation, i.e. nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp

from coordinator_lib.adapter.pg_catalog import (
    BPCHAR_OID,
    INTERVAL_FULL_PRECISION,
    INTERVAL_OID,
    PG_TYPE_ROWS,
    TYPMOD_HEADER,
    VARCHAR_OID,
    interval_range,
)
from coordinator_lib.adapter.pg_class import user_relations
from coordinator_lib.adapter.privileges import role_oids
from coordinator_lib.repr.interval import QUALIFIERS
from coordinator_lib.sql.catalog import ItemKind
from coordinator_lib.sql.dialect import Tidemark
from coordinator_lib.sql.errors import SqlError

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator
    from coordinator_lib.adapter.session import Session

_NO_COMMENTS = ("obj_description", "col_description", "shobj_description")
_CATALOG_SCHEMAS = ("pg_catalog", "mz_catalog")
# Every type is in pg_catalog, on every search path; there are no collations.
_ALWAYS_VISIBLE = ("pg_type_is_visible", "pg_collation_is_visible")
# Types named `pg_catalog.<name>` in casts, and the planner's type for each.
_PLAIN_TYPES = {"oid": "int", "char": "text", "name": "text", "regproc": "text"}


class UndefinedTable(SqlError):
    code = "42P01"


def _call_name(node: exp.Expr) -> tuple[str, exp.Anonymous] | None:
    if isinstance(node, exp.Dot) and str(node.this).lower() in _CATALOG_SCHEMAS:
        node = node.expression
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower(), node
    return None


def _type_name(to: exp.Expr) -> tuple[str, bool]:
    """`pg_catalog.regclass` -> ('regclass', True); `oid` -> ('oid', False)."""
    text = to.sql(dialect=Tidemark).lower().replace('"', "")
    return text.removeprefix("pg_catalog."), text.startswith("pg_catalog.")


def _case(value: exp.Expr, pairs: dict[int, str], default: exp.Expr) -> exp.Expr:
    case = exp.Case(this=value.copy())
    for key, text in pairs.items():
        case = case.when(exp.Literal.number(key), exp.Literal.string(text))
    return case.else_(default)


def _with_length(name: exp.Expr, oid: exp.Expr, typmod: exp.Expr) -> exp.Expr:
    """format_type's name with varchar(n) / char(n)'s length from the typmod
    (and `bpchar` for char with typmod -1, which is not char(1))."""
    number = exp.Literal.number
    length = exp.cast(exp.Sub(this=typmod.copy(), expression=number(TYPMOD_HEADER)), "text")
    shown = exp.DPipe(
        this=exp.DPipe(
            this=exp.DPipe(this=name.copy(), expression=exp.Literal.string("(")),
            expression=length,
        ),
        expression=exp.Literal.string(")"),
    )
    lengths = exp.In(this=oid.copy(), expressions=[number(BPCHAR_OID), number(VARCHAR_OID)])
    given = exp.GTE(this=typmod.copy(), expression=number(TYPMOD_HEADER))
    bare = exp.and_(exp.EQ(this=oid.copy(), expression=number(BPCHAR_OID)), typmod.copy() < 0)
    interval = exp.and_(
        exp.EQ(this=oid.copy(), expression=number(INTERVAL_OID)), typmod.copy() >= 0
    )
    return (
        exp.Case()
        .when(exp.and_(lengths, given), shown)
        .when(bare, exp.Literal.string("bpchar"))
        .when(interval, _interval_name(typmod))
        .else_(name)
    )


def _interval_name(typmod: exp.Expr) -> exp.Expr:
    """`interval hour`, `interval day to second(0)`, `interval(2)` from an
    interval typmod (pg_catalog.interval_range, precision in the low 16 bits)."""
    number = exp.Literal.number
    fields = _case(
        exp.Div(this=typmod.copy(), expression=number(1 << 16)),
        {interval_range(q): f" {q.lower()}" for q in QUALIFIERS},
        exp.Literal.string(""),
    )
    digits = exp.Mod(this=typmod.copy(), expression=number(1 << 16))
    precision = (
        exp.Case()
        .when(
            exp.EQ(this=digits, expression=number(INTERVAL_FULL_PRECISION)), exp.Literal.string("")
        )
        .else_(
            exp.DPipe(
                this=exp.DPipe(
                    this=exp.Literal.string("("), expression=exp.cast(digits.copy(), "text")
                ),
                expression=exp.Literal.string(")"),
            )
        )
    )
    return exp.DPipe(
        this=exp.DPipe(this=exp.Literal.string("interval"), expression=fields),
        expression=precision,
    )


def _null_text() -> exp.Expr:
    return exp.cast(exp.Null(), "text")


class _Resolver:
    """The catalog facts one statement's substitutions need, read once."""

    def __init__(self, coord: Coordinator, session: Session):
        self.coord = coord
        self.session = session
        self.relations = user_relations(coord)
        self.names = {oid: item.name.item for oid, item in self.relations}

    def view_definitions(self) -> dict[int, str]:
        """OID -> the defining query of each view and materialized view."""
        by_id = {item.id: oid for oid, item in self.relations}
        kinds = (ItemKind.VIEW, ItemKind.MATERIALIZED_VIEW)
        views = {item.id for _, item in self.relations if item.kind in kinds}
        definitions = {}
        for entry in self.coord.catalog.entries():
            view = next((i for i in entry.ids if i in views), None)
            if view is None:
                continue
            create = sqlglot.parse_one(entry.create_sql, read=Tidemark)
            query = create.expression if isinstance(create, exp.Create) else None
            if isinstance(query, exp.Query):
                definitions[by_id[view]] = " " + query.sql(dialect=Tidemark, pretty=True) + ";"
        return definitions

    def regclass_oid(self, text: str) -> int:
        """'name', 'schema.name' or a number, as `'...'::regclass` reads it."""
        if text.strip().isdigit():
            return int(text)
        parts = [p.strip().strip('"') for p in text.split(".")]
        path = self.session.search_path if len(parts) == 1 else parts[-2:-1]
        for schema in path:
            for oid, item in self.relations:
                if (
                    item.name.database == self.session.database
                    and item.name.schema == schema
                    and item.name.item == parts[-1]
                ):
                    return oid
        raise UndefinedTable(f'relation "{text}" does not exist')

    def function(self, name: str, call: exp.Anonymous) -> exp.Expr | None:
        args = call.expressions
        if name == "pg_get_userbyid" and len(args) == 1:
            roles = {oid: role for role, oid in role_oids(self.coord).items()}
            unknown = exp.Concat(
                expressions=[
                    exp.Literal.string("unknown (OID="),
                    exp.cast(args[0].copy(), "text"),
                    exp.Literal.string(")"),
                ]
            )
            return _case(args[0], roles, unknown)
        if name == "format_type" and len(args) == 2:
            names = {row.oid: row.regtype for row in PG_TYPE_ROWS}
            return _with_length(_case(args[0], names, exp.Literal.string("???")), *args)
        if name == "pg_get_viewdef" and len(args) in (1, 2):
            return _case(args[0], self.view_definitions(), _null_text())
        if name == "pg_get_expr" and len(args) in (2, 3):
            return exp.cast(args[0].copy(), "text")
        if name in _NO_COMMENTS:
            return _null_text()
        if name in _ALWAYS_VISIBLE and len(args) == 1:
            return exp.true()
        if name == "array_to_string" and len(args) == 2:
            return _joined_subquery(args[0], args[1])
        return None

    def cast(self, node: exp.Cast) -> exp.Expr | None:
        to, qualified = _type_name(node.to)
        if to == "regclass":
            value = node.this
            if isinstance(value, exp.Literal) and value.is_string:
                return exp.Literal.number(self.regclass_oid(value.this))
            return _case(value, self.names, exp.cast(value.copy(), "text"))
        # Unqualified `char` is SQL's character(1); `pg_catalog.char` is "char".
        plain = _PLAIN_TYPES.get(to) if qualified or to == "oid" else None
        if plain is None and qualified:
            plain = to  # pg_catalog.text, pg_catalog.int2, ...
        if plain is not None:
            return exp.Cast(this=node.this.copy(), to=exp.DataType.build(plain, dialect=Tidemark))
        return None


def _joined_subquery(array: exp.Expr, separator: exp.Expr) -> exp.Expr | None:
    """`array_to_string(ARRAY(SELECT v FROM ... ORDER BY k), sep)` is
    `COALESCE((SELECT string_agg(v::text, sep ORDER BY k) FROM ...), '')`:
    the same text (NULL elements skipped by both, '' for no rows) without an
    array value. Other arrays are left to the planner."""
    query = array.expressions[0] if isinstance(array, exp.Array) else None
    if not isinstance(query, exp.Select) or len(query.expressions) != 1:
        return None
    query = query.copy()
    value = query.expressions[0].unalias()
    order = query.args.get("order")
    keys = []
    for ordered in order.expressions if order else []:
        key = ordered.this
        if isinstance(key, exp.Literal) and key.is_int:  # ORDER BY 1: the value
            ordered = ordered.copy()
            ordered.set("this", value.copy())
        keys.append(ordered.sql(dialect=Tidemark))
    order_by = f" ORDER BY {', '.join(keys)}" if keys else ""
    aggregate = sqlglot.parse_one(
        f"string_agg(CAST({value.sql(dialect=Tidemark)} AS TEXT), "
        f"{separator.sql(dialect=Tidemark)}{order_by})",
        read=Tidemark,
    )
    query.set("expressions", [aggregate])
    query.set("order", None)
    return exp.Coalesce(this=exp.Subquery(this=query), expressions=[exp.Literal.string("")])


def _operator(node: exp.Operator) -> exp.Expr:
    """`a OPERATOR(schema.op) b` -> `a op b`."""
    symbol = str(node.args.get("operator", "")).split(".")[-1]
    template = sqlglot.parse_one(f"SELECT __left {symbol} __right", read=Tidemark).expressions[0]
    sides = {"__left": node.this, "__right": node.expression}

    def fill(part: exp.Expr) -> exp.Expr:
        if isinstance(part, exp.Column) and part.name in sides and not part.table:
            return sides[part.name].copy()
        return part

    return template.transform(fill)


def _is_default_collation(node: exp.Collate) -> bool:
    name = node.expression.sql(dialect=Tidemark).lower().replace('"', "")
    return name in ("default", "pg_catalog.default")


def substitute_catalog_functions(
    statement: exp.Expr, coord: Coordinator, session: Session
) -> exp.Expr:
    resolver: _Resolver | None = None

    def resolve(node: exp.Expr) -> exp.Expr | None:
        nonlocal resolver
        if isinstance(node, exp.Operator):
            return _operator(node)
        if isinstance(node, exp.ArrayToString) and node.expression is not None:
            return _joined_subquery(node.this, node.expression)
        if isinstance(node, exp.Collate) and _is_default_collation(node):
            return node.this
        named = _call_name(node)
        if named is None and not isinstance(node, exp.Cast):
            return None
        resolver = resolver or _Resolver(coord, session)
        if named is not None:
            return resolver.function(*named)
        assert isinstance(node, exp.Cast)
        return resolver.cast(node)

    def replace(node: exp.Expr) -> exp.Expr:
        # transform does not descend into a replaced node: its operands
        # (`x::regclass::text`, nested calls) are resolved here.
        resolved = resolve(node)
        if resolved is None:
            return node
        resolved = resolved.transform(replace)
        named = _call_name(node)
        if named is not None and isinstance(node.parent, exp.Select):  # keep the call's name
            return exp.alias_(resolved, named[0])
        return resolved

    return statement.transform(replace, copy=True)
