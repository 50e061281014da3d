"""The `create_sql` the durable catalog stores, and how ALTER rewrites it.

The catalog re-plans every stored statement on restart, under whatever search
path the replaying process has, so the stored text must not depend on the
session that wrote it: `render_create_sql` prints the created object's name
and every catalog item the statement names fully qualified
(`materialize.public.t`), drops `IF NOT EXISTS` / `OR REPLACE` (the object
exists once stored) and writes out an index name the planner generated. Re-
planning the result gives the same plan.

`rename_in_create_sql` is what ALTER ... RENAME does to the renamed object's
own statement and to each dependent's: it rewrites, on the syntax tree, the
object's name, every reference to it and the column qualifiers that name it
(`t.a` in `SELECT t.a FROM materialize.public.t`).
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from coordinator_lib.sql.catalog import QualifiedName, quote_ident
from coordinator_lib.sql.dialect import (
    WRITTEN_NAME,
    CreateSource,
    InCluster,
    Tidemark,
    parse_sql,
)
from coordinator_lib.sql.errors import DuplicateAlias, InvalidParameter, UnsupportedFeature
from coordinator_lib.sql.scope import ident_name, table_parts

_KEYWORDS = frozenset(Tidemark.Tokenizer.KEYWORDS)


def identifier(name: str) -> exp.Identifier:
    """A name as an identifier that reads back as `name` (quoted when it must be)."""
    quoted = quote_ident(name) != name or name.upper() in _KEYWORDS
    return exp.Identifier(this=name, quoted=quoted)


def set_table_name(table: exp.Table, name: QualifiedName) -> None:
    """Make `table` name `name` with all three parts (keeps its alias)."""
    table.set("catalog", identifier(name.database))
    table.set("db", identifier(name.schema))
    table.set("this", identifier(name.item))


def render_create_sql(
    statement: exp.Expr,
    references: Mapping[int, QualifiedName],
    own: tuple[exp.Expr, QualifiedName] | None = None,
    *,
    index_name: str | None = None,
) -> str:
    """`statement` as the catalog stores it. `references` maps id() of each
    `exp.Table` of `statement` that named a catalog item to that item's name;
    `own` is the node naming the created object and its qualified name;
    `index_name` the name of a created index (written even if generated)."""
    copy = statement.copy()
    targets: dict[int, QualifiedName] = dict(references)
    if own is not None:
        targets[id(own[0])] = own[1]
    pairs = list(zip(list(statement.walk()), list(copy.walk()), strict=True))
    for original, copied in pairs:  # the copy has the original's shape
        name = targets.get(id(original))
        if name is not None and isinstance(copied, exp.Table):
            set_table_name(copied, name)
    if isinstance(copy, exp.Create | CreateSource):
        copy.set("exists", False)
    if isinstance(copy, exp.Create):
        copy.set("replace", False)
    if index_name is not None and isinstance(copy, exp.Create) and copy.kind == "INDEX":
        copy.this.set("this", identifier(index_name))
    _alias_written_calls(copy)
    return copy.sql(dialect=Tidemark)


def _alias_written_calls(statement: exp.Expr) -> None:
    """An unaliased call in a select list is named as it was written
    (`substr`), which sqlglot does not write back (SUBSTRING(... FROM ...)):
    the name becomes an alias, as in PostgreSQL's stored view definitions."""
    for select in list(statement.find_all(exp.Select)):
        for item in list(select.expressions):
            call = item
            while isinstance(call, exp.Window | exp.Filter):
                call = call.this
            name = call.meta.get(WRITTEN_NAME) if isinstance(call, exp.Func) else None
            if name is not None:
                item.replace(exp.alias_(item.copy(), identifier(str(name))))


def _parse_one(create_sql: str) -> exp.Expr:
    statements = parse_sql(create_sql)
    if len(statements) != 1:
        raise InvalidParameter(f"expected one stored statement, found {len(statements)}")
    return statements[0]


def _qualifier(column: exp.Column) -> tuple[str, ...]:
    parts = [column.args.get(k) for k in ("catalog", "db", "table")]
    return tuple(ident_name(p) for p in parts if p is not None and ident_name(p) != "")


def _set_qualifier(column: exp.Column, parts: tuple[str, ...]) -> None:
    keys = ("catalog", "db", "table")[-len(parts) :]
    for key, part in zip(keys, parts, strict=True):
        column.set(key, identifier(part))


def _from_items(select: exp.Select) -> list[exp.Expr]:
    """The FROM and JOIN items of one SELECT (not those of nested queries)."""
    items: list[exp.Expr] = []
    from_ = select.args.get("from_")
    if from_ is not None:
        items.append(from_.this)
    items += [join.this for join in select.args.get("joins") or []]
    return items


def _visible_name(item: exp.Expr) -> str | None:
    """The name a FROM item's columns are qualified by."""
    alias = item.args.get("alias")
    if alias is not None and alias.this is not None:
        return ident_name(alias.this)
    if isinstance(item, exp.Table):
        return ident_name(item.this)
    return None


def rename_in_create_sql(create_sql: str, old: QualifiedName, new: QualifiedName) -> str:
    """`create_sql` with the item `old` renamed to `new` (fully qualified, as
    `render_create_sql` stores them). Raises DuplicateAlias if a query would
    then name two FROM items alike."""
    statement = _parse_one(create_sql)
    for table in list(statement.find_all(exp.Table)):
        if table_parts(table) == old.parts:
            set_table_name(table, new)
    if isinstance(statement, exp.Create) and statement.kind == "INDEX":
        index = statement.this
        on = table_parts(index.args["table"])
        own = index.this
        if own is not None and (*on[:-1], ident_name(own)) == old.parts:
            index.set("this", identifier(new.item))
    for select in list(statement.find_all(exp.Select)):
        _rename_qualifiers(select, old, new)
    return statement.sql(dialect=Tidemark)


def _rename_qualifiers(select: exp.Select, old: QualifiedName, new: QualifiedName) -> None:
    items = _from_items(select)
    renamed = [
        i for i in items if isinstance(i, exp.Table) and table_parts(i) == new.parts and not i.alias
    ]
    if not renamed or old.item == new.item:
        return
    others = [i for i in items if all(i is not r for r in renamed)]
    if any(_visible_name(i) == new.item for i in others):
        raise DuplicateAlias(
            f'renaming {old} to {new} would make "{new.item}" name two FROM items '
            "in a dependent's query"
        )
    for column in list(select.find_all(exp.Column)):
        if column.find_ancestor(exp.Select) is not select:
            continue
        qualifier = _qualifier(column)
        if qualifier and qualifier == old.parts[-len(qualifier) :]:
            _set_qualifier(column, new.parts[-len(qualifier) :])


def with_cluster(create_sql: str, cluster: str) -> str:
    """`create_sql` pinned to `cluster` (`IN CLUSTER c`), for a materialized
    view, index or source created on the session's cluster: a restart then
    rebuilds it where it ran."""
    statement = _parse_one(create_sql)
    node = InCluster(this=identifier(cluster))
    if isinstance(statement, CreateSource):
        statement.set("cluster", node)
        return statement.sql(dialect=Tidemark)
    props = statement.args.get("properties") if isinstance(statement, exp.Create) else None
    kept = [p for p in props.expressions if not isinstance(p, InCluster)] if props else []
    materialized = any(isinstance(p, exp.MaterializedProperty) for p in kept)
    if not (isinstance(statement, exp.Create) and (statement.kind == "INDEX" or materialized)):
        raise UnsupportedFeature("only materialized views, indexes and sources run on a cluster")
    statement.set("properties", exp.Properties(expressions=[*kept, node]))
    return statement.sql(dialect=Tidemark)


__all__ = [
    "identifier",
    "rename_in_create_sql",
    "render_create_sql",
    "set_table_name",
    "with_cluster",
]
